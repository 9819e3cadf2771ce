package provider_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
)

// TestAccImage_notATarArchive: an archive that is no tar file is the
// configuration's fault, and the advice says so (not "check the engine's
// logs").
func TestAccImage_notATarArchive(t *testing.T) {
	eachBackend(t, func(t *testing.T, e accEnv) {
		p := filepath.Join(t.TempDir(), "rootfs.tar")
		if err := os.WriteFile(p, []byte("this is not a tar archive, just text that is long enough to fill a header block"), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := acctest.BackendConfigWith("test", e.driver, e.name, "") + fmt.Sprintf(`
resource "sandbox_image" "test" {
  backend = sandbox_backend.test.handle
  name    = "%s-img"
  archive = { path = %q }
}
`, e.name, p)
		runInstanceTest(t, e, resource.TestStep{Config: cfg, ExpectError: loose("not a tar archive", "an `archive` that is a tar file")})
	})
}
