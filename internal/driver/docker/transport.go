package docker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/client"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/sshconn"
)

const (
	defaultSocket       = "/var/run/docker.sock"
	defaultRemoteSocket = "/var/run/docker.sock"
)

// endpoint is a parsed, validated Docker host: where the API is and how
// published ports are reached.
type endpoint struct {
	host   string   // the resolved URL, e.g. unix:///var/run/docker.sock
	u      *url.URL // parsed host
	local  bool     // the engine runs on this machine (unix socket)
	remote string   // remote socket path for ssh://
}

// resolveHost applies the documented default: the configured host, else
// DOCKER_HOST, else the local socket.
func resolveHost(cfg *driver.DockerConfig) string {
	if cfg != nil && cfg.Host != "" {
		return cfg.Host
	}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return "unix://" + defaultSocket
}

func parseEndpoint(cfg *driver.DockerConfig) (endpoint, error) {
	host := resolveHost(cfg)
	u, err := url.Parse(host)
	if err != nil {
		return endpoint{}, fmt.Errorf("docker host %q: %w", host, err)
	}
	ep := endpoint{host: host, u: u}
	switch u.Scheme {
	case "unix":
		ep.local = true
		if u.Path == "" {
			return endpoint{}, fmt.Errorf("docker host %q: missing socket path", host)
		}
	case "tcp", "ssh":
		if u.Hostname() == "" {
			return endpoint{}, fmt.Errorf("docker host %q: missing host name", host)
		}
		if u.Scheme == "ssh" {
			ep.remote = defaultRemoteSocket
			if cfg != nil && cfg.RemoteSocket != "" {
				ep.remote = cfg.RemoteSocket
			} else if u.Path != "" && u.Path != "/" {
				ep.remote = u.Path
			}
		}
	default:
		return endpoint{}, fmt.Errorf("docker host %q: scheme must be unix://, tcp:// or ssh://: %w", host, driver.ErrUnsupported)
	}
	return ep, nil
}

// advertiseHost is the host name put in endpoints when no loopback IP applies.
func (ep endpoint) advertiseHost(cfg *driver.DockerConfig) string {
	if cfg != nil && cfg.AdvertiseHost != "" {
		return cfg.AdvertiseHost
	}
	if ep.local {
		return "127.0.0.1"
	}
	return ep.u.Hostname()
}

// newHTTPTransport returns a transport that keeps enough idle connections for
// the provider's parallelism (the client's default of 2 per host makes 10
// parallel creates redial constantly).
func newHTTPTransport() *http.Transport {
	return &http.Transport{
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
}

// newClient builds the API client for cfg, and for ssh:// the dialer it
// uses. It does not touch the network: the first request negotiates the API
// version.
func newClient(cfg driver.Config) (*client.Client, *sshDial, error) {
	dc := cfg.Docker
	if dc == nil {
		dc = &driver.DockerConfig{}
	}
	ep, err := parseEndpoint(dc)
	if err != nil {
		return nil, nil, err
	}
	tr := newHTTPTransport()
	opts := []client.Opt{
		client.WithHTTPClient(&http.Client{Transport: tr, CheckRedirect: client.CheckRedirect}),
		client.WithAPIVersionNegotiation(),
	}
	switch ep.u.Scheme {
	case "unix":
		opts = append(opts, client.WithHost(ep.host))
	case "tcp":
		tlsCfg, err := tcpTLS(ep, dc)
		if err != nil {
			return nil, nil, err
		}
		tr.TLSClientConfig = tlsCfg
		opts = append(opts, client.WithHost("tcp://"+tcpAddr(ep.u, tlsCfg != nil)))
	case "ssh":
		dial, err := newSSHDial(ep, dc, cfg.Secrets)
		if err != nil {
			return nil, nil, err
		}
		// The host only fills the Host header; every connection goes
		// through the SSH channel to the remote socket.
		opts = append(opts, client.WithHost("tcp://docker.ssh"), client.WithDialContext(dial.DialContext))
		cli, err := client.NewClientWithOpts(opts...)
		return cli, dial, err
	}
	cli, err := client.NewClientWithOpts(opts...)
	return cli, nil, err
}

// tcpTLS returns the TLS settings for tcp://, or nil for plain TCP, which is
// only allowed to a loopback address or when explicitly accepted.
func tcpTLS(ep endpoint, dc *driver.DockerConfig) (*tls.Config, error) {
	if dc.TLSCAFile == "" && dc.TLSCertFile == "" && dc.TLSKeyFile == "" {
		if isLoopbackHost(ep.u.Hostname()) || dc.AllowInsecureTCP {
			return nil, nil
		}
		return nil, fmt.Errorf("docker host %q: plain TCP to a non-loopback host exposes the engine; set tls_ca_file, tls_cert_file and tls_key_file (or allow_insecure_tcp)", ep.host)
	}
	if dc.TLSCAFile == "" {
		return nil, fmt.Errorf("docker host %q: tls_ca_file is required to verify the server", ep.host)
	}
	if (dc.TLSCertFile == "") != (dc.TLSKeyFile == "") {
		return nil, fmt.Errorf("docker host %q: tls_cert_file and tls_key_file go together", ep.host)
	}
	pem, err := os.ReadFile(dc.TLSCAFile)
	if err != nil {
		return nil, fmt.Errorf("docker host %q: read tls_ca_file: %w", ep.host, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("docker host %q: tls_ca_file %s holds no PEM certificate", ep.host, dc.TLSCAFile)
	}
	// ServerName stays empty: Go verifies the certificate against the
	// host name of the address dialled.
	c := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if dc.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(dc.TLSCertFile, dc.TLSKeyFile)
		if err != nil {
			return nil, fmt.Errorf("docker host %q: load client certificate: %w", ep.host, err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// tcpAddr adds Docker's conventional port when the URL has none.
func tcpAddr(u *url.URL, tls bool) string {
	if u.Port() != "" {
		return u.Host
	}
	if tls {
		return net.JoinHostPort(u.Hostname(), "2376")
	}
	return net.JoinHostPort(u.Hostname(), "2375")
}

func isLoopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// sshDial opens connections to the remote Docker socket over one shared SSH
// connection (sshconn reuses and redials it, so it is resolved per dial
// rather than held here). It remembers the outcome of its last dial: the
// Docker client replaces some dial errors (connection refused) by "Cannot
// connect to the Docker daemon at tcp://docker.ssh", which hides the cause.
type sshDial struct {
	cfg    sshconn.Config
	target string // host:port, for messages
	remote string // socket path on the SSH host

	mu      sync.Mutex
	lastErr error // nil after a successful dial
}

func newSSHDial(ep endpoint, dc *driver.DockerConfig, sec driver.Secrets) (*sshDial, error) {
	withHost := *dc
	withHost.Host = ep.host
	sc, err := withHost.SSHConfig(sec)
	if err != nil {
		return nil, fmt.Errorf("docker host %q: %w", ep.host, err)
	}
	return &sshDial{cfg: sc, target: ep.u.Host, remote: ep.remote}, nil
}

// DialContext is the Docker client's dialer; network and addr are ignored.
func (s *sshDial) DialContext(ctx context.Context, _, _ string) (net.Conn, error) {
	c, err := s.dial(ctx)
	s.mu.Lock()
	s.lastErr = err
	s.mu.Unlock()
	return c, err
}

func (s *sshDial) dial(ctx context.Context) (net.Conn, error) {
	conn, err := sshconn.Get(ctx, s.cfg)
	if err != nil {
		return nil, fmt.Errorf("ssh to %s: %w", s.target, err)
	}
	c, err := conn.DialContext(ctx, "unix", s.remote)
	if err != nil {
		return nil, fmt.Errorf("ssh to %s: open %s: %w", s.target, s.remote, err)
	}
	return c, nil
}

// last is the error of the last dial, nil if it succeeded.
func (s *sshDial) last() error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastErr
}

// errUnreachable tells whether err means the engine did not answer at all.
func errUnreachable(err error) bool {
	if client.IsErrConnectionFailed(err) {
		return true
	}
	var opErr *net.OpError
	return errors.As(err, &opErr)
}
