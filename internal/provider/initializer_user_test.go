package provider_test

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
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
