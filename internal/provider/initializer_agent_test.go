package provider_test

import (
	"os"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// dynamicBinary is a dynamically linked executable, as a cgo build of the
// provider is: it cannot serve as the agent in images without libc.
const dynamicBinary = "/bin/ls"

const serviceInit = `service = {
    command = ["httpd", "-f", "-p", "8080", "-h", "/srv"]
    ready   = { tcp_port = 8080 }
  }`

// A provider whose agent cannot run in sandboxes says so at plan time, with
// the check that failed and what to do, and creates nothing: a local
// sandbox and any initializer with a service are refused, a docker sandbox
// is warned about.
func TestAccInitializer_agentUnavailableFailsThePlan(t *testing.T) {
	for _, b := range accBackends() {
		t.Run(b.driver, func(t *testing.T) {
			b.precheck(t)
			good := acctest.AgentBinary(t)
			e := accEnv{accBackend: b, name: acctest.RandomName("tf-acc"), source: b.fixture(t)}
			acctest.SweepOnCleanup(t, acctest.DriverConfig(b.driver, e.name))
			t.Setenv(agent.EnvBinary, dynamicBinary)
			steps := []resource.TestStep{{
				Config:      e.initConfig("", initializer("test", serviceInit)),
				ExpectError: loose("Sandbox Agent Unavailable", "dynamically linked", "CGO_ENABLED=0 go install"),
			}}
			if b.driver == driver.Docker {
				// The sandbox alone is made, with Docker's init and a warning;
				// an initializer added once the agent is back finds none inside
				// and fails before running anything.
				steps = append(steps, resource.TestStep{Config: e.initConfig("", "")}, resource.TestStep{
					PreConfig:   func() { os.Setenv(agent.EnvBinary, good) },
					Config:      e.initConfig("", initializer("test", serviceInit)),
					ExpectError: loose("Sandbox Agent Unavailable", "does not answer there", "Nothing was run"),
				})
			}
			runInitTest(t, e, steps...)
		})
	}
}
