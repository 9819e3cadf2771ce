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

const imageAddr = "sandbox_image.test"

var sourceHashRe = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// imageHCL is the test backend plus an image with the given source and
// extra attributes.
func imageHCL(drv, backend, image, source, extra string) string {
	return acctest.BackendConfig(drv, backend) + fmt.Sprintf(`
resource "sandbox_image" "test" {
  backend = sandbox_backend.test.handle
  name    = %q
  %s
  %s
}
`, image, source, extra)
}

func TestAccImage_dockerBuild(t *testing.T) {
	acctest.PreCheckDocker(t)
	dir := acctest.BusyboxContext(t)
	testAccImageLifecycle(t, driver.Docker, fmt.Sprintf(`build = { context = %q }`, dir), func() {
		if err := os.WriteFile(filepath.Join(dir, "extra.txt"), []byte("changed"), 0o644); err != nil {
			t.Fatal(err)
		}
	})
}

func TestAccImage_localArchive(t *testing.T) {
	acctest.PreCheckLocal(t)
	tarball := acctest.BusyboxRootfsTarball(t)
	testAccImageLifecycle(t, driver.Local, fmt.Sprintf(`archive = { path = %q }`, tarball), func() {
		acctest.WriteBusyboxRootfsTarball(t, tarball, map[string]string{"etc/motd": "changed"})
	})
}

func TestAccImage_incusArchive(t *testing.T) {
	acctest.PreCheckIncus(t)
	tarball := acctest.BusyboxRootfsTarball(t)
	testAccImageLifecycle(t, driver.Incus, fmt.Sprintf(`archive = { path = %q }`, tarball), func() {
		acctest.WriteBusyboxRootfsTarball(t, tarball, map[string]string{"etc/motd": "changed"})
	})
}

// testAccImageLifecycle: create, import, update keep in place, replacement
// when the source content changes (change does that), deletion outside
// Terraform, and destroy checked on the engine.
func testAccImageLifecycle(t *testing.T, drv, source string, change func()) {
	backend := acctest.RandomName("tf-acc")
	image := backend + "/busybox:1"
	cfg := acctest.DriverConfig(drv, backend)
	acctest.SweepOnCleanup(t, cfg)
	labels := `labels = { team = "acc" }`
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             acctest.ComposeChecks(acctest.CheckImageGone(cfg, image), acctest.CheckNoManagedObjects(cfg)),
		Steps: []resource.TestStep{
			createFingerprintedStep(imageAddr, imageHCL(drv, backend, image, source, labels),
				statecheck.ExpectKnownValue(imageAddr, tfjsonpath.New("image_id"), knownvalue.NotNull()),
				statecheck.ExpectKnownValue(imageAddr, tfjsonpath.New("keep"), knownvalue.Bool(false)),
				statecheck.ExpectKnownValue(imageAddr, tfjsonpath.New("id"), knownvalue.StringRegexp(regexp.MustCompile("#"+regexp.QuoteMeta(image)+"$"))),
			),
			{
				ResourceName:            imageAddr,
				ImportState:             true,
				ImportStateId:           backendImportID(drv, backend) + "#" + image,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"build", "archive", "labels"}, // adopted from configuration after import
			},
			{
				Config:            imageHCL(drv, backend, image, source, labels+"\n  keep = true"),
				ConfigPlanChecks:  planExpects(imageAddr, plancheck.ResourceActionUpdate),
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue(imageAddr, tfjsonpath.New("keep"), knownvalue.Bool(true))},
			},
			{
				Config:           imageHCL(drv, backend, image, source, labels),
				ConfigPlanChecks: planExpects(imageAddr, plancheck.ResourceActionUpdate),
			},
			{
				PreConfig:        change,
				Config:           imageHCL(drv, backend, image, source, labels),
				ConfigPlanChecks: planExpects(imageAddr, plancheck.ResourceActionDestroyBeforeCreate),
			},
			deletedOutsideStep(t, cfg, imageAddr, imageHCL(drv, backend, image, source, labels), func(ctx context.Context, d driver.Driver) error {
				return d.DeleteImage(ctx, image, "")
			}),
		},
	})
}

// TestAccImage_invalidInput plans bad values for every attribute; each is
// refused at plan time naming the attribute, and nothing is created.
func TestAccImage_invalidInput(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte("FROM scratch\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	build := fmt.Sprintf(`build = { context = %q }`, dir)
	cases := []struct{ drv, name, body, want string }{
		{driver.Docker, "Bad Name", build, `Invalid Image Name`},
		{driver.Docker, "ok", ``, `(?s)Missing Attribute Configuration.*build`},
		{driver.Docker, "ok", build + "\n  pull = { ref = \"busybox\" }", `(?s)Invalid Attribute Combination.*pull`},
		{driver.Docker, "ok", fmt.Sprintf(`build = { context = %q }`, missing), `build\.context`},
		{driver.Docker, "ok", fmt.Sprintf(`build = { context = %q, dockerfile = "Nope" }`, dir), `build\.dockerfile`},
		{driver.Docker, "ok", fmt.Sprintf(`build = { context = %q, dockerfile = "" }`, dir), `build\.dockerfile`},
		{driver.Docker, "ok", fmt.Sprintf(`build = { context = %q, args = "x" }`, dir), `args`},
		{driver.Docker, "ok", fmt.Sprintf(`build = { context = %q, target = "" }`, dir), `build\.target`},
		{driver.Docker, "ok", `pull = { ref = "" }`, `pull\.ref`},
		{driver.Docker, "ok", fmt.Sprintf(`archive = { path = %q }`, missing), `archive\.path`},
		{driver.Docker, "ok", build + "\n  keep = \"maybe\"", `keep`},
		{driver.Docker, "ok", build + "\n  labels = { \"sandbox.x\" = \"y\" }", `labels`},
		{driver.Local, "ok", build, `(?s)Image Source Not Supported.*build`},
		{driver.Local, "ok", `pull = { ref = "busybox" }`, `(?s)Image Source Not Supported.*pull`},
	}
	steps := []resource.TestStep{}
	for _, c := range cases {
		steps = append(steps, resource.TestStep{
			Config: imageHCL(c.drv, "bad", c.name, c.body, ""), PlanOnly: true, ExpectError: regexp.MustCompile(c.want),
		})
	}
	steps = append(steps, resource.TestStep{
		Config: `
resource "sandbox_image" "test" {
  backend = { driver = "podman", name = "x" }
  name    = "ok"
  pull    = { ref = "busybox" }
}`,
		PlanOnly: true, ExpectError: regexp.MustCompile(`backend\.driver`),
	})
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories, Steps: steps})
}
