package provider_test

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
)

// An instance handle written out, so that only validation runs: no engine
// is needed.
const literalInstanceHandle = `{
    backend = { driver = "docker", name = "v", settings = { host = "unix:///var/run/docker.sock" } }
    id      = "0123456789ab"
    name    = "v"
    type    = "container"
  }`

// initializerBadInputs: each body must fail planning with an error whose
// text matches want, which names the attribute at fault.
func initializerBadInputs() []struct{ name, body, want string } {
	return []struct{ name, body, want string }{
		{"kind", `kind = "redis"`, `kind`},
		{"settings unknown", `kind = "python"
  settings = { colour = "red" }`, `settings\.colour(?s).*no such setting`},
		{"settings check", `kind = "python"
  settings = { venv = "relative" }`, `settings\.venv`},
		{"settings required", `kind = "neo4j"`, `settings\.password(?s).*required`},
		{"sensitive settings check", `kind = "neo4j"
  sensitive_settings = { password = "short" }`, `sensitive_settings\.password(?s).*at least 8`},
		{"settings twice", `kind = "neo4j"
  settings = { password = "longenough" }
  sensitive_settings = { password = "longenough" }`, `Setting Given Twice(?s).*sensitive_settings`},
		{"settings on custom", `settings = { x = "1" }`, `settings\.x`},
		{"file path", `files = [{ path = "etc/x", content = "x" }]`, `files\[0\]\.path`},
		{"file mode", `files = [{ path = "/x", content = "x", mode = "rw-r--r--" }]`, `files\[0\]\.mode`},
		{"file both", `files = [{ path = "/x", content = "x", source = "/etc/hostname" }]`, `files\[0\]`},
		{"file neither", `files = [{ path = "/x" }]`, `files\[0\]`},
		{"file source missing", `files = [{ path = "/x", source = "/nonexistent/file" }]`, `files\[0\]\.source`},
		{"commands empty argv", `commands = [[]]`, `commands\[0\]`},
		{"commands empty program", `commands = [[""]]`, `commands\[0\]`},
		{"env key", `env = { "A=B" = "x" }`, `env`},
		{"service without command", `service = { ready = { tcp_port = 80 } }`, `service\.command(?s).*required`},
		{"service empty command", `service = { command = [] }`, `service\.command`},
		{"service workdir", `service = { command = ["x"], workdir = "rel" }`, `service\.workdir`},
		{"service timeout", `service = { command = ["x"], timeout = "soon" }`, `Invalid Duration(?s).*service\.timeout`},
		{"service timeout zero", `service = { command = ["x"], timeout = "0s" }`, `service\.timeout`},
		{"ready two probes", `service = { command = ["x"], ready = { tcp_port = 80, command = ["true"] } }`, `service\.ready(?s).*only one`},
		{"ready tcp port", `service = { command = ["x"], ready = { tcp_port = 70000 } }`, `service\.ready\.tcp_port`},
		{"ready http port", `service = { command = ["x"], ready = { http = { port = 0 } } }`, `service\.ready\.http\.port`},
		{"ready http path", `service = { command = ["x"], ready = { http = { port = 80, path = "health" } } }`, `service\.ready\.http\.path`},
		{"ready http status", `service = { command = ["x"], ready = { http = { port = 80, status = 42 } } }`, `service\.ready\.http\.status`},
		{"ready command", `service = { command = ["x"], ready = { command = [] } }`, `service\.ready\.command`},
		{"on_destroy empty", `on_destroy = [[]]`, `on_destroy\[0\]`},
		{"joern half auth", `kind = "joern"
  settings = { username = "u" }`, `settings\.username`},
		{"gdb target", `kind = "gdb_mcp"
  settings = { target = "a.out" }`, `settings\.target`},
	}
}

func TestAccInitializer_badInput(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("TF_ACC not set")
	}
	steps := []resource.TestStep{{
		Config:      `resource "sandbox_initializer" "test" {}`,
		PlanOnly:    true,
		ExpectError: regexp.MustCompile(`"instance" is required`),
	}}
	for _, c := range initializerBadInputs() {
		steps = append(steps, resource.TestStep{
			Config: fmt.Sprintf(`
resource "sandbox_initializer" "test" {
  instance = %s
  %s
}
`, literalInstanceHandle, c.body),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(c.want),
		})
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories, Steps: steps})
}
