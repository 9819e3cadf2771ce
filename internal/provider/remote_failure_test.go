package provider_test

// Failure scenarios of remote Docker hosts: host keys that are unknown or
// changed, a wrong client key, a wrong CA, sshd stopped in the middle of an
// apply, and a remote daemon that goes down. Each error must say what
// happened and what to do; afterwards the configuration converges and
// nothing is left on the engine. Tests that stop a server use their own
// (a private sshd, a proxy in front of the TLS daemon), never the shared one.

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
)

// sleeperHCL is the backend of e plus an image and one idle instance per name.
func (e remoteEnv) sleeperHCL(instances ...string) string {
	out := e.backendHCL("test") + fmt.Sprintf(`
resource "sandbox_image" "test" {
  backend = sandbox_backend.test.handle
  name    = %q
  build   = { context = %q }
}
`, e.image(), e.context)
	for _, n := range instances {
		out += fmt.Sprintf(`
resource "sandbox_instance" %[1]q {
  backend = sandbox_backend.test.handle
  image   = sandbox_image.test.image_id
  name    = %[1]q
  command = ["sleep", "3600"]
}
`, n)
	}
	return out
}

// noCredentialsButTheKeyFile keeps an ssh-agent or a provider key of the
// machine running the tests from authenticating in place of the key file.
func noCredentialsButTheKeyFile(t *testing.T) {
	t.Setenv("SSH_AUTH_SOCK", "")
	t.Setenv("SANDBOX_SSH_PRIVATE_KEY", "")
}

// copyToTemp copies a set-up file to a test's own path, which it may change.
func copyToTemp(t *testing.T, from string) string {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	to := filepath.Join(t.TempDir(), filepath.Base(from))
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return to
}

// TestAccRemote_sshUnknownHostKey: the plan fails, naming the fingerprint
// the server offered and the attributes that trust it.
func TestAccRemote_sshUnknownHostKey(t *testing.T) {
	acctest.PreCheckSSH(t)
	cfg := acctest.SSHDriverConfig(acctest.RandomName("tf-acc"))
	cfg.Docker.KnownHostsFile = filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(cfg.Docker.KnownHostsFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fp := regexp.QuoteMeta(acctest.TestEnv(acctest.EnvSSHFingerprint))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			Config:      remoteEnv{cfg: cfg}.backendHCL("test"),
			PlanOnly:    true,
			ExpectError: regexp.MustCompile(`(?s)Untrusted SSH Host Key.*` + fp + `.*docker\.known_hosts_file.*docker\.host_key_fingerprint\s*=\s*"` + fp),
		}},
	})
}

// TestAccRemote_sshChangedHostKey: known_hosts starts trusting another key
// for the host. The handle records the new fingerprint, so the plan shows
// the change, and the apply fails on the key the server really offers.
// Trusting the right key again gives an empty plan.
func TestAccRemote_sshChangedHostKey(t *testing.T) {
	acctest.PreCheckSSH(t)
	noCredentialsButTheKeyFile(t)
	cfg := acctest.SSHDriverConfig(acctest.RandomName("tf-acc"))
	good := acctest.TestEnv(acctest.EnvSSHKnownHosts)
	cfg.Docker.KnownHostsFile = copyToTemp(t, good)
	e := newRemoteEnv(t, cfg)
	realFP, decoy := acctest.HostKeyFingerprint(t, acctest.HostKeyReal), acctest.HostKeyFingerprint(t, acctest.HostKeyDecoy)
	trust := func(file string) func() {
		return func() {
			b, err := os.ReadFile(file)
			if err == nil {
				err = os.WriteFile(cfg.Docker.KnownHostsFile, b, 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	fpPath := handleField("host_key_fingerprint")
	config := e.sleeperHCL("one")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             e.checkDestroy(),
		Steps: []resource.TestStep{
			{
				Config:            config,
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("sandbox_backend.test", fpPath, knownvalue.StringExact(realFP))},
			},
			{
				PreConfig: trust(acctest.TestEnv(acctest.EnvSSHKnownHostsBad)),
				Config:    config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("sandbox_backend.test", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("sandbox_backend.test", fpPath, knownvalue.StringExact(decoy)),
					plancheck.ExpectResourceAction("sandbox_instance.one", plancheck.ResourceActionUpdate),
				}},
				ExpectError: regexp.MustCompile(`(?s)HOST KEY MISMATCH.*` + regexp.QuoteMeta(realFP) + `.*` + regexp.QuoteMeta(decoy)),
			},
			{
				PreConfig:        trust(good),
				Config:           config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}

// TestAccRemote_sshWrongClientKey: the server refuses the key; the error
// says which key was offered and where it must be authorized.
func TestAccRemote_sshWrongClientKey(t *testing.T) {
	acctest.PreCheckSSH(t)
	noCredentialsButTheKeyFile(t)
	cfg := acctest.SSHDriverConfig(acctest.RandomName("tf-acc"))
	cfg.Docker.SSHKeyFile = acctest.TestEnv(acctest.EnvSSHKeyOther)
	acctest.SweepOnCleanup(t, cfg)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             acctest.CheckNoManagedObjects(cfg),
		Steps: []resource.TestStep{{
			Config: remoteEnv{cfg: cfg}.backendHCL("test"),
			ExpectError: regexp.MustCompile(`(?s)Unable to Create Sandbox Backend.*ssh\s+authentication\s+failed.*` +
				regexp.QuoteMeta(filepath.Base(cfg.Docker.SSHKeyFile)) + `.*authorized_keys`),
		}},
	})
}

// TestAccRemote_tlsWrongCA: the daemon's certificate does not verify
// against the configured CA.
func TestAccRemote_tlsWrongCA(t *testing.T) {
	acctest.PreCheckTLS(t)
	cfg := acctest.TLSDriverConfig(acctest.RandomName("tf-acc"))
	cfg.Docker.TLSCAFile = acctest.TestEnv(acctest.EnvTLSWrongCA)
	acctest.SweepOnCleanup(t, acctest.TLSDriverConfig(cfg.Name))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             acctest.CheckNoManagedObjects(acctest.TLSDriverConfig(cfg.Name)),
		Steps: []resource.TestStep{{
			Config:      remoteEnv{cfg: cfg}.backendHCL("test"),
			ExpectError: regexp.MustCompile(`(?s)Unable to Create Sandbox Backend.*x509: certificate signed by unknown\s+authority.*docker\.tls_ca_file`),
		}},
	})
}

// privateSSHEnv is a remote environment whose backend reaches the engine
// through a private sshd serving its real host key, trusted in the backend's
// own known_hosts file: tests may stop and restart that server.
func privateSSHEnv(t *testing.T) (*acctest.SSHD, remoteEnv) {
	acctest.PreCheckSSH(t)
	noCredentialsButTheKeyFile(t)
	sshd := acctest.StartSSHD(t, acctest.HostKeyReal)
	cfg := acctest.SSHDriverConfig(acctest.RandomName("tf-acc"))
	cfg.Docker.Host = sshd.Host()
	cfg.Docker.KnownHostsFile = filepath.Join(t.TempDir(), "known_hosts")
	sshd.KnownHosts(cfg.Docker.KnownHostsFile, acctest.HostKeyReal)
	return sshd, newRemoteEnv(t, cfg)
}

// TestAccRemote_sshStoppedMidApply kills the backend's sshd in the middle
// of an apply: a terraform_data whose local-exec waits until the test has
// stopped the server runs before three new instances. The apply fails with
// the SSH error; with sshd back, the next apply creates what is missing,
// and nothing half-made stays on the engine.
func TestAccRemote_sshStoppedMidApply(t *testing.T) {
	sshd, e := privateSSHEnv(t)

	signal := filepath.Join(t.TempDir(), "cut")
	cut := fmt.Sprintf(`
resource "terraform_data" "cut" {
  provisioner "local-exec" {
    command = "touch %[1]s; i=0; while [ ! -e %[1]s.done ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done"
  }
}
`, signal)
	later := ""
	for i := 0; i < 3; i++ {
		later += fmt.Sprintf(`
resource "sandbox_instance" "later%[1]d" {
  depends_on = [terraform_data.cut]
  backend    = sandbox_backend.test.handle
  image      = sandbox_image.test.image_id
  name       = "later%[1]d"
  command    = ["sleep", "3600"]
}
`, i)
	}
	full := e.sleeperHCL("first") + cut + later
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             e.checkDestroy(),
		Steps: []resource.TestStep{
			{Config: e.sleeperHCL("first")},
			{
				PreConfig: func() { go stopWhenSignalled(signal, sshd) },
				Config:    full,
				ExpectError: regexp.MustCompile(`(?s)Unable to Create Sandbox Instance.*ssh to\s+127\.0\.0\.1:` +
					fmt.Sprint(sshd.Port) + `.*connection refused`),
			},
			{
				PreConfig: func() {
					// The failed apply left nothing half-made: only "first".
					if err := checkInstanceCount(e.cfg, 1)(nil); err != nil {
						t.Error(err)
					}
					sshd.Start(acctest.HostKeyReal)
				},
				Config: full,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply:             []plancheck.PlanCheck{plancheck.ExpectResourceAction("sandbox_instance.later0", plancheck.ResourceActionCreate)},
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()},
				},
				Check: checkInstanceCount(e.cfg, 4),
			},
		},
	})
}

// stopWhenSignalled stops sshd once the local-exec has created signal, then
// lets the local-exec finish. It runs beside the apply, so it reports
// nothing itself: the step's ExpectError says whether the cut happened.
func stopWhenSignalled(signal string, sshd *acctest.SSHD) {
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(signal); err == nil {
			sshd.Stop()
			_ = os.WriteFile(signal+".done", nil, 0o644)
			return
		}
	}
}

// TestAccRemote_tlsDaemonDown: the remote daemon stops answering (a proxy
// in front of the shared TLS daemon is closed, which is what a client sees
// of a stopped daemon). Terraform fails clearly, and once the daemon is
// back the configuration is unchanged: an empty plan.
func TestAccRemote_tlsDaemonDown(t *testing.T) {
	acctest.PreCheckTLS(t)
	direct := acctest.TLSDriverConfig(acctest.RandomName("tf-acc"))
	proxy := acctest.StartProxy(t, strings.TrimPrefix(direct.Docker.Host, "tcp://"))
	cfg := acctest.TLSDriverConfig(direct.Name)
	cfg.Docker.Host = "tcp://" + proxy.Addr()
	e := newRemoteEnv(t, cfg)
	acctest.SweepOnCleanup(t, direct) // the proxy may be down when the test fails
	config := e.sleeperHCL("one")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             acctest.ComposeChecks(acctest.CheckImageGone(direct, e.image()), acctest.CheckNoManagedObjects(direct)),
		Steps: []resource.TestStep{
			{Config: config},
			{
				PreConfig: proxy.Stop,
				Config:    config,
				ExpectError: regexp.MustCompile(`(?s)Unable to Read Sandbox.*` + regexp.QuoteMeta(proxy.Addr()) +
					`.*Check that the docker engine is running and\s+reachable`),
			},
			{
				PreConfig:        proxy.Start,
				Config:           config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}

// TestAccRemote_sshServerKeyChanged: the server itself comes back with
// another host key while the handle still pins the old one. Terraform
// refuses to talk to it (refresh fails, saying which key was offered and
// which is pinned); with the old key back, the configuration is unchanged.
func TestAccRemote_sshServerKeyChanged(t *testing.T) {
	sshd, e := privateSSHEnv(t)
	restart := func(key string) func() {
		return func() { sshd.Stop(); sshd.Start(key) }
	}
	realFP, decoy := acctest.HostKeyFingerprint(t, acctest.HostKeyReal), acctest.HostKeyFingerprint(t, acctest.HostKeyDecoy)
	config := e.sleeperHCL("one")
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             e.checkDestroy(),
		Steps: []resource.TestStep{
			{Config: config},
			{
				PreConfig: restart(acctest.HostKeyDecoy),
				Config:    config,
				ExpectError: regexp.MustCompile(`(?s)Unable to Read Sandbox.*HOST KEY MISMATCH.*` + regexp.QuoteMeta(decoy) +
					`.*` + regexp.QuoteMeta(realFP) + `.*apply\s+-refresh=false`),
			},
			{
				PreConfig:        restart(acctest.HostKeyReal),
				Config:           config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}
