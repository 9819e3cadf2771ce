package acctest

// Remote Docker hosts for the SSH and TCP+TLS acceptance tests. The set-up
// scripts (scripts/setup-sshd.sh, scripts/setup-docker-tls.sh) start a
// private sshd on 127.0.0.1:2222 that forwards to the local dockerd, and a
// second dockerd with TLS on 127.0.0.1:2376. They record paths, ports and
// keys as `export K=V` lines in $SANDBOX_TEST_DIR/env.sh and env.d/*.sh,
// which TestEnv reads, so the tests need no shell to source them.

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testgate"
)

// Variables written by the set-up scripts.
const (
	EnvSSHHost          = "SANDBOX_TEST_SSH_HOST"
	EnvSSHKey           = "SANDBOX_TEST_SSH_KEY"
	EnvSSHKeyOther      = "SANDBOX_TEST_SSH_KEY_OTHER"
	EnvSSHKnownHosts    = "SANDBOX_TEST_SSH_KNOWN_HOSTS"
	EnvSSHKnownHostsBad = "SANDBOX_TEST_SSH_KNOWN_HOSTS_WRONG"
	EnvSSHFingerprint   = "SANDBOX_TEST_SSH_HOST_FINGERPRINT"
	EnvSSHDPidfile      = "SANDBOX_TEST_SSHD_PIDFILE"
	EnvTLSHost          = "SANDBOX_TEST_TLS_HOST"
	EnvTLSCA            = "SANDBOX_TEST_TLS_CA"
	EnvTLSCert          = "SANDBOX_TEST_TLS_CERT"
	EnvTLSKey           = "SANDBOX_TEST_TLS_KEY"
	EnvTLSWrongCA       = "SANDBOX_TEST_TLS_WRONG_CA"
)

// testDir is where the set-up scripts keep their files.
func testDir() string {
	if d := os.Getenv("SANDBOX_TEST_DIR"); d != "" {
		return d
	}
	return "/var/lib/sandbox-test"
}

var (
	envOnce sync.Once
	envFile map[string]string
)

// TestEnv returns a set-up variable: from the environment when set there,
// else from env.sh and env.d/*.sh.
func TestEnv(key string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	envOnce.Do(func() { envFile = readEnvFiles(testDir()) })
	return envFile[key]
}

// readEnvFiles parses the `export K=V` lines of env.sh and env.d/*.sh.
func readEnvFiles(dir string) map[string]string {
	out := map[string]string{}
	files, _ := filepath.Glob(filepath.Join(dir, "env.d", "*.sh"))
	for _, f := range append([]string{filepath.Join(dir, "env.sh")}, files...) {
		parseExports(f, out)
	}
	return out
}

func parseExports(file string, into map[string]string) {
	f, err := os.Open(file)
	if err != nil {
		return
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "export ")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if uq, err := strconv.Unquote(v); err == nil {
			v = uq
		} else {
			v = strings.Trim(v, "'")
		}
		into[strings.TrimSpace(k)] = v
	}
}

// requireEnv fails t unless every set-up variable is known.
func requireEnv(t *testing.T, gate, engine string, keys ...string) {
	t.Helper()
	var missing []string
	for _, k := range keys {
		if TestEnv(k) == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%s is set but %s is unknown (not in the environment nor in %s/env.sh): run `scripts/setup-engines.sh %s`.",
			gate, strings.Join(missing, ", "), testDir(), engine)
	}
}

// PreCheckSSH skips without SANDBOX_ACC_SSH and fails when the test sshd
// (and the Docker engine behind it) does not answer.
func PreCheckSSH(t *testing.T) {
	t.Helper()
	testgate.Require(t, GateSSH, func() error {
		requireEnv(t, GateSSH, "ssh", EnvSSHHost, EnvSSHKey, EnvSSHKnownHosts, EnvSSHFingerprint)
		cfg := SSHDriverConfig("tf-acc-precheck")
		if err := ping(cfg); err != nil {
			return fmt.Errorf("the Docker engine over %s does not answer: %w", cfg.Docker.Host, err)
		}
		return nil
	}, "Start the test sshd and dockerd with `scripts/setup-engines.sh ssh`.")
}

// PreCheckTLS skips without SANDBOX_ACC_TLS and fails when the TLS Docker
// daemon does not answer.
func PreCheckTLS(t *testing.T) {
	t.Helper()
	testgate.Require(t, GateTLS, func() error {
		requireEnv(t, GateTLS, "tls", EnvTLSHost, EnvTLSCA, EnvTLSCert, EnvTLSKey)
		cfg := TLSDriverConfig("tf-acc-precheck")
		if err := ping(cfg); err != nil {
			return fmt.Errorf("the TLS Docker daemon at %s does not answer: %w", cfg.Docker.Host, err)
		}
		return nil
	}, "Start it with `scripts/setup-engines.sh tls`.")
}

// SSHDriverConfig is the docker backend name reached through the test sshd.
func SSHDriverConfig(name string) driver.Config {
	return driver.Config{Driver: driver.Docker, Name: name, Docker: &driver.DockerConfig{
		Host:           TestEnv(EnvSSHHost),
		SSHKeyFile:     TestEnv(EnvSSHKey),
		KnownHostsFile: TestEnv(EnvSSHKnownHosts),
	}}
}

// TLSDriverConfig is the docker backend name on the TLS daemon.
func TLSDriverConfig(name string) driver.Config {
	return driver.Config{Driver: driver.Docker, Name: name, Docker: &driver.DockerConfig{
		Host:        TestEnv(EnvTLSHost),
		TLSCAFile:   TestEnv(EnvTLSCA),
		TLSCertFile: TestEnv(EnvTLSCert),
		TLSKeyFile:  TestEnv(EnvTLSKey),
	}}
}

// DockerBlock renders the settings of a docker config as the body of a
// sandbox_backend `docker = { ... }` block.
func DockerBlock(dc *driver.DockerConfig) string {
	var b strings.Builder
	for _, kv := range [][2]string{
		{"host", dc.Host}, {"ssh_key_file", dc.SSHKeyFile}, {"known_hosts_file", dc.KnownHostsFile},
		{"host_key_fingerprint", dc.HostKeyFingerprint}, {"tls_ca_file", dc.TLSCAFile},
		{"tls_cert_file", dc.TLSCertFile}, {"tls_key_file", dc.TLSKeyFile}, {"advertise_host", dc.AdvertiseHost},
	} {
		if kv[1] != "" {
			fmt.Fprintf(&b, "    %s = %q\n", kv[0], kv[1])
		}
	}
	return b.String()
}

// DockerImportID is the sandbox_backend import ID of a docker config:
// `docker:<name>:<host>?<field>=<value>&...` with every file it names.
func DockerImportID(cfg driver.Config) string {
	dc := cfg.Docker
	id := "docker:" + cfg.Name + ":" + dc.Host
	var q []string
	for _, kv := range [][2]string{
		{"ssh_key_file", dc.SSHKeyFile}, {"known_hosts_file", dc.KnownHostsFile},
		{"host_key_fingerprint", dc.HostKeyFingerprint}, {"tls_ca_file", dc.TLSCAFile},
		{"tls_cert_file", dc.TLSCertFile}, {"tls_key_file", dc.TLSKeyFile},
	} {
		if kv[1] != "" {
			q = append(q, kv[0]+"="+kv[1])
		}
	}
	if len(q) > 0 {
		id += "?" + strings.Join(q, "&")
	}
	return id
}
