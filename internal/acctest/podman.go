package acctest

// Podman's Docker-compatible API (scripts/setup-podman.sh: `podman system
// service` on unix:///run/sandbox-podman/podman.sock) as a docker backend,
// locally and through the test sshd. Gate: SANDBOX_ACC_PODMAN.

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testgate"
)

const (
	// GatePodman enables the Podman acceptance tests.
	GatePodman = "SANDBOX_ACC_PODMAN"
	// EnvPodmanHost is the service's socket URL, written by setup-podman.sh.
	EnvPodmanHost = "SANDBOX_TEST_PODMAN_HOST"
	// DefaultPodmanHost is where setup-podman.sh puts the socket.
	DefaultPodmanHost = "unix:///run/sandbox-podman/podman.sock"
)

// PodmanHost is the Podman service's unix:// URL.
func PodmanHost() string {
	if h := TestEnv(EnvPodmanHost); h != "" {
		return h
	}
	return DefaultPodmanHost
}

// PreCheckPodman skips without SANDBOX_ACC_PODMAN and fails when the Podman
// service does not answer.
func PreCheckPodman(t *testing.T) {
	t.Helper()
	cfg := PodmanDriverConfig("tf-acc-precheck")
	testgate.Require(t, GatePodman, func() error {
		if err := ping(cfg); err != nil {
			return fmt.Errorf("the Podman service at %s does not answer: %w", cfg.Docker.Host, err)
		}
		return nil
	}, "Start it with `scripts/setup-engines.sh podman`.")
}

// PodmanDriverConfig is the docker backend name on the local Podman socket.
func PodmanDriverConfig(name string) driver.Config {
	return driver.Config{Driver: driver.Docker, Name: name, Docker: &driver.DockerConfig{Host: PodmanHost()}}
}

// PodmanSSHDriverConfig is the docker backend name on Podman reached through
// the test sshd: the socket path is the path of the ssh:// URL.
func PodmanSSHDriverConfig(name string) driver.Config {
	cfg := SSHDriverConfig(name)
	cfg.Docker.Host = strings.TrimSuffix(cfg.Docker.Host, "/") + strings.TrimPrefix(PodmanHost(), "unix://")
	return cfg
}

// CleanPodmanCachesOnCleanup removes, when t ends, what the docker driver
// keeps on an engine between runs, here on the Podman service: the agent
// volumes a remote (ssh://) backend fills and the helper image it seeds
// volumes with. Objects still in use stay; the driver remakes them on demand.
func CleanPodmanCachesOnCleanup(t *testing.T) {
	t.Helper()
	t.Cleanup(func() {
		docker := func(args ...string) []string { return append([]string{"-H", PodmanHost()}, args...) }
		if vols := fields(append([]string{"docker"}, docker("volume", "ls", "-q", "--filter", "name=sandbox-agent-")...)...); len(vols) > 0 {
			_ = exec.Command("docker", docker(append([]string{"volume", "rm"}, vols...)...)...).Run()
		}
		_ = exec.Command("docker", docker("rmi", "sandbox-seed:v1")...).Run()
	})
}
