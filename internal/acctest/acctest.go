// Package acctest is what the acceptance tests share: the provider factories,
// one PreCheck per backend behind its gate variable, random names, local
// fixtures (no registry is reachable) and CheckDestroy helpers that ask the
// engine itself through the driver package.
//
// Gates: with SANDBOX_ACC_DOCKER (etc.) unset a test skips; with it set and
// the engine not answering, the test fails and says what to run.
//
//	SANDBOX_ACC_DOCKER  the local dockerd (DOCKER_HOST, else /var/run/docker.sock)   PreCheckDocker
//	SANDBOX_ACC_LOCAL   bubblewrap on this machine                                   PreCheckLocal
//	SANDBOX_ACC_INCUS   the local incusd                                             PreCheckIncus
//	SANDBOX_ACC_SSH     dockerd through the test sshd on 127.0.0.1:2222              PreCheckSSH
//	SANDBOX_ACC_TLS     the second dockerd with TLS on 127.0.0.1:2376                PreCheckTLS
//
// `scripts/setup-engines.sh ssh tls` (run by `make test` for the gates that
// are set) starts the last two and records their addresses, keys and
// certificates in /var/lib/sandbox-test/env.sh; TestEnv reads that file, so
// the tests run without sourcing it. Tests that stop a server start their own
// (StartSSHD, StartProxy) and never stop the shared ones. Driver
// packages may use acctest only from external (`_test`) test packages, since
// acctest imports the provider and with it every driver.
package acctest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	sdkacctest "github.com/hashicorp/terraform-plugin-testing/helper/acctest"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/provider"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testgate"
)

// Gate variables, one per backend or transport.
const (
	GateDocker = "SANDBOX_ACC_DOCKER"
	GateLocal  = "SANDBOX_ACC_LOCAL"
	GateIncus  = "SANDBOX_ACC_INCUS"
	GateSSH    = "SANDBOX_ACC_SSH"
	GateTLS    = "SANDBOX_ACC_TLS"
)

// ProtoV6ProviderFactories serve the provider in-process to terraform.
var ProtoV6ProviderFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"sandbox": provider.NewServer("acctest"),
}

// RandomName returns prefix-<8 random lowercase letters and digits>, a valid
// backend, instance, volume and image name.
func RandomName(prefix string) string {
	return prefix + "-" + sdkacctest.RandStringFromCharSet(8, "abcdefghijklmnopqrstuvwxyz0123456789")
}

// PreCheckDocker skips without SANDBOX_ACC_DOCKER and fails when the Docker
// engine (DOCKER_HOST, else the local socket) does not answer.
func PreCheckDocker(t *testing.T) {
	t.Helper()
	cfg := DriverConfig(driver.Docker, "tf-acc-precheck")
	testgate.Require(t, GateDocker, func() error {
		if err := ping(cfg); err != nil {
			return fmt.Errorf("the Docker engine at %s does not answer: %w", cfg.Docker.Host, err)
		}
		return nil
	}, "Start it with `scripts/setup-engines.sh docker` (or `setsid dockerd >/var/log/dockerd.log 2>&1 &`).")
}

// PreCheckLocal skips without SANDBOX_ACC_LOCAL and fails when bubblewrap
// cannot start a sandbox on this machine.
func PreCheckLocal(t *testing.T) {
	t.Helper()
	testgate.Require(t, GateLocal, func() error {
		bwrap, err := exec.LookPath("bwrap")
		if err != nil {
			return errors.New("bubblewrap is not installed: run `scripts/setup-engines.sh local` (or `apt-get install -y bubblewrap`)")
		}
		if out, err := exec.Command(bwrap, "--ro-bind", "/", "/", "--unshare-all", "true").CombinedOutput(); err != nil {
			return fmt.Errorf("bubblewrap cannot create namespaces here: %w: %s\n"+
				"Allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1) or run as root", err, out)
		}
		if err := ping(DriverConfig(driver.Local, "tf-acc-precheck")); err != nil {
			return fmt.Errorf("the local driver does not open: %w", err)
		}
		return nil
	}, "")
}

// PreCheckIncus skips without SANDBOX_ACC_INCUS and fails when the local
// Incus server does not answer.
func PreCheckIncus(t *testing.T) {
	t.Helper()
	testgate.Require(t, GateIncus, func() error {
		if err := ping(DriverConfig(driver.Incus, "tf-acc-precheck")); err != nil {
			return fmt.Errorf("the Incus server does not answer: %w", err)
		}
		return nil
	}, "Start it with `scripts/setup-engines.sh incus`.")
}

// ping opens a driver for cfg and asks the engine for its Info.
func ping(cfg driver.Config) error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	d, err := driver.Open(ctx, cfg)
	if err != nil {
		return err
	}
	defer d.Close()
	_, err = d.Info(ctx)
	return err
}

// LocalRoot is the root every local backend of the acceptance tests uses.
// Each backend keeps its files in <root>/<name>, which its destroy removes;
// the root itself is shared by parallel tests and left in place.
func LocalRoot() string {
	localRootOnce.Do(func() {
		localRoot = filepath.Join(os.TempDir(), "tf-acc-sandbox-local")
		_ = os.MkdirAll(localRoot, 0o755)
	})
	return localRoot
}

var (
	localRootOnce sync.Once
	localRoot     string
)

// DriverConfig is the resolved config of the backend that BackendConfig
// declares, for talking to the engine directly in checks.
func DriverConfig(drv, name string) driver.Config {
	cfg := driver.Config{Driver: drv, Name: name}
	switch drv {
	case driver.Docker:
		host := os.Getenv("DOCKER_HOST")
		if host == "" {
			host = provider.DefaultDockerHost
		}
		cfg.Docker = &driver.DockerConfig{Host: host}
	case driver.Local:
		cfg.Local = &driver.LocalConfig{Root: LocalRoot(), Isolation: driver.IsolationBwrap}
	case driver.Incus:
		cfg.Incus = &driver.IncusConfig{Project: name}
	}
	return cfg
}

// OpenDriver opens a driver for cfg and closes it at the end of the test.
func OpenDriver(t *testing.T, cfg driver.Config) driver.Driver {
	t.Helper()
	d, err := driver.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open %s backend %q: %v", cfg.Driver, cfg.Name, err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}
