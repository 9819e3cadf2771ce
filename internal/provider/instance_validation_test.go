package provider_test

import (
	"fmt"
	"os"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
)

// Handles written out, so that only planning runs: no engine is needed.
const (
	dockerHandle   = `{ driver = "docker", name = "v", settings = { host = "unix:///var/run/docker.sock", port_strategy = "dynamic" } }`
	internalHandle = `{ driver = "docker", name = "v", settings = { host = "unix:///var/run/docker.sock", internal = "true" } }`
	localHandle    = `{ driver = "local", name = "v", settings = { root = "/tmp/v", isolation = "bwrap" } }`
)

type badInput struct {
	name, handle, body string
	want               string // regexp the error must match, naming the attribute
}

func badInputs() []badInput {
	d := dockerHandle
	return []badInput{
		{"name", d, `name = "Bad_Name"`, `name`},
		{"name too long", d, `name = "` + fmt.Sprintf("%070d", 0) + `"`, `name`},
		{"type", d, `type = "pod"`, `type`},
		{"vm on docker", d, `type = "vm"`, `Virtual Machines Not Supported(?s).*type`},
		{"vm on local", localHandle, `type = "vm"`, `Virtual Machines Not Supported(?s).*type`},
		{"command empty", d, `command = []`, `command`},
		{"command empty arg", d, `command = [""]`, `command`},
		{"env key", d, `env = { "A=B" = "x" }`, `env`},
		{"workdir", d, `workdir = "relative/dir"`, `workdir`},
		{"user", d, `user = ""`, `user`},
		{"user uid -1", localHandle, `user = "4294967295"`, `Invalid User(?s).*user.*out of range`},
		{"user negative gid", d, `user = "1000:-1"`, `Invalid User(?s).*user.*out of range`},
		{"env reserved", localHandle, `env = { SBX_EXIT = "/etc/passwd" }`, `env\["SBX_EXIT"\](?s).*reserved`},
		{"labels reserved", d, `labels = { "sandbox.name" = "x" }`, `labels`},
		{"labels key", d, `labels = { "bad key" = "x" }`, `labels`},
		{"cpus", d, `cpus = 0`, `cpus`},
		{"memory unit", d, `memory = "12 parsecs"`, `Invalid Size(?s).*memory`},
		{"memory negative", d, `memory = "-1g"`, `memory`},
		{"memory zero", d, `memory = "0"`, `memory`},
		{"pids_limit", d, `pids_limit = -1`, `pids_limit`},
		{"disk", d, `disk = "lots"`, `disk`},
		{"disk on local", localHandle, `disk = "1GiB"`, `Limit Not Supported(?s).*disk`},
		{"network", d, `network = "host"`, `network`},
		{"port range", d, `ports = [{ name = "http", port = 70000 }]`, `ports\[0\]\.port`},
		{"port zero", d, `ports = [{ name = "http", port = 0 }]`, `ports\[0\]\.port`},
		{"port protocol", d, `ports = [{ name = "http", port = 80, protocol = "sctp" }]`, `ports\[0\]\.protocol`},
		{"port name", d, `ports = [{ name = "HTTP!", port = 80 }]`, `ports\[0\]\.name`},
		{"port names unique", d, `ports = [{ name = "a", port = 80 }, { name = "a", port = 81 }]`, `Duplicate Port Name(?s).*ports\[1\]\.name`},
		{"ports without network", d, `network = "none"
  ports = [{ name = "a", port = 80 }]`, `Ports Cannot Be Published(?s).*ports`},
		{"ports on internal docker", internalHandle, `ports = [{ name = "a", port = 80 }]`, `Ports Cannot Be Published(?s).*ports.*internal`},
		{"handle key of another driver", `{ driver = "docker", name = "v", settings = { project = "p" } }`, `name = "x"`,
			`Invalid Backend Handle(?s).*backend(?s).*"project"`},
		{"ports on local isolated", localHandle, `ports = [{ name = "a", port = 80 }]`, `Ports Cannot Be Published(?s).*ports.*bridge`},
		{"file path", d, `files = [{ path = "etc/x", content = "x" }]`, `files\[0\]\.path`},
		{"file mode", d, `files = [{ path = "/x", content = "x", mode = "rw-r--r--" }]`, `files\[0\]\.mode`},
		{"file mode digits", d, `files = [{ path = "/x", content = "x", mode = "0988" }]`, `files\[0\]\.mode`},
		{"file both", d, `files = [{ path = "/x", content = "x", source = "/etc/hostname" }]`, `files\[0\]`},
		{"file neither", d, `files = [{ path = "/x" }]`, `files\[0\]`},
		{"file source missing", d, `files = [{ path = "/x", source = "/nonexistent/file" }]`, `Source File Not Found(?s).*files\[0\]\.source`},
		{"volume target", d, `volumes = [{ volume = "data", target = "data" }]`, `volumes\[0\]\.target`},
		{"volume name", d, `volumes = [{ volume = "Data!", target = "/data" }]`, `volumes\[0\]\.volume`},
		{"lifetime", d, `lifetime = "2 hours"`, `Invalid Duration(?s).*lifetime`},
		{"lifetime bare number", d, `lifetime = "10"`, `lifetime`},
		{"lifetime zero", d, `lifetime = "0s"`, `lifetime`},
		{"lifetime days plus", d, `lifetime = "1d+1h"`, `Invalid Duration(?s).*lifetime(?s).*unknown unit`},
		{"lifetime nanoseconds", d, `lifetime = "1ns"`, `Invalid Duration(?s).*lifetime(?s).*unknown unit`},
		{"lifetime microseconds", d, `lifetime = "5µs"`, `Invalid Duration(?s).*lifetime(?s).*unknown unit`},
		{"lifetime below a millisecond", d, `lifetime = "1.0000000001s"`, `Invalid Duration(?s).*lifetime(?s).*finer(?s).*than(?s).*a(?s).*millisecond`},
		{"capability", d, `security = { capabilities = { add = ["net admin"] } }`, `security\.capabilities\.add`},
		{"image", d, `image = ""`, `image`},
	}
}

func TestAccInstance_badInput(t *testing.T) {
	if os.Getenv("TF_ACC") == "" {
		t.Skip("TF_ACC not set")
	}
	var steps []resource.TestStep
	for _, c := range badInputs() {
		image := `image = "busybox"`
		if regexp.MustCompile(`^image\b`).MatchString(c.body) {
			image = ""
		}
		steps = append(steps, resource.TestStep{
			Config: fmt.Sprintf(`
resource "sandbox_instance" "test" {
  backend = %s
  %s
  %s
}
`, c.handle, image, c.body),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(c.want),
		})
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories, Steps: steps})
}
