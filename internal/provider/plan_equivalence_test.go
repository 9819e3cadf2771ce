package provider_test

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// TestAccInstance_equivalentSpellings: `env = {}` and no env, labels
// likewise, and ports listed in another order are the same sandbox: an
// in-place update, never a replacement, then an empty plan.
func TestAccInstance_equivalentSpellings(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
		sameID := statecheck.CompareValue(compare.ValuesSame())
		step := func(body string, action plancheck.ResourceActionType) resource.TestStep {
			return resource.TestStep{
				Config:            e.config(backendOpts{}, sleepCmd+"\n  network = \"bridge\"\n"+body),
				ConfigPlanChecks:  expectAction(action),
				ConfigStateChecks: []statecheck.StateCheck{sameID.AddStateValue(instanceAddr, tfjsonpath.New("id"))},
			}
		}
		runInstanceTest(t, e,
			step(`env = {}
  labels = {}
  ports = [{ name = "a", port = 18091 }, { name = "b", port = 18092, protocol = "udp" }]`, plancheck.ResourceActionCreate),
			step(`ports = [{ name = "b", port = 18092, protocol = "udp" }, { name = "a", port = 18091, protocol = "tcp" }]`,
				plancheck.ResourceActionUpdate),
			step(`env = {}
  labels = {}
  ports = [{ name = "b", port = 18092, protocol = "udp" }, { name = "a", port = 18091 }]`, plancheck.ResourceActionUpdate),
		)
	})
}

// TestAccBackend_dockerImportThenDefault: an import ID that does not spell
// out `internal` (the documented grammar) followed by a configuration that
// writes `internal = false` updates in place; it must not replace the
// backend (and with it the network of every sandbox on it).
func TestAccBackend_dockerImportThenDefault(t *testing.T) {
	acctest.PreCheckDocker(t)
	name := acctest.RandomName("tf-acc")
	cfg := acctest.DriverConfig(driver.Docker, name)
	acctest.SweepOnCleanup(t, cfg)
	hcl := backendHCL(driver.Docker, name, "internal = false")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             acctest.CheckNoManagedObjects(cfg),
		Steps: []resource.TestStep{
			{Config: hcl},
			{
				// Forget it, keep the network; then import it in an import block.
				Config: "removed {\n  from = " + backendAddr + "\n  lifecycle { destroy = false }\n}\n",
				Check:  checkScope(cfg, true),
			},
			{
				Config:           hcl + fmt.Sprintf("import {\n  to = %s\n  id = %q\n}\n", backendAddr, backendImportID(driver.Docker, name)),
				ConfigPlanChecks: planExpects(backendAddr, plancheck.ResourceActionUpdate),
				Check:            checkScope(cfg, true),
			},
			{
				Config:           backendHCL(driver.Docker, name, "internal = true"),
				ConfigPlanChecks: planExpects(backendAddr, plancheck.ResourceActionDestroyBeforeCreate),
			},
		},
	})
}
