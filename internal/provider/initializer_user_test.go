package provider_test

import (
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
)

// TestAccInitializer_serviceAsSandboxUser: the contract's example runs the
// sandbox as `user = "1000:1000"` and starts a service; the agent must be
// reachable and its state directory (/.sandbox/run) writable by that user.
func TestAccInitializer_serviceAsSandboxUser(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
		svc := initializer("test", `
  service = {
    command = ["httpd", "-f", "-p", "18085", "-h", "/srv"]
    ready   = { tcp_port = 18085 }
    timeout = "20s"
  }`)
		runInitTest(t, e, resource.TestStep{
			Config: e.initConfig(`user = "1000:1000"`, svc),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(initAddr, tfjsonpath.New("service_running"), knownvalue.Bool(true)),
				statecheck.ExpectKnownValue(initAddr, tfjsonpath.New("ready_at"), knownvalue.StringRegexp(regexp.MustCompile(`^\d{4}-`))),
			},
			// The service runs as the sandbox's user.
			Check: inInstance("1000", "stat -c %u /proc/$(cat /.sandbox/run/*.pid)"),
		})
	})
}

// serviceUIDProbe is a readiness command that succeeds once the service
// listens and runs as uid 1000: the engine itself checks the user.
const serviceUIDProbe = `ready = { command = ["sh", "-c", "wget -q -O /dev/null http://127.0.0.1:18085/index.html && [ \"$(stat -c %u /proc/$(cat /.sandbox/run/*.pid))\" = 1000 ]"] }`

// TestAccInitializer_serviceUserOnRootSandbox: a root sandbox whose
// service runs as another user (`service.user`); the agent creates the log
// and pid file as root and drops to the user for the command.
func TestAccInitializer_serviceUserOnRootSandbox(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
		svc := initializer("test", `
  service = {
    command = ["httpd", "-f", "-p", "18085", "-h", "/srv"]
    user    = "1000:1000"
    ready   = { tcp_port = 18085 }
    timeout = "20s"
  }`)
		runInitTest(t, e, resource.TestStep{
			Config: e.initConfig(``, svc),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(initAddr, tfjsonpath.New("service_running"), knownvalue.Bool(true)),
			},
			Check: resource.ComposeTestCheckFunc(
				inInstance("1000", "stat -c %u /proc/$(cat /.sandbox/run/*.pid)"),
				inInstance("1000", "stat -c %u /.sandbox/run/*.log"),
			),
		})
	})
}

// TestAccRemote_sshServiceAsUser: on a remote engine the state directory
// is a root-owned volume; a non-root sandbox's service and a root
// sandbox's `service.user` both start, keep their log, and run as the user.
func TestAccRemote_sshServiceAsUser(t *testing.T) {
	acctest.PreCheckSSH(t)
	e := newRemoteEnv(t, acctest.SSHDriverConfig(acctest.RandomName("tf-acc")))
	instance := func(res, body string) string {
		return fmt.Sprintf(`
resource "sandbox_instance" %[1]q {
  backend = sandbox_backend.test.handle
  image   = sandbox_image.test.image_id
  name    = %[1]q
  command = ["sleep", "3600"]
  files   = [{ path = "/srv/index.html", content = "ok" }]
  %[2]s
}
`, res, body)
	}
	svc := func(res, user string) string {
		return fmt.Sprintf(`
resource "sandbox_initializer" %[1]q {
  instance = sandbox_instance.%[1]s.handle
  service = {
    command = ["httpd", "-f", "-p", "18085", "-h", "/srv"]
    %[2]s
    %[3]s
    timeout = "30s"
  }
}
`, res, user, serviceUIDProbe)
	}
	cfg := e.backendHCL("test") + fmt.Sprintf(`
resource "sandbox_image" "test" {
  backend = sandbox_backend.test.handle
  name    = %q
  build   = { context = %q }
}
`, e.image(), e.context) +
		instance("nonroot", `user = "1000:1000"`) + svc("nonroot", "") +
		instance("rootsb", "") + svc("rootsb", `user = "1000:1000"`)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             e.checkDestroy(),
		Steps: []resource.TestStep{{
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("sandbox_initializer.nonroot", tfjsonpath.New("service_running"), knownvalue.Bool(true)),
				statecheck.ExpectKnownValue("sandbox_initializer.rootsb", tfjsonpath.New("service_running"), knownvalue.Bool(true)),
			},
		}},
	})
}
