package acctest

import (
	"fmt"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// BackendConfig is the HCL of `resource "sandbox_backend" "test"` named name
// on the driver drv, matching DriverConfig(drv, name): docker and incus with
// their defaults, local under LocalRoot() with the default bwrap isolation.
func BackendConfig(drv, name string) string {
	return BackendConfigWith("test", drv, name, "")
}

// BackendConfigWith is BackendConfig with another resource name and extra
// attributes inside the driver block (e.g. `internal = true`).
func BackendConfigWith(resourceName, drv, name, extra string) string {
	block := ""
	switch drv {
	case driver.Local:
		block = fmt.Sprintf("root = %q\n    %s", LocalRoot(), extra)
	default:
		block = extra
	}
	return fmt.Sprintf(`
resource "sandbox_backend" %q {
  name = %q
  %s = {
    %s
  }
}
`, resourceName, name, drv, block)
}
