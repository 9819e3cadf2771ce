package provider_test

// The built-in kinds whose software Debian packages (python3, gdb) run for
// real in the Debian fixture image. neo4j and joern cannot be had here; their
// exact expansion is unit-tested in internal/initplan.

import (
	"archive/zip"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// debianConfig is a Docker backend and a sleeping Debian instance, plus
// the given initializers.
func debianConfig(name, image, initializers string) string {
	return acctest.BackendConfig(driver.Docker, name) + fmt.Sprintf(`
resource "sandbox_instance" "test" {
  backend = sandbox_backend.test.handle
  image   = %q
  name    = %q
  command = ["sleep", "3600"]
}
%s`, image, name, initializers)
}

// demoWheel writes a pure-Python wheel (package demo_pkg, VALUE = 42), so
// `packages` is tested without a package index: pip installs a local file.
func demoWheel(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "demo_pkg-1.0-py3-none-any.whl")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	zw := zip.NewWriter(f)
	files := []struct{ name, body string }{
		{"demo_pkg/__init__.py", "VALUE = 42\n"},
		{"demo_pkg-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: demo-pkg\nVersion: 1.0\n"},
		{"demo_pkg-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: acctest\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{"demo_pkg-1.0.dist-info/RECORD", "demo_pkg/__init__.py,,\ndemo_pkg-1.0.dist-info/METADATA,,\ndemo_pkg-1.0.dist-info/WHEEL,,\ndemo_pkg-1.0.dist-info/RECORD,,\n"},
	}
	for _, fl := range files {
		w, err := zw.Create(fl.name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(fl.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func builtinInitializers(wheel, gdbTarget string) string {
	return fmt.Sprintf(`
resource "sandbox_initializer" "python" {
  instance = sandbox_instance.test.handle
  kind     = "python"
  files    = [{ path = "/srv/wheels/demo_pkg-1.0-py3-none-any.whl", source = %q }]
  settings = { packages = "/srv/wheels/demo_pkg-1.0-py3-none-any.whl" }
  # never contacted for a local wheel; shows that secrets are masked in results
  sensitive_settings = { index_url = "http://user:s3cret@127.0.0.1:9/simple" }
  commands = [["python", "-c", "import sys, demo_pkg; print(sys.prefix, demo_pkg.VALUE)"]]
}

resource "sandbox_initializer" "main" {
  instance = sandbox_instance.test.handle
  kind     = "main"
  settings = { workspace = "/workspace", owner = "nobody" }
  env      = { APP = "demo" }
  commands = [["sh", "-c", "pwd; cat .env; stat -c %%U /workspace"]]
}

resource "sandbox_initializer" "gdb" {
  instance = sandbox_instance.test.handle
  kind     = "gdb_mcp"
  # The MCP server itself is not packaged here: a stand-in server shows the
  # recipe's service, environment and probe; gdb runs for real.
  settings = { binary = "python3", args = "-m http.server 18090", port = "18090", target = %q }
  commands = [["gdb", "--batch", "-ex", "print 6*7"]]
}
`, wheel, gdbTarget)
}

func TestAccInitializer_builtins(t *testing.T) {
	acctest.PreCheckDocker(t)
	acctest.AgentBinary(t)
	image := acctest.DebianImage(t)
	name := acctest.RandomName("tf-acc")
	acctest.SweepOnCleanup(t, acctest.DriverConfig(driver.Docker, name))
	wheel := demoWheel(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             acctest.CheckNoManagedObjects(acctest.DriverConfig(driver.Docker, name)),
		Steps: []resource.TestStep{
			{
				Config:      debianConfig(name, image, builtinInitializers(wheel, "/srv/missing")),
				ExpectError: loose("check debug target", "target /srv/missing is not an executable file"),
			},
			{
				Config: debianConfig(name, image, builtinInitializers(wheel, "/usr/bin/gdb")),
				ConfigStateChecks: []statecheck.StateCheck{
					// python: venv created, the wheel installed, then the user's command
					expectInit("sandbox_initializer.python", result(0, "description"), knownvalue.StringExact("create virtual environment")),
					expectInit("sandbox_initializer.python", result(1, "description"), knownvalue.StringExact("install python packages")),
					expectInit("sandbox_initializer.python", result(1, "command").AtSliceIndex(5), knownvalue.StringExact("(sensitive)")),
					expectInit("sandbox_initializer.python", result(2, "stdout"), knownvalue.StringExact("/app/.venv 42\n")),
					// main: workspace, env file, owner; commands run in the workspace
					expectInit("sandbox_initializer.main", tfjsonpath.New("results").AtSliceIndex(3).AtMapKey("stdout"),
						knownvalue.StringExact("/workspace\nAPP='demo'\nnobody\n")),
					// gdb_mcp: target checked, gdb runs, the service answered on its port
					expectInit("sandbox_initializer.gdb", result(0, "description"), knownvalue.StringExact("check debug target")),
					expectInit("sandbox_initializer.gdb", result(1, "stdout"), knownvalue.StringExact("$1 = 42\n")),
					expectInit("sandbox_initializer.gdb", tfjsonpath.New("ready_at"), knownvalue.StringRegexp(rfc3339Re)),
				},
				Check: inInstance("18090", `tr '\0' '\n' < /proc/$(cat /.sandbox/run/*.pid)/environ | sed -n 's/^SERVER_PORT=//p'`),
			},
		},
	})
}
