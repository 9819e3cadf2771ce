package provider_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

const volumeAddr = "sandbox_volume.test"

// volumeHCL is the test backend (with extra driver settings) and a volume.
func volumeHCL(drv, backend, backendExtra, volume, body string) string {
	return acctest.BackendConfigWith("test", drv, backend, backendExtra) + fmt.Sprintf(`
resource "sandbox_volume" "test" {
  backend = sandbox_backend.test.handle
  name    = %q
  %s
}
`, volume, body)
}

func TestAccVolume_docker(t *testing.T) {
	acctest.PreCheckDocker(t)
	testAccVolumeLifecycle(t, driver.Docker, `advertise_host = "127.0.0.2"`)
}

func TestAccVolume_local(t *testing.T) {
	acctest.PreCheckLocal(t)
	testAccVolumeLifecycle(t, driver.Local, `isolation = "none"`)
}

func TestAccVolume_incus(t *testing.T) {
	acctest.PreCheckIncus(t)
	testAccVolumeLifecycle(t, driver.Incus, `advertise_host = "127.0.0.2"`)
}

// testAccVolumeLifecycle: create seeded from a directory, import, update in
// place when the backend's connection settings change (backendUpdate),
// replacement when a file of the source changes, deletion outside
// Terraform, and destroy checked on the engine.
func testAccVolumeLifecycle(t *testing.T, drv, backendUpdate string) {
	backend := acctest.RandomName("tf-acc")
	volume := "data"
	cfg := acctest.DriverConfig(drv, backend)
	acctest.SweepOnCleanup(t, cfg)
	src := t.TempDir()
	writeSeed := func(content string) {
		if err := os.WriteFile(filepath.Join(src, "seed.txt"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeSeed("v1")
	body := fmt.Sprintf("source = %q\n  labels = { team = \"acc\" }", src)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             acctest.ComposeChecks(acctest.CheckVolumeGone(cfg, volume), acctest.CheckNoManagedObjects(cfg)),
		Steps: []resource.TestStep{
			createFingerprintedStep(volumeAddr, volumeHCL(drv, backend, "", volume, body),
				statecheck.ExpectKnownValue(volumeAddr, tfjsonpath.New("id"), knownvalue.StringRegexp(regexp.MustCompile("/"+volume+"$"))),
			),
			{
				ResourceName:            volumeAddr,
				ImportState:             true,
				ImportStateId:           backendImportID(drv, backend) + "/" + volume,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"source"}, // the engine does not record where the seed came from
			},
			{
				Config:           volumeHCL(drv, backend, backendUpdate, volume, body),
				ConfigPlanChecks: planExpects(volumeAddr, plancheck.ResourceActionUpdate),
			},
			{
				PreConfig:        func() { writeSeed("v2") },
				Config:           volumeHCL(drv, backend, backendUpdate, volume, body),
				ConfigPlanChecks: planExpects(volumeAddr, plancheck.ResourceActionDestroyBeforeCreate),
			},
			deletedOutsideStep(t, cfg, volumeAddr, volumeHCL(drv, backend, backendUpdate, volume, body), func(ctx context.Context, d driver.Driver) error {
				return d.DeleteVolume(ctx, volume)
			}),
		},
	})
}

// TestAccVolume_invalidInput plans bad values for every attribute; each is
// refused at plan time naming the attribute, and nothing is created.
func TestAccVolume_invalidInput(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ drv, name, body, want string }{
		{driver.Docker, "Bad_Name", ``, `Invalid Name`},
		{driver.Docker, "ok", fmt.Sprintf(`source = %q`, filepath.Join(dir, "missing")), `source`},
		{driver.Docker, "ok", fmt.Sprintf(`source = %q`, file), `(?s)source.*not a directory`},
		{driver.Docker, "ok", `source = ""`, `source`},
		{driver.Docker, "ok", `labels = { "-bad" = "x" }`, `labels`},
		{driver.Kubernetes, "ok", ``, `Volumes Not Supported`},
	}
	steps := []resource.TestStep{}
	for _, c := range cases {
		backend, handle := acctest.BackendConfig(c.drv, "bad"), "sandbox_backend.test.handle"
		if c.drv == driver.Kubernetes { // a handle literal: planning it needs no kubernetes driver
			backend, handle = "", `{ driver = "kubernetes", name = "bad", kubernetes = { namespace = "bad" } }`
		}
		steps = append(steps, resource.TestStep{
			Config:   backend + fmt.Sprintf("resource \"sandbox_volume\" \"test\" {\n  backend = %s\n  name = %q\n  %s\n}\n", handle, c.name, c.body),
			PlanOnly: true, ExpectError: regexp.MustCompile(c.want),
		})
	}
	steps = append(steps, resource.TestStep{
		Config:   "resource \"sandbox_volume\" \"test\" {\n  backend = { driver = \"podman\", name = \"x\" }\n  name = \"ok\"\n}\n",
		PlanOnly: true, ExpectError: regexp.MustCompile(`backend\.driver`),
	})
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories, Steps: steps})
}
