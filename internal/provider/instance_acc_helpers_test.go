package provider_test

// Helpers of the sandbox_instance acceptance tests: one backend fixture per
// driver, engine access for checks (exec, delete and stop outside
// Terraform), and CheckDestroy asking the engine.

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/provider"
)

const instanceAddr = "sandbox_instance.test"

// accBackend is one backend the instance tests run against.
type accBackend struct {
	driver   string
	precheck func(t *testing.T)
	// fixture is the image source for sandbox_image "test": a busybox
	// build context (docker) or a busybox rootfs tarball (local).
	fixture func(t *testing.T) string
}

// accBackends lists the drivers every instance scenario runs on.
func accBackends() []accBackend {
	return []accBackend{
		{driver: driver.Docker, precheck: acctest.PreCheckDocker, fixture: func(t *testing.T) string {
			return fmt.Sprintf("build = { context = %q }", acctest.BusyboxContext(t))
		}},
		{driver: driver.Local, precheck: acctest.PreCheckLocal, fixture: func(t *testing.T) string {
			return fmt.Sprintf("archive = { path = %q }", acctest.BusyboxRootfsTarball(t))
		}},
	}
}

// accEnv is one test's backend: its name, image source and engine config.
type accEnv struct {
	accBackend
	name   string
	source string
}

// eachBackend runs f as a subtest per driver, each behind its own gate,
// with a fresh backend name and the agent built.
func eachBackend(t *testing.T, f func(t *testing.T, e accEnv)) {
	for _, b := range accBackends() {
		t.Run(b.driver, func(t *testing.T) {
			b.precheck(t)
			acctest.AgentBinary(t)
			f(t, accEnv{accBackend: b, name: acctest.RandomName("tf-acc"), source: b.fixture(t)})
		})
	}
}

// backendOpts are extra attributes of the backend's driver block.
type backendOpts struct {
	portStrategy string // docker: loopback_ip | dynamic
}

// config is a whole configuration: backend, image and one instance whose
// body is given (backend, image and name are filled in).
func (e accEnv) config(o backendOpts, body string) string {
	return e.configWith(o, "", body)
}

// configWith is config plus other resources (e.g. a sandbox_volume).
func (e accEnv) configWith(o backendOpts, resources, body string) string {
	extra := ""
	if o.portStrategy != "" {
		extra = fmt.Sprintf("port_strategy = %q", o.portStrategy)
	}
	return acctest.BackendConfigWith("test", e.driver, e.name, extra) + fmt.Sprintf(`
resource "sandbox_image" "test" {
  backend = sandbox_backend.test.handle
  name    = "%s-img"
  %s
}

resource "sandbox_instance" "test" {
  backend = sandbox_backend.test.handle
  image   = sandbox_image.test.image_id
  name    = %q
  %s
}
%s
`, e.name, e.source, e.name, body, resources)
}

// checkDestroy asks the engine that the backend and its instances are gone.
func (e accEnv) checkDestroy() resource.TestCheckFunc {
	return acctest.CheckNoManagedObjects(acctest.DriverConfig(e.driver, e.name))
}

// engineConfig rebuilds the driver.Config of an instance from its state
// (the flattened `backend` handle), as the provider does.
func engineConfig(attrs map[string]string) (driver.Config, error) {
	settings := map[string]string{}
	for k, v := range attrs {
		if key, ok := strings.CutPrefix(k, "backend.settings."); ok && key != "%" {
			settings[key] = v
		}
	}
	return provider.ConfigFromSettings(attrs["backend.driver"], attrs["backend.name"], settings)
}

// withEngine opens the instance's backend driver and calls f with it and
// the instance's ID.
func withEngine(s *terraform.State, f func(ctx context.Context, d driver.Driver, id string) error) error {
	rs, ok := s.RootModule().Resources[instanceAddr]
	if !ok {
		return fmt.Errorf("%s not in state", instanceAddr)
	}
	cfg, err := engineConfig(rs.Primary.Attributes)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d, err := driver.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer d.Close()
	return f(ctx, d, rs.Primary.ID)
}

// lastState keeps the state seen by the last check, so a PreConfig can act
// on the engine object of the previous step.
type lastState struct{ s *terraform.State }

func (l *lastState) keep(s *terraform.State) error { l.s = s; return nil }

func (l *lastState) engine(t *testing.T, f func(ctx context.Context, d driver.Driver, id string) error) func() {
	return func() {
		if l.s == nil {
			t.Fatal("no state from the previous step")
		}
		if err := withEngine(l.s, f); err != nil {
			t.Fatal(err)
		}
	}
}

// execOutput runs a command in the instance and returns its stdout.
func execOutput(ctx context.Context, d driver.Driver, id string, cmd ...string) (string, error) {
	res, err := d.Exec(ctx, id, driver.ExecSpec{Command: cmd})
	if err != nil {
		return "", fmt.Errorf("exec %v: %w", cmd, err)
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("exec %v: exit %d: %s", cmd, res.ExitCode, res.Stderr)
	}
	return string(res.Stdout), nil
}

// checkExec checks the output of a command run inside the instance.
func checkExec(want string, cmd ...string) func(*terraform.State) error {
	return func(s *terraform.State) error {
		return withEngine(s, func(ctx context.Context, d driver.Driver, id string) error {
			out, err := execOutput(ctx, d, id, cmd...)
			if err != nil {
				return err
			}
			if strings.TrimSpace(out) != want {
				return fmt.Errorf("%v printed %q, want %q", cmd, out, want)
			}
			return nil
		})
	}
}

func writeTempFile(t *testing.T, content string) string {
	t.Helper()
	f, err := os.CreateTemp(t.TempDir(), "src-*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return f.Name()
}

var (
	loopbackRe = regexp.MustCompile(`^127\.\d+\.\d+\.\d+$`)
	sha256Re   = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

func writeFile(name, content string) error { return os.WriteFile(name, []byte(content), 0o644) }
