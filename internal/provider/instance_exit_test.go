package provider_test

import (
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// A command that cannot be started fails the create, with the agent's
// message, and leaves nothing behind (CheckDestroy asks the engine).
func TestAccInstance_commandNotFound(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
		runInstanceTest(t, e, resource.TestStep{
			Config:      e.config(backendOpts{}, `command = ["/nonexistent-bin"]`),
			ExpectError: regexp.MustCompile(`(?s)nonexistent-bin.*no\s+such`),
		})
	})
}

// A command that ends by itself with 0 is legitimate: the sandbox stays
// stopped with its exit code, and the next plan is empty (a warning, not
// an in-place start on every apply).
func TestAccInstance_commandExitsByItself(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
		cfg := e.config(backendOpts{}, `command = ["true"]`)
		runInstanceTest(t, e,
			resource.TestStep{Config: cfg},
			resource.TestStep{
				Config:            cfg,
				ConfigPlanChecks:  resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
				ConfigStateChecks: []statecheck.StateCheck{expectStatus(driver.StatusStopped), statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("exit_code"), knownvalue.Int64Exact(0))},
			},
			resource.TestStep{Config: cfg, PlanOnly: true},
		)
	})
}
