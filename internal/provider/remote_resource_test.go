package provider_test

// Acceptance tests of remote Docker hosts at the resource level: a whole
// configuration (backend, image built from an uploaded context, seeded
// volume, instance with published ports) over SSH and over TCP+TLS, two
// backends in one configuration, and the SSH credential sources. Gates: SANDBOX_ACC_SSH, SANDBOX_ACC_TLS
// (plus SANDBOX_ACC_DOCKER for the local-socket half of the mixed fleet).

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
)

// endpointRe: published ports of remote hosts are reached at advertise_host
// (here the loopback address of the remote host) on a dynamic port.
var endpointRe = regexp.MustCompile(`^127\.0\.0\.1:[0-9]+$`)

// remoteEnv is one remote backend of a test and its local fixtures.
type remoteEnv struct {
	cfg     driver.Config // as configured (and as checks reach it)
	context string        // busybox build context, uploaded to the engine
	seed    string        // seed directory of the volume
}

func newRemoteEnv(t *testing.T, cfg driver.Config) remoteEnv {
	t.Helper()
	acctest.AgentBinary(t)
	seed := t.TempDir()
	if err := os.WriteFile(filepath.Join(seed, "index.html"), []byte("seeded-"+cfg.Name), 0o644); err != nil {
		t.Fatal(err)
	}
	acctest.SweepOnCleanup(t, cfg)
	return remoteEnv{cfg: cfg, context: acctest.BusyboxContext(t), seed: seed}
}

func (e remoteEnv) image() string { return e.cfg.Name + "/busybox:1" }

// withAdvertiseHost is e with docker.advertise_host set.
func (e remoteEnv) withAdvertiseHost(h string) remoteEnv {
	dc := *e.cfg.Docker
	dc.AdvertiseHost = h
	e.cfg.Docker = &dc
	return e
}

// backendHCL declares sandbox_backend.<res> for e.
func (e remoteEnv) backendHCL(res string) string {
	return fmt.Sprintf(`
resource "sandbox_backend" %q {
  name   = %q
  docker = {
%s  }
}
`, res, e.cfg.Name, acctest.DockerBlock(e.cfg.Docker))
}

// stackHCL is backend, image, seeded volume and an httpd instance serving
// the volume on a published port, all named <res>.
func (e remoteEnv) stackHCL(res string) string {
	return e.backendHCL(res) + fmt.Sprintf(`
resource "sandbox_image" %[1]q {
  backend = sandbox_backend.%[1]s.handle
  name    = %[2]q
  build   = { context = %[3]q }
}

resource "sandbox_volume" %[1]q {
  backend = sandbox_backend.%[1]s.handle
  name    = "data"
  source  = %[4]q
}

resource "sandbox_instance" %[1]q {
  backend = sandbox_backend.%[1]s.handle
  image   = sandbox_image.%[1]s.image_id
  name    = "web"
  command = ["httpd", "-f", "-p", "8080", "-h", "/data"]
  ports   = [{ name = "http", port = 8080 }]
  volumes = [{ volume = sandbox_volume.%[1]s.name, target = "/data", read_only = true }]
}
`, res, e.image(), e.context, e.seed)
}

// checkDestroy asks the engine that nothing of e is left.
func (e remoteEnv) checkDestroy() resource.TestCheckFunc {
	return acctest.ComposeChecks(acctest.CheckImageGone(e.cfg, e.image()), acctest.CheckVolumeGone(e.cfg, "data"),
		acctest.CheckNoManagedObjects(e.cfg))
}

// handleField is the path of a docker field in a backend handle.
func handleField(field string) tfjsonpath.Path {
	return tfjsonpath.New("handle").AtMapKey("settings").AtMapKey(field)
}

// testAccRemoteStack: create everything over the remote transport, reach the
// instance's port at advertise_host, re-plan empty, import each resource,
// and check on the engine that destroy left nothing.
func testAccRemoteStack(t *testing.T, e remoteEnv, extra ...statecheck.StateCheck) {
	const res = "test"
	backendID := acctest.DockerImportID(e.cfg)
	checks := append([]statecheck.StateCheck{
		statecheck.ExpectKnownValue("sandbox_backend.test", handleField("port_strategy"), knownvalue.StringExact(driver.PortStrategyDynamic)),
		statecheck.ExpectKnownValue("sandbox_backend.test", handleField("advertise_host"), knownvalue.StringExact("127.0.0.1")),
		statecheck.ExpectKnownValue("sandbox_instance.test", tfjsonpath.New("endpoints").AtMapKey("http"), knownvalue.StringRegexp(endpointRe)),
		statecheck.ExpectKnownValue("sandbox_instance.test", tfjsonpath.New("status"), knownvalue.StringExact(driver.StatusRunning)),
	}, extra...)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             e.checkDestroy(),
		Steps: []resource.TestStep{
			{
				Config: e.stackHCL(res),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectKnownValue("sandbox_backend.test", tfjsonpath.New("handle"), knownvalue.NotNull())},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: checks,
				Check:             checkServes("sandbox_instance.test", "http", "seeded-"+e.cfg.Name),
			},
			{Config: e.stackHCL(res), ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}},
			{ResourceName: "sandbox_backend.test", ImportState: true, ImportStateId: backendID, ImportStateVerify: true},
			{ResourceName: "sandbox_image.test", ImportState: true, ImportStateId: backendID + "#" + e.image(), ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"build", "archive", "labels"}},
			{ResourceName: "sandbox_volume.test", ImportState: true, ImportStateId: backendID + "/data", ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"source"}},
			{ResourceName: "sandbox_instance.test", ImportState: true, ImportStateId: backendID + "/web", ImportStateVerify: true,
				ImportStateVerifyIgnore: []string{"command", "env", "timeouts", "volumes"}},
			{
				// Another advertise_host is a connection setting: everything is
				// updated in place and the endpoints follow it.
				Config: e.withAdvertiseHost("localhost").stackHCL(res),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction("sandbox_backend.test", plancheck.ResourceActionUpdate),
						plancheck.ExpectResourceAction("sandbox_instance.test", plancheck.ResourceActionUpdate),
					},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("sandbox_instance.test",
					tfjsonpath.New("endpoints").AtMapKey("http"), knownvalue.StringRegexp(regexp.MustCompile(`^localhost:[0-9]+$`)))},
				Check: checkServes("sandbox_instance.test", "http", "seeded-"+e.cfg.Name),
			},
		},
	})
}

func TestAccRemote_sshStack(t *testing.T) {
	acctest.PreCheckSSH(t)
	e := newRemoteEnv(t, acctest.SSHDriverConfig(acctest.RandomName("tf-acc")))
	// The host key known_hosts trusts is recorded in the handle.
	testAccRemoteStack(t, e, statecheck.ExpectKnownValue("sandbox_backend.test", handleField("host_key_fingerprint"),
		knownvalue.StringExact(acctest.TestEnv(acctest.EnvSSHFingerprint))))
}

func TestAccRemote_tlsStack(t *testing.T) {
	acctest.PreCheckTLS(t)
	e := newRemoteEnv(t, acctest.TLSDriverConfig(acctest.RandomName("tf-acc")))
	testAccRemoteStack(t, e, statecheck.ExpectKnownValue("sandbox_backend.test", handleField("tls_ca_file"),
		knownvalue.StringExact(acctest.TestEnv(acctest.EnvTLSCA))))
}

// TestAccRemote_localAndSSH declares two backends in one configuration, the
// local socket and SSH (both reach the same dockerd here, under distinct
// backend names so their scopes differ), each with its own stack, plus a
// fleet spread over both that Terraform applies in parallel.
func TestAccRemote_localAndSSH(t *testing.T) {
	acctest.PreCheckDocker(t)
	acctest.PreCheckSSH(t)
	local := newRemoteEnv(t, acctest.DriverConfig(driver.Docker, acctest.RandomName("tf-acc")))
	remote := newRemoteEnv(t, acctest.SSHDriverConfig(acctest.RandomName("tf-acc")))
	const fleet = 6
	config := local.stackHCL("local") + remote.stackHCL("remote") + fmt.Sprintf(`
resource "sandbox_instance" "fleet" {
  count   = %d
  backend = count.index %% 2 == 0 ? sandbox_backend.local.handle : sandbox_backend.remote.handle
  image   = count.index %% 2 == 0 ? sandbox_image.local.image_id : sandbox_image.remote.image_id
  name    = "fleet-${count.index}"
  command = ["sleep", "3600"]
}
`, fleet)
	checks := []statecheck.StateCheck{
		statecheck.ExpectKnownValue("sandbox_instance.fleet[0]", tfjsonpath.New("handle").AtMapKey("backend").AtMapKey("name"), knownvalue.StringExact(local.cfg.Name)),
		statecheck.ExpectKnownValue("sandbox_instance.fleet[1]", tfjsonpath.New("handle").AtMapKey("backend").AtMapKey("name"), knownvalue.StringExact(remote.cfg.Name)),
	}
	for i := 0; i < fleet; i++ {
		checks = append(checks, statecheck.ExpectKnownValue(fmt.Sprintf("sandbox_instance.fleet[%d]", i), tfjsonpath.New("status"), knownvalue.StringExact(driver.StatusRunning)))
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             acctest.ComposeChecks(local.checkDestroy(), remote.checkDestroy()),
		Steps: []resource.TestStep{{
			Config: config,
			ConfigPlanChecks: resource.ConfigPlanChecks{
				PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
			},
			ConfigStateChecks: checks,
			Check: resource.ComposeTestCheckFunc(
				checkServes("sandbox_instance.local", "http", "seeded-"+local.cfg.Name),
				checkServes("sandbox_instance.remote", "http", "seeded-"+remote.cfg.Name),
				checkInstanceCount(local.cfg, 1+fleet/2), checkInstanceCount(remote.cfg, 1+fleet/2),
			),
		}},
	})
}

// checkInstanceCount asks the engine how many instances the backend holds:
// the two backends' objects never mix.
func checkInstanceCount(cfg driver.Config, want int) resource.TestCheckFunc {
	return func(*terraform.State) error {
		d, err := driver.Open(context.Background(), acctest.DirectConfig(cfg))
		if err != nil {
			return err
		}
		defer d.Close()
		insts, err := d.ListInstances(context.Background())
		if err != nil {
			return err
		}
		if len(insts) != want {
			return fmt.Errorf("backend %q holds %d instances, want %d", cfg.Name, len(insts), want)
		}
		return nil
	}
}

// TestAccRemote_sshCredentialSources authenticates the ways the docs list:
// an encrypted ssh_key_file whose passphrase comes from the variable that
// ssh_key_passphrase_env names (host key from a hashed known_hosts), and,
// with no key file and no agent, the provider's ssh_private_key.
func TestAccRemote_sshCredentialSources(t *testing.T) {
	acctest.PreCheckSSH(t)
	noCredentialsButTheKeyFile(t)
	t.Setenv("TF_ACC_SSH_PASSPHRASE", acctest.TestEnv("SANDBOX_TEST_SSH_KEY_PASSPHRASE"))
	enc := acctest.SSHDriverConfig(acctest.RandomName("tf-acc"))
	enc.Docker.SSHKeyFile = acctest.TestEnv("SANDBOX_TEST_SSH_KEY_ENC")
	enc.Docker.KnownHostsFile = acctest.TestEnv("SANDBOX_TEST_SSH_KNOWN_HOSTS_HASHED")
	byProvider := acctest.SSHDriverConfig(acctest.RandomName("tf-acc"))
	byProvider.Docker.SSHKeyFile = ""
	for _, c := range []driver.Config{enc, byProvider} {
		acctest.SweepOnCleanup(t, c)
	}
	config := fmt.Sprintf(`
provider "sandbox" {
  ssh_private_key = file(%q)
}
`, acctest.TestEnv(acctest.EnvSSHKey)) + strings.Replace(remoteEnv{cfg: enc}.backendHCL("enc"), "  }\n}",
		"    ssh_key_passphrase_env = \"TF_ACC_SSH_PASSPHRASE\"\n  }\n}", 1) + remoteEnv{cfg: byProvider}.backendHCL("provider")
	fp := knownvalue.StringExact(acctest.TestEnv(acctest.EnvSSHFingerprint))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             acctest.ComposeChecks(acctest.CheckNoManagedObjects(enc), acctest.CheckNoManagedObjects(byProvider)),
		Steps: []resource.TestStep{{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue("sandbox_backend.enc", handleField("host_key_fingerprint"), fp),
				statecheck.ExpectKnownValue("sandbox_backend.provider", handleField("host_key_fingerprint"), fp),
				statecheck.ExpectKnownValue("sandbox_backend.enc", tfjsonpath.New("engine_version"), knownvalue.NotNull()),
				statecheck.ExpectKnownValue("sandbox_backend.provider", tfjsonpath.New("engine_version"), knownvalue.NotNull()),
			},
			Check: resource.ComposeTestCheckFunc(checkScope(enc, true), checkScope(byProvider, true)),
		}},
	})
}
