package provider

import (
	"strings"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

func testEnv(vars map[string]string, files ...string) resolveEnv {
	have := map[string]bool{}
	for _, f := range files {
		have[f] = true
	}
	return resolveEnv{
		getenv: func(k string) string { return vars[k] },
		home:   "/home/u",
		cwd:    "/work/mod",
		exists: func(p string) bool { return have[p] },
	}
}

func mustResolve(t *testing.T, cfg driver.Config, env resolveEnv) driver.Config {
	t.Helper()
	out, problems := resolveBackend(cfg, env)
	for _, p := range problems {
		if !p.warning {
			t.Fatalf("unexpected problem: %+v", p)
		}
	}
	return out
}

func TestResolveDockerDefaults(t *testing.T) {
	got := mustResolve(t, driver.Config{Driver: driver.Docker, Name: "b"}, testEnv(nil))
	d := got.Docker
	if d.Host != DefaultDockerHost || d.PortStrategy != driver.PortStrategyLoopbackIP || d.AdvertiseHost != "127.0.0.1" {
		t.Fatalf("defaults: %+v", d)
	}
	got = mustResolve(t, driver.Config{Driver: driver.Docker, Name: "b"}, testEnv(map[string]string{"DOCKER_HOST": "tcp://127.0.0.1:2375"}))
	if got.Docker.Host != "tcp://127.0.0.1:2375" || got.Docker.PortStrategy != driver.PortStrategyDynamic {
		t.Fatalf("DOCKER_HOST: %+v", got.Docker)
	}
}

func TestResolveDockerSSH(t *testing.T) {
	cfg := driver.Config{Driver: driver.Docker, Name: "b", Docker: &driver.DockerConfig{Host: "ssh://ubuntu@gpu-1:22", SSHKeyFile: "~/.ssh/id"}}
	got := mustResolve(t, cfg, testEnv(nil, "/home/u/.ssh/id"))
	d := got.Docker
	if d.SSHKeyFile != "/home/u/.ssh/id" || d.KnownHostsFile != "/home/u/.ssh/known_hosts" || d.AdvertiseHost != "gpu-1" || d.PortStrategy != driver.PortStrategyDynamic {
		t.Fatalf("ssh: %+v", d)
	}
	if cfg.Docker.SSHKeyFile != "~/.ssh/id" {
		t.Fatal("resolve modified its input")
	}
	pinned := driver.Config{Driver: driver.Docker, Name: "b", Docker: &driver.DockerConfig{Host: "ssh://h", HostKeyFingerprint: "SHA256:x"}}
	if got := mustResolve(t, pinned, testEnv(nil)); got.Docker.KnownHostsFile != "" {
		t.Fatal("a pinned fingerprint needs no known_hosts default")
	}
}

func TestResolveDockerTLSFromEnv(t *testing.T) {
	env := testEnv(map[string]string{"DOCKER_HOST": "tcp://10.0.0.1:2376", "DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": "/certs"},
		"/certs/ca.pem", "/certs/cert.pem", "/certs/key.pem")
	got := mustResolve(t, driver.Config{Driver: driver.Docker, Name: "b"}, env)
	if got.Docker.TLSCAFile != "/certs/ca.pem" || got.Docker.TLSKeyFile != "/certs/key.pem" || got.Docker.AdvertiseHost != "10.0.0.1" {
		t.Fatalf("tls from env: %+v", got.Docker)
	}
}

func TestResolveProblems(t *testing.T) {
	cases := []struct {
		name  string
		cfg   driver.Config
		field string
		want  string
	}{
		{"scheme", dockerCfg(driver.DockerConfig{Host: "http://x"}), "host", "must be a `unix://PATH`"},
		{"unix relative", dockerCfg(driver.DockerConfig{Host: "unix://sock"}), "host", "absolute socket path"},
		{"tcp no port", dockerCfg(driver.DockerConfig{Host: "tcp://10.0.0.1"}), "host", "needs a host and a port"},
		{"insecure tcp", dockerCfg(driver.DockerConfig{Host: "tcp://10.0.0.1:2375"}), "host", "allow_insecure_tcp"},
		{"missing key", dockerCfg(driver.DockerConfig{Host: "ssh://h", SSHKeyFile: "/nope"}), "ssh_key_file", "does not exist"},
		{"ssh field on unix", dockerCfg(driver.DockerConfig{SSHKeyFile: "/k"}), "ssh_key_file", "applies only to `ssh://`"},
		{"tls field on ssh", dockerCfg(driver.DockerConfig{Host: "ssh://h", TLSCAFile: "/ca"}), "tls_ca_file", "applies only to `tcp://`"},
		{"cert without key", dockerCfg(driver.DockerConfig{Host: "tcp://10.0.0.1:2376", TLSCAFile: "/ca", TLSCertFile: "/ca"}), "tls_key_file", "set together"},
		{"port strategy", dockerCfg(driver.DockerConfig{PortStrategy: "random"}), "port_strategy", "must be one of"},
		{"incus scheme", driver.Config{Driver: driver.Incus, Name: "b", Incus: &driver.IncusConfig{Address: "ftp://x"}}, "address", "leave it unset"},
		{"incus remote no cert", driver.Config{Driver: driver.Incus, Name: "b", Incus: &driver.IncusConfig{Address: "https://x:8443"}}, "client_cert_file", "remote server"},
		{"isolation", driver.Config{Driver: driver.Local, Name: "b", Local: &driver.LocalConfig{Isolation: "chroot"}}, "isolation", "must be one of"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, problems := resolveBackend(c.cfg, testEnv(nil, "/ca"))
			for _, p := range problems {
				if p.field == c.field && !p.warning && strings.Contains(p.detail, c.want) {
					if !strings.Contains(p.detail, "`"+c.cfg.Driver+"."+c.field+"`") && !strings.Contains(p.detail, c.cfg.Driver+"."+c.field) {
						t.Errorf("detail does not name the attribute: %s", p.detail)
					}
					return
				}
			}
			t.Fatalf("want a problem on %s containing %q, got %+v", c.field, c.want, problems)
		})
	}
}

func dockerCfg(d driver.DockerConfig) driver.Config {
	return driver.Config{Driver: driver.Docker, Name: "b", Docker: &d}
}

func TestResolveLocal(t *testing.T) {
	got := mustResolve(t, driver.Config{Name: "b"}, testEnv(nil))
	if got.Driver != driver.Local || got.Local.Root != "/home/u/.local/share/terraform-provider-sandbox" || got.Local.Isolation != driver.IsolationBwrap {
		t.Fatalf("local default: %+v %+v", got, got.Local)
	}
	got = mustResolve(t, driver.Config{Name: "b"}, testEnv(map[string]string{"XDG_DATA_HOME": "/xdg"}))
	if got.Local.Root != "/xdg/terraform-provider-sandbox" {
		t.Fatalf("XDG: %s", got.Local.Root)
	}
	got = mustResolve(t, driver.Config{Driver: driver.Local, Name: "b", Local: &driver.LocalConfig{Root: "rel/dir/"}}, testEnv(nil))
	if got.Local.Root != "/work/mod/rel/dir" {
		t.Fatalf("relative root: %s", got.Local.Root)
	}
	_, problems := resolveBackend(driver.Config{Driver: driver.Local, Name: "b", Local: &driver.LocalConfig{Isolation: "none"}}, testEnv(nil))
	if len(problems) != 1 || !problems[0].warning {
		t.Fatalf("isolation none: want one warning, got %+v", problems)
	}
}

func TestResolveIncusAndKubernetes(t *testing.T) {
	got := mustResolve(t, driver.Config{Driver: driver.Incus, Name: "b"}, testEnv(nil))
	if got.Incus.Project != "b" || got.Incus.PortStrategy != driver.PortStrategyLoopbackIP {
		t.Fatalf("incus: %+v", got.Incus)
	}
	got = mustResolve(t, driver.Config{Driver: driver.Kubernetes, Name: "b"}, testEnv(map[string]string{"KUBECONFIG": "~/a:/b"}))
	if got.Kubernetes.Kubeconfig != "/home/u/a" || got.Kubernetes.Namespace != "b" {
		t.Fatalf("kubernetes: %+v", got.Kubernetes)
	}
}

func TestBackendIdentityAndImportID(t *testing.T) {
	a := mustResolve(t, dockerCfg(driver.DockerConfig{}), testEnv(nil))
	b := a
	dc := *a.Docker
	dc.AdvertiseHost = "192.0.2.1"
	b.Docker = &dc
	if backendIdentity(a) != backendIdentity(b) {
		t.Fatal("advertise_host is not identity")
	}
	dc2 := dc
	dc2.Host = "unix:///other.sock"
	b.Docker = &dc2
	if backendIdentity(a) == backendIdentity(b) {
		t.Fatal("host is identity")
	}
	if id := backendID(a); id != "docker:b:"+DefaultDockerHost {
		t.Fatalf("id %q", id)
	}
	drv, name, block, err := parseBackendImportID("docker:b:ssh://u@h:22?ssh_key_file=/k&internal=true")
	if err != nil || drv != "docker" || name != "b" {
		t.Fatal(drv, name, err)
	}
	if block["host"].String() != `"ssh://u@h:22"` || block["ssh_key_file"].String() != `"/k"` || block["internal"].String() != "true" || !block["tls_ca_file"].IsNull() {
		t.Fatalf("block %v", block)
	}
	for _, bad := range []string{"docker", "docker:", "podman:b", "local:b?colour=red", "docker:b?internal=maybe"} {
		if _, _, _, err := parseBackendImportID(bad); err == nil {
			t.Errorf("import ID %q: want error", bad)
		}
	}
}

// Plain TCP to a remote host is refused unless opted in, and then warned
// about; loopback needs neither.
func TestResolveInsecureTCP(t *testing.T) {
	cases := []struct {
		host     string
		optIn    bool
		problems int
		warning  bool
	}{
		{"tcp://192.0.2.1:2375", false, 1, false},
		{"tcp://192.0.2.1:2375", true, 1, true},
		{"tcp://127.0.0.1:2375", false, 0, false},
	}
	for _, c := range cases {
		_, problems := resolveBackend(dockerCfg(driver.DockerConfig{Host: c.host, AllowInsecureTCP: c.optIn}), testEnv(nil))
		if len(problems) != c.problems || (c.problems > 0 && problems[0].warning != c.warning) {
			t.Errorf("%s (opt-in %v): got %+v", c.host, c.optIn, problems)
		}
	}
}

func TestResolveIncusSSH(t *testing.T) {
	cfg := driver.Config{Driver: driver.Incus, Name: "b", Incus: &driver.IncusConfig{Address: "ssh://root@srv:2222", SSHKeyFile: "~/.ssh/id"}}
	got := mustResolve(t, cfg, testEnv(nil, "/home/u/.ssh/id"))
	i := got.Incus
	if i.SSHKeyFile != "/home/u/.ssh/id" || i.KnownHostsFile != "/home/u/.ssh/known_hosts" || i.AdvertiseHost != "srv" ||
		i.PortStrategy != driver.PortStrategyDynamic || i.Project != "b" {
		t.Fatalf("incus ssh: %+v", i)
	}
	pinned := driver.Config{Driver: driver.Incus, Name: "b", Incus: &driver.IncusConfig{Address: "ssh://h", HostKeyFingerprint: "SHA256:x"}}
	if got := mustResolve(t, pinned, testEnv(nil)); got.Incus.KnownHostsFile != "" {
		t.Fatal("a pinned fingerprint needs no known_hosts default")
	}
}

func TestResolveIncusTransportFields(t *testing.T) {
	for name, c := range map[string]struct {
		ic    driver.IncusConfig
		field string
	}{
		"ssh key on https":     {driver.IncusConfig{Address: "https://x:8443", ClientCertFile: "/c", ClientKeyFile: "/k", SSHKeyFile: "/id"}, "ssh_key_file"},
		"trust token on local": {driver.IncusConfig{TrustTokenEnv: "TOKEN"}, "trust_token_env"},
		"client cert over ssh": {driver.IncusConfig{Address: "ssh://h", ClientCertFile: "/c", ClientKeyFile: "/k"}, "client_cert_file"},
	} {
		ic := c.ic
		_, problems := resolveBackend(driver.Config{Driver: driver.Incus, Name: "b", Incus: &ic}, testEnv(nil, "/c", "/k", "/id"))
		found := false
		for _, p := range problems {
			found = found || (p.field == c.field && strings.Contains(p.detail, "applies only to"))
		}
		if !found {
			t.Errorf("%s: problems %+v, want %s refused", name, problems, c.field)
		}
	}
}

func TestDriverUnavailableDetail(t *testing.T) {
	for _, goos := range []string{"darwin", "windows", "freebsd"} {
		got := driverUnavailableDetail("local", goos)
		if !strings.Contains(got, "`local` backend needs Linux (bubblewrap)") || !strings.Contains(got, goos) {
			t.Errorf("%s: %q does not say why local is missing", goos, got)
		}
	}
	if got := driverUnavailableDetail("local", "linux"); strings.Contains(got, "needs Linux") {
		t.Errorf("linux: %q", got)
	}
	if got := driverUnavailableDetail("kubernetes", "darwin"); !strings.Contains(got, "no `kubernetes` driver") {
		t.Errorf("kubernetes: %q", got)
	}
}

// An ssh:// address the connection would refuse is refused at plan, also
// when a pinned fingerprint means the plan does not dial; a password in it
// is not repeated in the diagnostic.
func TestResolveRefusesUnusableSSHAddress(t *testing.T) {
	for _, host := range []string{"ssh://h:0", "ssh://h:22:22", "ssh://h?x=1", "ssh://u:secret@h"} {
		docker := driver.Config{Driver: driver.Docker, Name: "b", Docker: &driver.DockerConfig{Host: host, HostKeyFingerprint: "SHA256:x"}}
		incus := driver.Config{Driver: driver.Incus, Name: "b", Incus: &driver.IncusConfig{Address: host, HostKeyFingerprint: "SHA256:x"}}
		for _, cfg := range []driver.Config{docker, incus} {
			_, problems := resolveBackend(cfg, testEnv(nil))
			var found *configProblem
			for i, p := range problems {
				if !p.warning && (p.field == "host" || p.field == "address") {
					found = &problems[i]
				}
			}
			if found == nil {
				t.Errorf("%s address %q: accepted at plan, refused by the connection", cfg.Driver, host)
				continue
			}
			if strings.Contains(found.detail, "secret") || !strings.Contains(found.detail, "ssh://") {
				t.Errorf("%s address %q: detail %q", cfg.Driver, host, found.detail)
			}
		}
	}
}
