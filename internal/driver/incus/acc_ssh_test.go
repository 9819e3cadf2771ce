package incus_test

import (
	"strings"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/drivertest"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testgate"
)

// sshIncus points a config at the local incusd through the test sshd
// (scripts/setup-sshd.sh): ssh://root@127.0.0.1:2222, the Incus socket on
// the far side. Gated by SANDBOX_ACC_SSH as well as SANDBOX_ACC_INCUS.
func sshIncus(t *testing.T) func(*driver.IncusConfig) {
	t.Helper()
	preCheck(t)
	testgate.Skip(t, acctest.GateSSH)
	host, key, known := acctest.TestEnv(acctest.EnvSSHHost), acctest.TestEnv(acctest.EnvSSHKey), acctest.TestEnv(acctest.EnvSSHKnownHosts)
	if host == "" || key == "" || known == "" {
		t.Fatalf("%s is set but the test sshd's settings are not in %s: run scripts/setup-sshd.sh", acctest.GateSSH, "/var/lib/sandbox-test/env.sh")
	}
	return func(c *driver.IncusConfig) {
		c.Address, c.SSHKeyFile, c.KnownHostsFile = host, key, known
	}
}

// The whole conformance suite with the server reached over SSH (exec,
// files and websockets included).
func TestConformanceSSH(t *testing.T) {
	mutate := sshIncus(t)
	drivertest.Run(t, drivertest.Harness{
		Open:  func(t *testing.T) driver.Driver { return openBackend(t, mutate) },
		Image: fixtureImage,
	})
}

// Over SSH the agent is uploaded, not bind-mounted: a system container
// with a lifetime gets it before its first start, for its start hook.
func TestSSHSystemContainerLifetime(t *testing.T) {
	testLifetimeSurvivesOutsideRestart(t, sshIncus(t))
}

// A host key that does not match is refused: nothing is trusted silently.
func TestSSHWrongHostKey(t *testing.T) {
	mutate := sshIncus(t)
	cfg := &driver.IncusConfig{}
	mutate(cfg)
	cfg.KnownHostsFile = ""
	cfg.HostKeyFingerprint = "SHA256:" + strings.Repeat("A", 43)
	d, err := driver.Open(testCtx(t), driver.Config{Driver: driver.Incus, Name: uniqueName("tf-acc"), Incus: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Info(testCtx(t)); err == nil || !strings.Contains(strings.ToLower(err.Error()), "host key mismatch") {
		t.Fatalf("wrong host key: err = %v", err)
	}
}
