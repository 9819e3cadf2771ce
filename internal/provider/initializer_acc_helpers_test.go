package provider_test

// Helpers of the sandbox_initializer acceptance tests. They build on the
// instance tests' fixtures (accEnv, withEngine, checkExec) and add Incus,
// whose busybox image is imported from the same rootfs tarball.

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

const initAddr = "sandbox_initializer.test"

// initBackends are the instance tests' backends plus Incus.
func initBackends() []accBackend {
	return append(accBackends(), accBackend{driver: driver.Incus, precheck: acctest.PreCheckIncus, fixture: func(t *testing.T) string {
		return fmt.Sprintf("archive = { path = %q }", acctest.BusyboxRootfsTarball(t))
	}})
}

// eachInitBackend runs f per backend, each behind its own gate.
func eachInitBackend(t *testing.T, f func(t *testing.T, e accEnv)) {
	for _, b := range initBackends() {
		t.Run(b.driver, func(t *testing.T) {
			b.precheck(t)
			acctest.AgentBinary(t)
			name := acctest.RandomName("tf-acc")
			acctest.SweepOnCleanup(t, acctest.DriverConfig(b.driver, name))
			f(t, accEnv{accBackend: b, name: name, source: b.fixture(t)})
		})
	}
}

// initConfig is the backend, image and a sleeping instance (plus
// instanceBody) and the given initializer resources. The instance has a
// writable /srv for the tests' marker files (the busybox image has no /tmp).
func (e accEnv) initConfig(instanceBody, initializers string) string {
	return e.configWith(backendOpts{}, initializers, sleepCmd+"\n  files = [{ path = \"/srv/.keep\", content = \"\" }]\n  "+instanceBody)
}

// initializer is one `sandbox_initializer` named name on the test instance.
func initializer(name, body string) string {
	return fmt.Sprintf(`
resource "sandbox_initializer" %q {
  instance = sandbox_instance.test.handle
  %s
}
`, name, body)
}

func runInitTest(t *testing.T, e accEnv, steps ...resource.TestStep) {
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories, CheckDestroy: e.checkDestroy(), Steps: steps})
}

// loose matches the parts in order, each with any whitespace (terraform
// wraps long error lines) where the part has a space.
func loose(parts ...string) *regexp.Regexp {
	q := make([]string, len(parts))
	for i, p := range parts {
		q[i] = strings.Join(strings.Fields(regexp.QuoteMeta(p)), `\s+`)
	}
	return regexp.MustCompile(`(?s)` + strings.Join(q, ".*"))
}

// expectInit checks one attribute of an initializer's state.
func expectInit(addr string, p tfjsonpath.Path, v knownvalue.Check) statecheck.StateCheck {
	return statecheck.ExpectKnownValue(addr, p, v)
}

func result(i int, field string) tfjsonpath.Path {
	return tfjsonpath.New("results").AtSliceIndex(i).AtMapKey(field)
}

var rfc3339Re = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`)

// inInstance runs a shell script in the test instance and compares its
// trimmed output.
func inInstance(want, script string) resource.TestCheckFunc {
	return checkExec(want, "sh", "-c", script)
}

// pidFile is the service pid file of the initializer addr in state.
func pidFile(s *terraform.State, addr string) (string, error) {
	rs, ok := s.RootModule().Resources[addr]
	if !ok {
		return "", fmt.Errorf("%s not in state", addr)
	}
	log := rs.Primary.Attributes["service_log"]
	if log == "" {
		return "", fmt.Errorf("%s has no service_log", addr)
	}
	return strings.TrimSuffix(log, ".log") + ".pid", nil
}

// killService kills the service of addr behind Terraform's back.
func (l *lastState) killService(t *testing.T, addr string) func() {
	return l.engine(t, func(ctx context.Context, d driver.Driver, id string) error {
		pf, err := pidFile(l.s, addr)
		if err != nil {
			return err
		}
		_, err = execOutput(ctx, d, id, "sh", "-c", `kill -9 "$(cat "$1")"`, "sh", pf)
		return err
	})
}

// deleteInstance deletes the test instance behind Terraform's back.
func (l *lastState) deleteInstance(t *testing.T) func() {
	return l.engine(t, func(ctx context.Context, d driver.Driver, id string) error {
		return d.DeleteInstance(ctx, id)
	})
}
