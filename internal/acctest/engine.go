package acctest

import (
	"net/url"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// DirectConfig is cfg as checks and sweeps reach its engine: an ssh:// test
// host (the test sshd runs on loopback and forwards to a socket of this
// machine) becomes that socket, so checks and clean-up still work while a
// test has its sshd stopped, and never depend on the transport under test.
func DirectConfig(cfg driver.Config) driver.Config {
	if cfg.Driver != driver.Docker || cfg.Docker == nil {
		return cfg
	}
	u, err := url.Parse(cfg.Docker.Host)
	if err != nil || u.Scheme != "ssh" || !isLoopback(u.Hostname()) {
		return cfg
	}
	sock := "/var/run/docker.sock"
	if cfg.Docker.RemoteSocket != "" {
		sock = cfg.Docker.RemoteSocket
	} else if u.Path != "" && u.Path != "/" {
		sock = u.Path
	}
	direct := cfg
	direct.Docker = &driver.DockerConfig{Host: "unix://" + sock, Internal: cfg.Docker.Internal}
	return direct
}

// dockerCLI is the docker CLI's global flags for cfg's engine.
func dockerCLI(cfg driver.Config) []string {
	cfg = DirectConfig(cfg)
	if cfg.Docker == nil || cfg.Docker.Host == "" {
		return nil
	}
	dc := cfg.Docker
	args := []string{"-H", dc.Host}
	if dc.TLSCAFile != "" {
		args = append(args, "--tlsverify", "--tlscacert", dc.TLSCAFile)
	}
	if dc.TLSCertFile != "" {
		args = append(args, "--tlscert", dc.TLSCertFile, "--tlskey", dc.TLSKeyFile)
	}
	return args
}

func isLoopback(h string) bool {
	switch h {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	return len(h) > 4 && h[:4] == "127."
}
