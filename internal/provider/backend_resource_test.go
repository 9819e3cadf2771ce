package provider_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/provider"
)

const backendAddr = "sandbox_backend.test"

// backendCase is what the backend lifecycle needs per driver.
type backendCase struct {
	driver   string
	precheck func(*testing.T)
	endpoint string // the endpoint part of the id and import ID
	update   string // a driver-block setting that changes in place
	updated  statecheck.StateCheck
}

func backendCases() []backendCase {
	host := os.Getenv("DOCKER_HOST")
	if host == "" {
		host = provider.DefaultDockerHost
	}
	return []backendCase{
		{driver: driver.Docker, precheck: acctest.PreCheckDocker, endpoint: host, update: `advertise_host = "127.0.0.2"`,
			updated: statecheck.ExpectKnownValue(backendAddr, tfjsonpath.New("handle").AtMapKey("settings").AtMapKey("advertise_host"),
				knownvalue.StringExact("127.0.0.2"))},
		{driver: driver.Local, precheck: acctest.PreCheckLocal, endpoint: acctest.LocalRoot(), update: `isolation = "none"`,
			updated: statecheck.ExpectKnownValue(backendAddr, tfjsonpath.New("handle").AtMapKey("settings").AtMapKey("isolation"),
				knownvalue.StringExact(driver.IsolationNone))},
		{driver: driver.Incus, precheck: acctest.PreCheckIncus, update: `advertise_host = "127.0.0.2"`,
			updated: statecheck.ExpectKnownValue(backendAddr, tfjsonpath.New("handle").AtMapKey("settings").AtMapKey("advertise_host"),
				knownvalue.StringExact("127.0.0.2"))},
	}
}

// backendHCL renders the test backend with extra lines in its driver block.
func backendHCL(drv, name, extra string) string {
	return acctest.BackendConfigWith("test", drv, name, extra)
}

func TestAccBackend_docker(t *testing.T) { testAccBackendLifecycle(t, backendCases()[0]) }
func TestAccBackend_local(t *testing.T)  { testAccBackendLifecycle(t, backendCases()[1]) }
func TestAccBackend_incus(t *testing.T)  { testAccBackendLifecycle(t, backendCases()[2]) }

// testAccBackendLifecycle: create (handle known at plan), import, update in
// place, replacement on a new name, and destroy checked on the engine.
func testAccBackendLifecycle(t *testing.T, c backendCase) {
	c.precheck(t)
	name, renamed := acctest.RandomName("tf-acc"), acctest.RandomName("tf-acc")
	cfg, cfgRenamed := acctest.DriverConfig(c.driver, name), acctest.DriverConfig(c.driver, renamed)
	acctest.SweepOnCleanup(t, cfg)
	acctest.SweepOnCleanup(t, cfgRenamed)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             acctest.ComposeChecks(acctest.CheckNoManagedObjects(cfg), acctest.CheckNoManagedObjects(cfgRenamed)),
		Steps: []resource.TestStep{
			{
				Config: backendHCL(c.driver, name, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(backendAddr, plancheck.ResourceActionCreate),
						// The handle is known at plan time: dependents plan against it.
						plancheck.ExpectKnownValue(backendAddr, tfjsonpath.New("handle").AtMapKey("name"), knownvalue.StringExact(name)),
						plancheck.ExpectKnownValue(backendAddr, tfjsonpath.New("handle").AtMapKey("driver"), knownvalue.StringExact(c.driver)),
					},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(backendAddr, tfjsonpath.New("id"), knownvalue.StringExact(strings.TrimSuffix(c.driver+":"+name+":"+c.endpoint, ":"))),
					statecheck.ExpectKnownValue(backendAddr, tfjsonpath.New("driver"), knownvalue.StringExact(c.driver)),
					statecheck.ExpectKnownValue(backendAddr, tfjsonpath.New("engine_version"), knownvalue.NotNull()),
					statecheck.ExpectKnownValue(backendAddr, tfjsonpath.New("arch"), knownvalue.NotNull()),
					statecheck.ExpectKnownValue(backendAddr, tfjsonpath.New("capabilities"), knownvalue.SetPartial([]knownvalue.Check{knownvalue.StringExact(driver.CapContainers)})),
				},
				Check: checkScope(cfg, true),
			},
			{
				ResourceName:      backendAddr,
				ImportState:       true,
				ImportStateId:     backendImportID(c.driver, name),
				ImportStateVerify: true,
			},
			{
				Config:            backendHCL(c.driver, name, c.update),
				ConfigPlanChecks:  planExpects(backendAddr, plancheck.ResourceActionUpdate),
				ConfigStateChecks: []statecheck.StateCheck{c.updated},
			},
			{
				Config:           backendHCL(c.driver, renamed, ""),
				ConfigPlanChecks: planExpects(backendAddr, plancheck.ResourceActionDestroyBeforeCreate),
				Check:            resource.ComposeTestCheckFunc(checkScope(cfg, false), checkScope(cfgRenamed, true)),
			},
		},
	})
}

// backendImportID names what acctest.BackendConfig sets: nothing for
// docker (its host stays null), the root for local.
func backendImportID(drv, name string) string {
	if drv == driver.Local {
		return drv + ":" + name + ":" + acctest.LocalRoot()
	}
	return drv + ":" + name
}

// checkScope asks the engine whether the backend's scope exists.
func checkScope(cfg driver.Config, want bool) resource.TestCheckFunc {
	return func(*terraform.State) error {
		got, err := acctest.ScopeExists(cfg)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("%s backend %q: scope exists = %v, want %v", cfg.Driver, cfg.Name, got, want)
		}
		return nil
	}
}

func TestAccBackend_dockerDeletedOutside(t *testing.T) {
	acctest.PreCheckDocker(t)
	testAccBackendDeletedOutside(t, driver.Docker)
}

func TestAccBackend_localDeletedOutside(t *testing.T) {
	acctest.PreCheckLocal(t)
	testAccBackendDeletedOutside(t, driver.Local)
}

// testAccBackendDeletedOutside removes the scope behind Terraform's back:
// the next plan creates the backend again.
func testAccBackendDeletedOutside(t *testing.T, drv string) {
	name := acctest.RandomName("tf-acc")
	cfg := acctest.DriverConfig(drv, name)
	acctest.SweepOnCleanup(t, cfg)
	if _, ok := acctest.OpenDriver(t, cfg).(interface {
		ScopeExists(context.Context) (bool, error)
	}); !ok {
		t.Fatalf("the %s driver has no ScopeExists(ctx) (bool, error): sandbox_backend's Read cannot see a scope deleted outside Terraform", drv)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             acctest.CheckNoManagedObjects(cfg),
		Steps: []resource.TestStep{
			{Config: acctest.BackendConfig(drv, name), Check: checkScope(cfg, true)},
			{
				PreConfig:        func() { acctest.DeleteScopeOutside(t, cfg) },
				Config:           acctest.BackendConfig(drv, name),
				ConfigPlanChecks: planExpects(backendAddr, plancheck.ResourceActionCreate),
				Check:            checkScope(cfg, true),
			},
		},
	})
}

// TestAccBackend_invalidInput plans bad values for every attribute: each is
// refused at plan time with a message naming the attribute, and nothing is
// created (PlanOnly, no engine needed).
func TestAccBackend_invalidInput(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	cases := []struct{ name, block, want string }{
		{"Bad_Name", `docker = {}`, `Invalid Name`},
		{"ok", `docker = {}` + "\n  local = {}", `(?s)Invalid Attribute Combination.*docker`},
		{"ok", `docker = { host = "http://x" }`, `docker\.host`},
		{"ok", `docker = { host = "unix://relative.sock" }`, `docker\.host`},
		{"ok", `docker = { host = "tcp://10.0.0.1" }`, `docker\.host`},
		{"ok", `docker = { host = "tcp://192.0.2.1:2375" }`, `docker\.allow_insecure_tcp`},
		{"ok", `docker = { host = "tcp://192.0.2.1:2375", allow_insecure_tcp = "maybe" }`, `allow_insecure_tcp`},
		{"ok", `docker = { host = "ssh://h", ssh_key_file = "` + missing + `" }`, `docker\.ssh_key_file`},
		{"ok", `docker = { host = "ssh://h", ssh_key_passphrase_env = "1BAD" }`, `docker\.ssh_key_passphrase_env`},
		{"ok", `docker = { host = "ssh://h", known_hosts_file = "` + missing + `" }`, `docker\.known_hosts_file`},
		{"ok", `docker = { host = "ssh://h", host_key_fingerprint = "MD5:aa" }`, `docker\.host_key_fingerprint`},
		{"ok", `docker = { host = "ssh://h", ssh_jump_host = "a b" }`, `docker\.ssh_jump_host`},
		{"ok", `docker = { host = "ssh://h", remote_socket = "docker.sock" }`, `docker\.remote_socket`},
		{"ok", `docker = { ssh_key_file = "/etc/hostname" }`, `docker\.ssh_key_file`},
		{"ok", `docker = { host = "tcp://192.0.2.1:2376", tls_ca_file = "` + missing + `" }`, `docker\.tls_ca_file`},
		{"ok", `docker = { host = "tcp://192.0.2.1:2376", tls_cert_file = "` + missing + `" }`, `docker\.tls_cert_file`},
		{"ok", `docker = { host = "tcp://192.0.2.1:2376", tls_key_file = "` + missing + `" }`, `docker\.tls_key_file`},
		{"ok", `docker = { host = "ssh://h", tls_ca_file = "/etc/hostname" }`, `docker\.tls_ca_file`},
		{"ok", `docker = { advertise_host = "" }`, `docker\.advertise_host`},
		{"ok", `docker = { port_strategy = "random" }`, `docker\.port_strategy`},
		{"ok", `docker = { internal = "maybe" }`, `internal`},
		{"ok", `incus = { address = "ftp://x" }`, `incus\.address`},
		{"ok", `incus = { address = "https://192.0.2.1:8443" }`, `incus\.client_cert_file`},
		{"ok", `incus = { client_cert_file = "` + missing + `" }`, `incus\.client_cert_file`},
		{"ok", `incus = { client_cert_file = "/etc/hostname", client_key_file = "` + missing + `" }`, `incus\.client_key_file`},
		{"ok", `incus = { client_cert_file = "/etc/hostname" }`, `incus\.client_key_file`},
		{"ok", `incus = { server_cert_file = "` + missing + `" }`, `incus\.server_cert_file`},
		{"ok", `incus = { server_fingerprint = "xyz" }`, `incus\.server_fingerprint`},
		{"ok", `incus = { project = "Bad_Project" }`, `incus\.project`},
		{"ok", `incus = { storage_pool = "" }`, `incus\.storage_pool`},
		{"ok", `incus = { network = "" }`, `incus\.network`},
		{"ok", `incus = { advertise_host = "" }`, `incus\.advertise_host`},
		{"ok", `incus = { port_strategy = "x" }`, `incus\.port_strategy`},
		{"ok", `kubernetes = { kubeconfig = "` + missing + `" }`, `kubernetes\.kubeconfig`},
		{"ok", `kubernetes = { context = "" }`, `kubernetes\.context`},
		{"ok", `kubernetes = { namespace = "Bad_NS" }`, `kubernetes\.namespace`},
		{"ok", `local = { root = "" }`, `local\.root`},
		{"ok", `local = { isolation = "chroot" }`, `local\.isolation`},
	}
	steps := make([]resource.TestStep, 0, len(cases))
	for _, c := range cases {
		steps = append(steps, resource.TestStep{
			Config:      fmt.Sprintf("resource \"sandbox_backend\" \"test\" {\n  name = %q\n  %s\n}\n", c.name, c.block),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(c.want),
		})
	}
	resource.Test(t, resource.TestCase{ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories, Steps: steps})
}

// TestAccBackend_isolationNoneWarns plans a local backend without isolation:
// a warning, not an error, and a handle known at plan time.
func TestAccBackend_isolationNoneWarns(t *testing.T) {
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:             "resource \"sandbox_backend\" \"test\" {\n  name  = \"warn\"\n  local = { isolation = \"none\" }\n}\n",
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
			ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
				plancheck.ExpectKnownValue(backendAddr, tfjsonpath.New("handle").AtMapKey("settings").AtMapKey("isolation"), knownvalue.StringExact("none")),
			}},
		}},
	})
}

// TestAccBackend_unreachable applies a backend whose engine does not
// answer: the error names the backend, the address and what to do, and
// nothing is recorded in state. No engine is needed.
func TestAccBackend_unreachable(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "absent.sock")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      acctest.BackendConfigWith("test", driver.Docker, "gone", fmt.Sprintf("host = %q", "unix://"+sock)),
			ExpectError: regexp.MustCompile(`(?s)Unable to Create Sandbox Backend.*docker backend "gone".*absent\.sock.*Check that the docker\s+engine is running`),
		}},
	})
}

// TestAccBackend_localUnknownAtPlan names the backend from a value known only
// at apply: the handle (and the volume's id) are unknown in the plan, and
// apply settles them without an inconsistent plan.
func TestAccBackend_localUnknownAtPlan(t *testing.T) {
	acctest.PreCheckLocal(t)
	name := acctest.RandomName("tf-acc")
	cfg := acctest.DriverConfig(driver.Local, name)
	acctest.SweepOnCleanup(t, cfg)
	config := fmt.Sprintf(`
resource "terraform_data" "name" {
  input = %q
}

resource "sandbox_backend" "test" {
  name  = terraform_data.name.output
  local = { root = %q }
}

resource "sandbox_volume" "test" {
  backend = sandbox_backend.test.handle
  name    = "data"
}
`, name, acctest.LocalRoot())
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             acctest.ComposeChecks(acctest.CheckVolumeGone(cfg, "data"), acctest.CheckNoManagedObjects(cfg)),
		Steps: []resource.TestStep{{
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PreApply: []plancheck.PlanCheck{
					plancheck.ExpectUnknownValue(backendAddr, tfjsonpath.New("handle")),
					plancheck.ExpectUnknownValue("sandbox_volume.test", tfjsonpath.New("id")),
				},
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(backendAddr, tfjsonpath.New("handle").AtMapKey("name"), knownvalue.StringExact(name)),
				statecheck.ExpectKnownValue("sandbox_volume.test", tfjsonpath.New("id"), knownvalue.StringExact("local:"+name+":"+acctest.LocalRoot()+"/data")),
			},
		}},
	})
}
