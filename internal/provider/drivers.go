package provider

// The drivers compiled into the provider. Each registers itself with
// internal/driver from its init function; the provider reaches them only
// through driver.Pool. The local driver needs Linux (bubblewrap, Linux-only
// syscalls) and is registered from drivers_linux.go; elsewhere a `local`
// backend fails at plan time (see localDriverUnavailable).
import (
	"fmt"
	"runtime"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	_ "github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/docker"
	_ "github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/incus"
)

// driverUnavailableDetail explains why a backend's driver is not in this
// build for goos (runtime.GOOS). The local driver is left out on purpose
// where it cannot run.
func driverUnavailableDetail(name, goos string) string {
	if name == "local" && goos != "linux" {
		return fmt.Sprintf("The `local` backend needs Linux (bubblewrap): it runs sandboxes in Linux namespaces, "+
			"and this provider runs on %s/%s. Use a `docker` or `incus` backend here (a remote engine works too), "+
			"or run Terraform on a Linux machine for `local`. This build has %v.",
			goos, runtime.GOARCH, driver.Registered())
	}
	return fmt.Sprintf("This build of the provider has no `%s` driver (it has %v). Use one of those, or a provider build that includes it.",
		name, driver.Registered())
}
