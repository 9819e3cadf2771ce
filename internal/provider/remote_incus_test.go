package provider_test

import (
	"fmt"
	"net/url"
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

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testgate"
)

// The same configuration as on the local socket, with the Incus server
// reached through the test sshd (address = "ssh://..."): the agent is
// uploaded, files pushed, ports published on dynamic host ports, exec and
// import work. Gated by SANDBOX_ACC_SSH and SANDBOX_ACC_INCUS.
func TestAccRemote_incusSSH(t *testing.T) {
	e := incusEnv(t)
	host, key, known := sshIncusEnv(t)
	backend := acctest.BackendConfigWith("test", driver.Incus, e.name,
		fmt.Sprintf("address = %q\n    ssh_key_file = %q\n    known_hosts_file = %q", host, key, known))
	cfg := backend + fmt.Sprintf(`
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
`, e.name, e.source, e.name, httpdBody(8080, `lifetime = "1h"`))
	runInstanceTest(t, e,
		resource.TestStep{
			Config: cfg,
			ConfigStateChecks: []statecheck.StateCheck{
				expectStatus(driver.StatusRunning),
				statecheck.ExpectKnownValue("sandbox_backend.test", tfjsonpath.New("handle").AtMapKey("settings").AtMapKey("port_strategy"), knownvalue.StringExact(driver.PortStrategyDynamic)),
				// The key known_hosts trusts is pinned in the handle at plan time.
				statecheck.ExpectKnownValue("sandbox_backend.test", tfjsonpath.New("handle").AtMapKey("settings").AtMapKey("host_key_fingerprint"),
					knownvalue.StringExact(acctest.TestEnv(acctest.EnvSSHFingerprint))),
				statecheck.ExpectKnownValue(instanceAddr, tfjsonpath.New("endpoints").AtMapKey("http"), knownvalue.StringRegexp(regexp.MustCompile(`^127\.0\.0\.1:\d+$`))),
			},
			Check: resource.ComposeTestCheckFunc(
				checkEndpointServes("http", "hello"),
				checkExec("uploaded", "sh", "-c", "test -x /.sandbox/sandbox-agent && echo uploaded"),
			),
		},
		resource.TestStep{Config: cfg, ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}}},
		resource.TestStep{
			ResourceName: instanceAddr,
			ImportState:  true,
			ImportStateId: fmt.Sprintf("incus:%s:%s?ssh_key_file=%s&known_hosts_file=%s/%s",
				e.name, host, url.QueryEscape(key), url.QueryEscape(known), e.name),
			ImportStateVerify:       true,
			ImportStateVerifyIgnore: []string{"command", "env", "timeouts", "files", "lifetime"},
		},
	)
}

// sshIncusEnv is the test sshd's address, key and known_hosts; it skips
// without SANDBOX_ACC_SSH and fails when that gate is set without them.
func sshIncusEnv(t *testing.T) (host, key, known string) {
	t.Helper()
	testgate.Skip(t, acctest.GateSSH)
	host, key, known = acctest.TestEnv(acctest.EnvSSHHost), acctest.TestEnv(acctest.EnvSSHKey), acctest.TestEnv(acctest.EnvSSHKnownHosts)
	if host == "" || key == "" || known == "" {
		t.Fatalf("%s is set but the test sshd is not set up: run scripts/setup-sshd.sh", acctest.GateSSH)
	}
	return host, key, known
}

// A host that known_hosts does not know fails the plan, naming the
// offered fingerprint and the incus attributes that would trust it.
func TestAccRemote_incusSSHUnknownHostKey(t *testing.T) {
	e := incusEnv(t)
	host, key, _ := sshIncusEnv(t)
	wrong := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(wrong, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	fp := regexp.QuoteMeta(acctest.TestEnv(acctest.EnvSSHFingerprint))
	cfg := acctest.BackendConfigWith("test", driver.Incus, e.name,
		fmt.Sprintf("address = %q\n    ssh_key_file = %q\n    known_hosts_file = %q", host, key, wrong))
	runInstanceTest(t, e, resource.TestStep{
		Config:      cfg,
		PlanOnly:    true,
		ExpectError: regexp.MustCompile(`(?s)Untrusted SSH Host Key.*` + fp + `.*incus\.known_hosts_file.*incus\.host_key_fingerprint`),
	})
}
