package provider

// Resolution of a sandbox_backend configuration into the handle recorded in
// state: defaults filled in, paths made absolute, and the settings checked
// against each other. It runs at plan time, so the handle is known whenever
// it derives from configuration and a mistake is reported before anything is
// created. Plain Go, no framework types: see backend_resolve_test.go.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/sshconn"
)

// configProblem is one mistake in a backend configuration. field is the
// attribute inside the driver block ("" for the block itself).
type configProblem struct {
	field   string
	summary string
	detail  string
	warning bool
}

// resolveEnv is where defaults come from; tests replace it.
type resolveEnv struct {
	getenv func(string) string
	home   string
	cwd    string
	exists func(string) bool
}

func osResolveEnv() resolveEnv {
	home, _ := os.UserHomeDir()
	cwd, _ := os.Getwd()
	return resolveEnv{getenv: os.Getenv, home: home, cwd: cwd, exists: func(p string) bool {
		_, err := os.Stat(p)
		return err == nil
	}}
}

// DefaultDockerHost is used when neither docker.host nor DOCKER_HOST is set.
const DefaultDockerHost = "unix:///var/run/docker.sock"

// defaultLocalRoot is $XDG_DATA_HOME/terraform-provider-sandbox, else
// ~/.local/share/terraform-provider-sandbox.
func (e resolveEnv) defaultLocalRoot() string {
	if x := e.getenv("XDG_DATA_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "terraform-provider-sandbox")
	}
	return filepath.Join(e.home, ".local", "share", "terraform-provider-sandbox")
}

// expand turns "~/x" and relative paths into absolute, clean paths.
func (e resolveEnv) expand(p string) string {
	if p == "" {
		return ""
	}
	if p == "~" || strings.HasPrefix(p, "~/") {
		p = filepath.Join(e.home, p[1:])
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(e.cwd, p)
	}
	return filepath.Clean(p)
}

// resolver accumulates problems while one config is resolved.
type resolver struct {
	env      resolveEnv
	block    string // driver block name, for messages
	problems []configProblem
}

func (r *resolver) fail(field, summary, format string, a ...any) {
	r.problems = append(r.problems, configProblem{field: field, summary: summary, detail: fmt.Sprintf(format, a...)})
}

func (r *resolver) warn(field, summary, format string, a ...any) {
	r.problems = append(r.problems, configProblem{field: field, summary: summary, detail: fmt.Sprintf(format, a...), warning: true})
}

// file expands a user-given file path and checks it exists.
func (r *resolver) file(field string, p *string) {
	if *p == "" {
		return
	}
	*p = r.env.expand(*p)
	if !r.env.exists(*p) {
		r.fail(field, "File Not Found", "`%s.%s` names %s, which does not exist on this machine. Create the file or correct the path.", r.block, field, *p)
	}
}

// pair requires two fields to be set together (a certificate and its key).
func (r *resolver) pair(a, b, av, bv string) {
	if (av == "") != (bv == "") {
		r.fail(b, "Incomplete Client Certificate", "`%s.%s` and `%s.%s` must be set together.", r.block, a, r.block, b)
	}
}

func (r *resolver) enum(field, v string, vs []enumValue) {
	for _, e := range vs {
		if e.value == v {
			return
		}
	}
	r.fail(field, "Invalid Attribute Value", "`%s.%s` is %q; it must be one of: %s.", r.block, field, v, enumDoc(vs))
}

// resolveBackend fills in defaults and checks cfg (driver and name set, at
// most one block non-nil). A nil block for the driver means all defaults.
func resolveBackend(cfg driver.Config, env resolveEnv) (driver.Config, []configProblem) {
	r := &resolver{env: env, block: cfg.Driver}
	switch cfg.Driver {
	case driver.Docker:
		d := derefOr(cfg.Docker)
		r.docker(&d)
		cfg.Docker = &d
	case driver.Incus:
		i := derefOr(cfg.Incus)
		r.incus(&i, cfg.Name)
		cfg.Incus = &i
	case driver.Kubernetes:
		k := derefOr(cfg.Kubernetes)
		r.kubernetes(&k, cfg.Name)
		cfg.Kubernetes = &k
	default:
		cfg.Driver = driver.Local
		r.block = driver.Local
		l := derefOr(cfg.Local)
		r.local(&l)
		cfg.Local = &l
	}
	return cfg, r.problems
}

func derefOr[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

func (r *resolver) docker(d *driver.DockerConfig) {
	fromEnv := false
	if d.Host == "" {
		d.Host, fromEnv = r.env.getenv("DOCKER_HOST"), true
	}
	if d.Host == "" {
		d.Host, fromEnv = DefaultDockerHost, false
	}
	u, err := url.Parse(d.Host)
	if err != nil || (u.Scheme != "unix" && u.Scheme != "tcp" && u.Scheme != "ssh") {
		r.fail("host", "Invalid Docker Host", "`docker.host` is %q; it must be a `unix://PATH`, `tcp://HOST:PORT` or `ssh://[USER@]HOST[:PORT]` URL.", d.Host)
		return
	}
	if fromEnv && u.Scheme == "tcp" && d.TLSCAFile == "" && r.env.getenv("DOCKER_TLS_VERIFY") != "" {
		if dir := r.env.getenv("DOCKER_CERT_PATH"); dir != "" {
			d.TLSCAFile, d.TLSCertFile, d.TLSKeyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		}
	}
	r.onlyFor(u.Scheme, "ssh", map[string]string{"ssh_key_file": d.SSHKeyFile, "ssh_key_passphrase_env": d.SSHKeyPassphraseEnv,
		"known_hosts_file": d.KnownHostsFile, "host_key_fingerprint": d.HostKeyFingerprint, "ssh_jump_host": d.SSHJumpHost, "remote_socket": d.RemoteSocket})
	r.onlyFor(u.Scheme, "tcp", map[string]string{"tls_ca_file": d.TLSCAFile, "tls_cert_file": d.TLSCertFile, "tls_key_file": d.TLSKeyFile})
	switch u.Scheme {
	case "unix":
		if !strings.HasPrefix(u.Path, "/") {
			r.fail("host", "Invalid Docker Host", "`docker.host` is %q; a `unix://` host needs an absolute socket path, like %s.", d.Host, DefaultDockerHost)
		}
		setDefault(&d.AdvertiseHost, "127.0.0.1")
		setDefault(&d.PortStrategy, driver.PortStrategyLoopbackIP)
	case "tcp":
		r.dockerTCP(d, u)
	case "ssh":
		r.dockerSSH(d, u)
	}
	r.enum("port_strategy", d.PortStrategy, portStrategyValues)
}

// sshAddress refuses an ssh:// address the connection would refuse, so the
// plan says so even when a pinned fingerprint means no dial at plan time.
// The error names the address with any password hidden.
func (r *resolver) sshAddress(field, summary, attribute, addr string) bool {
	if _, err := sshconn.ParseURL(addr); err != nil {
		r.fail(field, summary, "`%s` is not an SSH address the provider can use: %v. Write it as ssh://[USER@]HOST[:PORT][/SOCKET], with key authentication.", attribute, err)
		return false
	}
	return true
}

// onlyFor reports fields set for a host whose scheme does not use them.
func (r *resolver) onlyFor(scheme, want string, fields map[string]string) {
	if scheme == want {
		return
	}
	for _, name := range sortedKeys(fields) {
		if fields[name] != "" {
			r.fail(name, "Attribute Does Not Apply", "`docker.%s` applies only to `%s://` hosts, and `docker.host` is a `%s://` URL. Remove it or change the host.", name, want, scheme)
		}
	}
}

func (r *resolver) dockerTCP(d *driver.DockerConfig, u *url.URL) {
	host, port := u.Hostname(), u.Port()
	if host == "" || port == "" {
		r.fail("host", "Invalid Docker Host", "`docker.host` is %q; a `tcp://` host needs a host and a port, like tcp://192.0.2.10:2376.", d.Host)
		return
	}
	r.file("tls_ca_file", &d.TLSCAFile)
	r.file("tls_cert_file", &d.TLSCertFile)
	r.file("tls_key_file", &d.TLSKeyFile)
	r.pair("tls_cert_file", "tls_key_file", d.TLSCertFile, d.TLSKeyFile)
	if d.TLSCAFile == "" && d.TLSCertFile == "" && !isLoopback(host) {
		if !d.AllowInsecureTCP {
			r.fail("host", "Insecure Docker Host", "`docker.host` %q is plain TCP to a non-loopback host: anyone on the network could take over the engine. "+
				"Set `docker.tls_ca_file`, `docker.tls_cert_file` and `docker.tls_key_file`, use an `ssh://` host, or set `docker.allow_insecure_tcp = true` if the network is trusted.", d.Host)
		} else {
			r.warn("allow_insecure_tcp", "Unencrypted Docker Connection", "`docker.host` %q is plain TCP without TLS (`docker.allow_insecure_tcp = true`): "+
				"anyone on the network path can read the traffic and take over the engine. Use TLS or an `ssh://` host unless the network is trusted.", d.Host)
		}
	}
	setDefault(&d.AdvertiseHost, host)
	setDefault(&d.PortStrategy, driver.PortStrategyDynamic)
}

func (r *resolver) dockerSSH(d *driver.DockerConfig, u *url.URL) {
	if u.Hostname() == "" {
		r.fail("host", "Invalid Docker Host", "`docker.host` is %q; an `ssh://` host needs a host name, like ssh://ubuntu@gpu-1:22.", d.Host)
		return
	}
	if !r.sshAddress("host", "Invalid Docker Host", "docker.host", d.Host) {
		return
	}
	r.file("ssh_key_file", &d.SSHKeyFile)
	r.file("known_hosts_file", &d.KnownHostsFile)
	if d.HostKeyFingerprint == "" {
		setDefault(&d.KnownHostsFile, filepath.Join(r.env.home, ".ssh", "known_hosts"))
	}
	setDefault(&d.AdvertiseHost, u.Hostname())
	setDefault(&d.PortStrategy, driver.PortStrategyDynamic)
}

func (r *resolver) incus(i *driver.IncusConfig, name string) {
	scheme := "unix"
	switch u, err := url.Parse(i.Address); {
	case i.Address == "":
	case err == nil && u.Scheme == "unix" && strings.HasPrefix(u.Path, "/"):
	case err == nil && u.Scheme == "https" && u.Hostname() != "":
		scheme = "https"
		setDefault(&i.AdvertiseHost, u.Hostname())
	case err == nil && u.Scheme == "ssh" && u.Hostname() != "":
		scheme = "ssh"
		setDefault(&i.AdvertiseHost, u.Hostname())
	default:
		r.fail("address", "Invalid Incus Address", "`incus.address` is %q; leave it unset for the local server, or use `unix:///PATH`, `https://HOST[:PORT]` or `ssh://USER@HOST[:PORT][/SOCKET]`.", i.Address)
	}
	r.incusOnlyFor(scheme, "https", map[string]string{"client_cert_file": i.ClientCertFile, "client_key_file": i.ClientKeyFile,
		"server_cert_file": i.ServerCertFile, "server_fingerprint": i.ServerFingerprint, "trust_token_env": i.TrustTokenEnv})
	r.incusOnlyFor(scheme, "ssh", map[string]string{"ssh_key_file": i.SSHKeyFile, "known_hosts_file": i.KnownHostsFile, "host_key_fingerprint": i.HostKeyFingerprint})
	r.file("client_cert_file", &i.ClientCertFile)
	r.file("client_key_file", &i.ClientKeyFile)
	r.file("server_cert_file", &i.ServerCertFile)
	r.pair("client_cert_file", "client_key_file", i.ClientCertFile, i.ClientKeyFile)
	if scheme == "https" && i.ClientCertFile == "" {
		r.fail("client_cert_file", "Missing Client Certificate", "`incus.address` %q is a remote server, which needs `incus.client_cert_file` and `incus.client_key_file`, trusted by it (`incus config trust add-certificate`) or presented with a trust token (`trust_token_env`).", i.Address)
	}
	if scheme == "ssh" && r.sshAddress("address", "Invalid Incus Address", "incus.address", i.Address) {
		r.file("ssh_key_file", &i.SSHKeyFile)
		r.file("known_hosts_file", &i.KnownHostsFile)
		if i.HostKeyFingerprint == "" {
			setDefault(&i.KnownHostsFile, filepath.Join(r.env.home, ".ssh", "known_hosts"))
		}
	}
	setDefault(&i.Project, name)
	setDefault(&i.AdvertiseHost, "127.0.0.1")
	if scheme == "unix" {
		setDefault(&i.PortStrategy, driver.PortStrategyLoopbackIP)
	}
	setDefault(&i.PortStrategy, driver.PortStrategyDynamic)
	r.enum("port_strategy", i.PortStrategy, portStrategyValues)
}

// incusOnlyFor refuses settings of another transport than the address's.
func (r *resolver) incusOnlyFor(scheme, want string, fields map[string]string) {
	if scheme == want {
		return
	}
	for _, name := range sortedKeys(fields) {
		if fields[name] != "" {
			r.fail(name, "Attribute Does Not Apply", "`incus.%s` applies only to `%s://` addresses, and `incus.address` is a `%s://` one. Remove it or change the address.", name, want, scheme)
		}
	}
}

func (r *resolver) kubernetes(k *driver.KubernetesConfig, name string) {
	if k.Kubeconfig != "" {
		r.file("kubeconfig", &k.Kubeconfig)
	} else if env := r.env.getenv("KUBECONFIG"); env != "" {
		k.Kubeconfig = r.env.expand(filepath.SplitList(env)[0])
	} else {
		k.Kubeconfig = filepath.Join(r.env.home, ".kube", "config")
	}
	setDefault(&k.Namespace, name)
}

func (r *resolver) local(l *driver.LocalConfig) {
	if l.Root == "" {
		l.Root = r.env.defaultLocalRoot()
	}
	l.Root = r.env.expand(l.Root)
	setDefault(&l.Isolation, driver.IsolationBwrap)
	r.enum("isolation", l.Isolation, isolationValues)
	if l.Isolation == driver.IsolationNone {
		r.problems = append(r.problems, configProblem{field: "isolation", warning: true, summary: "Sandboxes Are Not Isolated",
			detail: "`local.isolation = \"none\"` runs every sandbox of this backend as plain processes of the provider's user, " +
				"with the host's file system and network. Do not run untrusted code on it; use `isolation = \"bwrap\"`."})
	}
}

func setDefault(p *string, v string) {
	if *p == "" {
		*p = v
	}
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// backendIdentity says which engine and scope cfg addresses: a change of it
// is a different backend, so whatever lives on the old one is replaced.
// Connection details (keys, advertise_host, ...) are not part of it.
func backendIdentity(cfg driver.Config) string {
	raw := blockRaw(cfg)
	id := cfg.Driver + "\x00" + cfg.Name
	for _, f := range handleFields[cfg.Driver] {
		if f.identity {
			id += "\x00" + fmt.Sprint(raw[f.name])
		}
	}
	return id
}

// blockRaw is cfg's driver block as attribute name -> value (the JSON tags
// of the driver config structs are the attribute names).
func blockRaw(cfg driver.Config) map[string]any {
	blocks := map[string]any{driver.Docker: cfg.Docker, driver.Incus: cfg.Incus, driver.Kubernetes: cfg.Kubernetes, driver.Local: cfg.Local}
	raw := map[string]any{}
	if b := blocks[cfg.Driver]; b != nil {
		_ = jsonRoundTrip(b, &raw)
	}
	return raw
}

func jsonRoundTrip(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
