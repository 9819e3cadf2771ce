package docker_test

// Remote engines end to end through the driver, per transport: the shared
// conformance suite plus failure cases. Over SSH: the private sshd of
// scripts/setup-sshd.sh, forwarding to the local dockerd's socket. Over
// TCP+TLS: the second dockerd of scripts/setup-docker-tls.sh. Gates:
// SANDBOX_ACC_SSH and SANDBOX_ACC_TLS; set and not answering = failure.
// Paths come from /var/lib/sandbox-test/env.sh and default to what it sets.
// (remote_test.go holds the Docker driver's own smoke tests.)

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/drivertest"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/sshconn"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testgate"
)

// remote is one remote engine under test and a raw client to check it with.
type remote struct {
	dc    driver.DockerConfig
	raw   *client.Client
	image string // busybox, built on that engine through the driver
}

func testEnv(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func testDir(rel string) string {
	return filepath.Join(testEnv("SANDBOX_TEST_DIR", "/var/lib/sandbox-test"), rel)
}

// remoteGate skips without the gate and fails if addr does not accept TCP.
func remoteGate(t *testing.T, gate, addr, script string) {
	t.Helper()
	testgate.Require(t, gate, func() error {
		c, err := net.DialTimeout("tcp", addr, 3*time.Second)
		if err != nil {
			return fmt.Errorf("nothing answers at %s: %w", addr, err)
		}
		return c.Close()
	}, "Run scripts/"+script+".")
}

func sshDockerConfig() driver.DockerConfig {
	return driver.DockerConfig{
		Host:           testEnv("SANDBOX_TEST_SSH_HOST", "ssh://root@127.0.0.1:2222"),
		SSHKeyFile:     testEnv("SANDBOX_TEST_SSH_KEY", testDir("ssh/id_ed25519")),
		KnownHostsFile: testEnv("SANDBOX_TEST_SSH_KNOWN_HOSTS", testDir("ssh/known_hosts")),
	}
}

func tlsDockerConfig() driver.DockerConfig {
	return driver.DockerConfig{
		Host:        testEnv("SANDBOX_TEST_TLS_HOST", "tcp://127.0.0.1:2376"),
		TLSCAFile:   testEnv("SANDBOX_TEST_TLS_CA", testDir("docker-tls/certs/ca.pem")),
		TLSCertFile: testEnv("SANDBOX_TEST_TLS_CERT", testDir("docker-tls/certs/client.pem")),
		TLSKeyFile:  testEnv("SANDBOX_TEST_TLS_KEY", testDir("docker-tls/certs/client-key.pem")),
	}
}

func sshRemote(t *testing.T) *remote {
	t.Helper()
	dc := sshDockerConfig()
	sc, err := sshconn.ParseURL(dc.Host)
	if err != nil {
		t.Fatal(err)
	}
	remoteGate(t, "SANDBOX_ACC_SSH", sc.Addr(), "setup-sshd.sh")
	t.Setenv("SSH_AUTH_SOCK", "") // only the configured key
	sc.KeyFile, sc.KnownHostsFile = dc.SSHKeyFile, dc.KnownHostsFile
	// The raw client reaches the same engine the same way, so the checks
	// hold wherever the SSH host is.
	raw, err := client.NewClientWithOpts(client.WithHost("tcp://docker.ssh"), client.WithAPIVersionNegotiation(),
		client.WithDialContext(func(ctx context.Context, _, _ string) (net.Conn, error) {
			conn, err := sshconn.Get(ctx, sc)
			if err != nil {
				return nil, err
			}
			return conn.DialContext(ctx, "unix", "/var/run/docker.sock")
		}))
	if err != nil {
		t.Fatal(err)
	}
	return newRemote(t, dc, raw)
}

func tlsRemote(t *testing.T) *remote {
	t.Helper()
	dc := tlsDockerConfig()
	host := strings.TrimPrefix(dc.Host, "tcp://")
	remoteGate(t, "SANDBOX_ACC_TLS", host, "setup-docker-tls.sh")
	tc, err := clientTLS(dc.TLSCAFile, dc.TLSCertFile, dc.TLSKeyFile)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := client.NewClientWithOpts(client.WithHost(dc.Host), client.WithAPIVersionNegotiation(),
		client.WithHTTPClient(&http.Client{Transport: &http.Transport{TLSClientConfig: tc}}))
	if err != nil {
		t.Fatal(err)
	}
	return newRemote(t, dc, raw)
}

func clientTLS(ca, cert, key string) (*tls.Config, error) {
	pem, err := os.ReadFile(ca)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}, nil
}

// newRemote makes the agent available and builds the busybox image on the
// engine through the driver (so the build context goes over the transport).
func newRemote(t *testing.T, dc driver.DockerConfig, raw *client.Client) *remote {
	t.Helper()
	t.Cleanup(func() { raw.Close() })
	if os.Getenv("SANDBOX_AGENT_BINARY") == "" { // TestMain builds it only under SANDBOX_ACC_DOCKER
		dir := t.TempDir()
		t.Setenv("SANDBOX_AGENT_BINARY", "") // restored (unset) after the test; buildAgent sets it
		if err := buildAgent(dir); err != nil {
			t.Fatalf("build sandbox-agent: %v", err)
		}
	}
	r := &remote{dc: dc, raw: raw}
	d, _ := r.open(t)
	r.image = "sandbox-test/busybox-remote:" + randName()
	if _, err := d.EnsureImage(ctxT(t), driver.ImageSpec{Name: r.image, Build: &driver.BuildSource{ContextDir: remoteBusyboxContext(t)}}); err != nil {
		t.Fatalf("build busybox on %s: %v", dc.Host, err)
	}
	t.Cleanup(func() {
		_, _ = raw.ImageRemove(context.Background(), r.image, image.RemoveOptions{Force: true, PruneChildren: true})
	})
	return r
}

func remoteBusyboxContext(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatalf("%v (apt-get install busybox-static)", err)
	}
	df := "FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\",\"--install\",\"-s\",\"/bin\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// open opens a driver on a fresh backend of this engine; everything the
// backend labelled is removed at cleanup, on the engine itself.
func (r *remote) open(t *testing.T) (driver.Driver, string) {
	t.Helper()
	return r.openWith(t, r.dc)
}

func (r *remote) openWith(t *testing.T, dc driver.DockerConfig) (driver.Driver, string) {
	t.Helper()
	name := "tf-acc-" + randName()
	d, err := driver.Open(context.Background(), driver.Config{Driver: driver.Docker, Name: name, Docker: &dc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Close()
		r.cleanup(t, name)
	})
	return d, name
}

func (r *remote) cleanup(t *testing.T, name string) {
	ctx := context.Background()
	list, err := r.raw.ContainerList(ctx, container.ListOptions{All: true, Filters: backendFilter(name)})
	if err != nil {
		t.Errorf("cleanup %s on %s: %v", name, r.dc.Host, err)
	}
	for _, c := range list {
		_ = r.raw.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}
	vols, _ := r.raw.VolumeList(ctx, volume.ListOptions{Filters: backendFilter(name)})
	for _, v := range vols.Volumes {
		_ = r.raw.VolumeRemove(ctx, v.Name, true)
	}
	_ = r.raw.NetworkRemove(ctx, "sandbox-"+name)
}

func (r *remote) conformance(t *testing.T) {
	drivertest.Run(t, drivertest.Harness{
		Open: func(t *testing.T) driver.Driver {
			d, _ := r.open(t)
			return d
		},
		Image: r.image,
	})
}

// webSpec is a running busybox httpd serving "ok" on port 8080.
func (r *remote) webSpec(name string) driver.InstanceSpec {
	return driver.InstanceSpec{
		Name: name, Type: driver.TypeContainer, Image: r.image, Running: true,
		Network: driver.NetworkIsolated,
		Command: []string{"sh", "-c", "mkdir -p /srv && echo ok > /srv/index.html && exec httpd -f -p 8080 -h /srv"},
		Ports:   []driver.PortSpec{{Name: "http", Port: 8080, Protocol: "tcp"}},
	}
}

// getOK polls an endpoint until it serves "ok".
func getOK(t *testing.T, endpoint string) {
	t.Helper()
	waitFor(t, 30*time.Second, "http://"+endpoint, func() (bool, string) {
		resp, err := http.Get("http://" + endpoint + "/")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.TrimSpace(string(b)) == "ok", string(b)
	})
}

// expectInfoError opens a driver with dc and expects Info to fail with a
// message holding every want.
func expectInfoError(t *testing.T, r *remote, dc driver.DockerConfig, want ...string) error {
	t.Helper()
	d, _ := r.openWith(t, dc)
	_, err := d.Info(ctxT(t))
	if err == nil {
		t.Fatalf("Info through %s succeeded; want an error", dc.Host)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error lacks %q: %v", w, err)
		}
	}
	return err
}

func TestRemoteSSH(t *testing.T) {
	t.Cleanup(sshconn.CloseAll) // last: the image cleanup still uses the connection
	r := sshRemote(t)
	t.Run("Conformance", r.conformance)
	t.Run("SharedConnection", func(t *testing.T) { testSSHShared(t, r) })
	t.Run("TwoBackendsLocalAndSSH", func(t *testing.T) { testTwoBackends(t, r) })
	t.Run("RedialAfterDrop", func(t *testing.T) { testSSHRedial(t, r) })
	t.Run("UnknownHostKey", func(t *testing.T) {
		dc := r.dc
		dc.KnownHostsFile = filepath.Join(t.TempDir(), "known_hosts")
		expectHostKeyError(t, expectInfoError(t, r, dc, "unknown", "ssh-keyscan", "host_key_fingerprint"))
	})
	t.Run("ChangedHostKey", func(t *testing.T) {
		dc := r.dc
		dc.KnownHostsFile = testEnv("SANDBOX_TEST_SSH_KNOWN_HOSTS_WRONG", testDir("ssh/known_hosts_wrong"))
		expectHostKeyError(t, expectInfoError(t, r, dc, "HOST KEY CHANGED"))
	})
	t.Run("PinnedFingerprint", func(t *testing.T) {
		dc := r.dc
		dc.KnownHostsFile = ""
		dc.HostKeyFingerprint = "SHA256:" + strings.Repeat("A", 43)
		expectHostKeyError(t, expectInfoError(t, r, dc, "HOST KEY MISMATCH"))
	})
	t.Run("WrongClientKey", func(t *testing.T) {
		dc := r.dc
		dc.SSHKeyFile = testEnv("SANDBOX_TEST_SSH_KEY_OTHER", testDir("ssh/id_ed25519_other"))
		err := expectInfoError(t, r, dc, "authorized_keys")
		if !errors.Is(err, sshconn.ErrAuth) || errors.Is(err, driver.ErrUnavailable) {
			t.Errorf("err = %v, want sshconn.ErrAuth and not ErrUnavailable", err)
		}
	})
	t.Run("SSHDown", func(t *testing.T) {
		// Nothing listens on the port: the SSH dial's own error is reported,
		// not the Docker client's "Cannot connect ... tcp://docker.ssh".
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		dc := r.dc
		dc.Host = fmt.Sprintf("ssh://root@127.0.0.1:%d", port)
		dc.KnownHostsFile, dc.HostKeyFingerprint = "", "SHA256:"+strings.Repeat("A", 43)
		err = expectInfoError(t, r, dc, "connection refused", fmt.Sprint(port))
		if !errors.Is(err, driver.ErrUnavailable) || strings.Contains(err.Error(), "docker.ssh") {
			t.Errorf("err = %v, want ErrUnavailable with the SSH dial's error", err)
		}
	})
	t.Run("MissingRemoteSocket", func(t *testing.T) {
		dc := r.dc
		dc.RemoteSocket = "/nonexistent/docker.sock"
		expectInfoError(t, r, dc, "/nonexistent/docker.sock")
	})
}

// expectHostKeyError checks that a host-key failure is reported as itself.
func expectHostKeyError(t *testing.T, err error) {
	t.Helper()
	var hk *sshconn.HostKeyError
	if !errors.As(err, &hk) || hk.Offered == "" || errors.Is(err, driver.ErrUnavailable) {
		t.Errorf("err = %v, want a *sshconn.HostKeyError (with the offered fingerprint), not ErrUnavailable", err)
	}
}

// Many concurrent driver calls share one SSH connection.
func testSSHShared(t *testing.T, r *remote) {
	d, _ := r.open(t)
	if err := d.EnsureScope(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := d.ListInstances(ctxT(t))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// One process, two backends on different transports, an instance on each.
func testTwoBackends(t *testing.T, r *remote) {
	if _, err := os.Stat("/var/run/docker.sock"); err != nil {
		t.Skip("no local docker socket: the SSH host is elsewhere")
	}
	local, err := client.NewClientWithOpts(client.WithHost("unix:///var/run/docker.sock"), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	localR := &remote{dc: driver.DockerConfig{Host: "unix:///var/run/docker.sock"}, raw: local, image: r.image}
	t.Cleanup(func() { local.Close() })
	for _, rr := range []*remote{localR, r} {
		d, _ := rr.open(t)
		inst, err := d.CreateInstance(ctxT(t), rr.webSpec("web"))
		if err != nil {
			t.Fatalf("%s: %v", rr.dc.Host, err)
		}
		getOK(t, inst.Endpoints["http"])
	}
}

// A dropped SSH connection is redialled for the next call. The engine is
// reached through a TCP proxy that can cut every connection.
func testSSHRedial(t *testing.T, r *remote) {
	sc, _ := sshconn.ParseURL(r.dc.Host)
	p := newCutProxy(t, sc.Addr())
	fp, err := sshconn.Fingerprint(ctxT(t), sshconn.Config{Host: sc.Host, Port: sc.Port, KnownHostsFile: r.dc.KnownHostsFile})
	if err != nil {
		t.Fatal(err)
	}
	dc := r.dc
	dc.Host = fmt.Sprintf("ssh://%s@127.0.0.1:%d", sc.User, p.port())
	dc.KnownHostsFile = ""
	dc.HostKeyFingerprint = fp // known_hosts has no entry for the proxy's port
	d, _ := r.openWith(t, dc)
	if err := d.EnsureScope(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	inst, err := d.CreateInstance(ctxT(t), r.webSpec("redial"))
	if err != nil {
		t.Fatal(err)
	}
	p.cut()
	got, err := d.InspectInstance(ctxT(t), inst.ID)
	if err != nil || !got.Running() {
		t.Fatalf("after the drop: %+v, %v", got, err)
	}
	if err := d.DeleteInstance(ctxT(t), inst.ID); err != nil {
		t.Fatal(err)
	}
}

// cutProxy forwards TCP to target; cut() drops every connection.
type cutProxy struct {
	l     net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l}
	t.Cleanup(func() { l.Close(); p.cut() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) port() int { return p.l.Addr().(*net.TCPAddr).Port }

func (p *cutProxy) cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func TestRemoteTLS(t *testing.T) {
	r := tlsRemote(t)
	t.Run("Conformance", r.conformance)
	t.Run("ServerNameLocalhost", func(t *testing.T) {
		dc := r.dc
		dc.Host = strings.Replace(dc.Host, "127.0.0.1", "localhost", 1)
		d, _ := r.openWith(t, dc)
		if _, err := d.Info(ctxT(t)); err != nil {
			t.Fatalf("localhost is in the server certificate's SANs: %v", err)
		}
	})
	t.Run("WrongCA", func(t *testing.T) {
		dc := r.dc
		dc.TLSCAFile = testEnv("SANDBOX_TEST_TLS_WRONG_CA", testDir("docker-tls/certs/wrong-ca.pem"))
		expectInfoError(t, r, dc, "certificate")
	})
	t.Run("WrongClientCert", func(t *testing.T) {
		dc := r.dc
		dc.TLSCertFile = testEnv("SANDBOX_TEST_TLS_WRONG_CERT", testDir("docker-tls/certs/wrong-client.pem"))
		dc.TLSKeyFile = testEnv("SANDBOX_TEST_TLS_WRONG_KEY", testDir("docker-tls/certs/wrong-client-key.pem"))
		expectInfoError(t, r, dc)
	})
	t.Run("NoClientCert", func(t *testing.T) {
		dc := r.dc
		dc.TLSCertFile, dc.TLSKeyFile = "", ""
		expectInfoError(t, r, dc)
	})
	t.Run("DaemonDown", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close() // nothing listens there now
		dc := r.dc
		dc.Host = "tcp://" + addr
		if err := expectInfoError(t, r, dc); !errors.Is(err, driver.ErrUnavailable) {
			t.Errorf("err = %v, want ErrUnavailable", err)
		}
	})
}
