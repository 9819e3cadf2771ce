package provider_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// TestAccImage_dockerSharedTag: two backends on the same dockerd build the
// same tag from the same context. Docker tags are global to the engine, so
// the second build re-points the tag; each image keeps its own ID (the
// labels name the backend) and Read follows that ID, so neither image nor
// the instance running it is planned for replacement, and destroy removes
// both images and the tag.
func TestAccImage_dockerSharedTag(t *testing.T) {
	acctest.PreCheckDocker(t)
	acctest.AgentBinary(t)
	dir := acctest.BusyboxContext(t)
	a, b := acctest.RandomName("tf-acc"), acctest.RandomName("tf-acc")
	tag := a + "/shared:1"
	cfgA, cfgB := acctest.DriverConfig(driver.Docker, a), acctest.DriverConfig(driver.Docker, b)
	acctest.SweepOnCleanup(t, cfgA)
	acctest.SweepOnCleanup(t, cfgB)
	config := acctest.BackendConfigWith("a", driver.Docker, a, "") + acctest.BackendConfigWith("b", driver.Docker, b, "")
	for _, n := range []string{"a", "b"} {
		config += fmt.Sprintf(`
resource "sandbox_image" %[1]q {
  backend = sandbox_backend.%[1]s.handle
  name    = %[2]q
  build   = { context = %[3]q }
}

resource "sandbox_instance" %[1]q {
  backend = sandbox_backend.%[1]s.handle
  image   = sandbox_image.%[1]s.image_id
  name    = "shared-tag"
  %[4]s
}
`, n, tag, dir, sleepCmd)
	}
	ids := map[string]string{}
	keep := func(n string) resource.TestCheckFunc {
		return resource.TestCheckResourceAttrWith("sandbox_image."+n, "image_id", func(v string) error { ids[n] = v; return nil })
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy: acctest.ComposeChecks(acctest.CheckImageGone(cfgA, tag),
			acctest.CheckNoManagedObjects(cfgA), acctest.CheckNoManagedObjects(cfgB), checkImageIDsGone(cfgA, ids)),
		Steps: []resource.TestStep{
			{
				Config: config,
				Check:  resource.ComposeTestCheckFunc(keep("a"), keep("b")),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.CompareValuePairs("sandbox_image.a", tfjsonpath.New("image_id"),
						"sandbox_image.b", tfjsonpath.New("image_id"), compare.ValuesDiffer()),
				},
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				// A second plan of the same configuration: nothing for either backend.
				Config:           config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}

// checkImageIDsGone fails if any of the recorded image IDs is still on the engine.
func checkImageIDsGone(cfg driver.Config, ids map[string]string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		if len(ids) == 0 {
			return errors.New("no image IDs were recorded")
		}
		d, err := driver.Open(context.Background(), acctest.DirectConfig(cfg))
		if err != nil {
			return err
		}
		defer d.Close()
		for n, id := range ids {
			if _, err := d.InspectImage(context.Background(), id); !driver.IsNotFound(err) {
				return fmt.Errorf("image %s of backend %q (%s) is still on the engine (inspect: %v)", n, cfg.Name, id, err)
			}
		}
		return nil
	}
}
