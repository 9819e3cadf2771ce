package sshconn

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testgate"
)

// testEnv describes the private sshd started by scripts/setup-sshd.sh. The
// values come from its env file (env.sh) and default to what it writes.
type testEnv struct {
	url, key, keyEnc, passphrase, keyOther string
	knownHosts, knownHostsHashed           string
	knownHostsWrong, fingerprint           string
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// accEnv skips unless SANDBOX_ACC_SSH is set, and fails when it is set but
// the test sshd does not answer.
func accEnv(t *testing.T) testEnv {
	t.Helper()
	testgate.Skip(t, "SANDBOX_ACC_SSH")
	dir := envOr("SANDBOX_TEST_DIR", "/var/lib/sandbox-test")
	e := testEnv{
		url:              envOr("SANDBOX_TEST_SSH_HOST", "ssh://root@127.0.0.1:2222"),
		key:              envOr("SANDBOX_TEST_SSH_KEY", dir+"/ssh/id_ed25519"),
		keyEnc:           envOr("SANDBOX_TEST_SSH_KEY_ENC", dir+"/ssh/id_ed25519_enc"),
		passphrase:       envOr("SANDBOX_TEST_SSH_KEY_PASSPHRASE", "sandbox-test-passphrase"),
		keyOther:         envOr("SANDBOX_TEST_SSH_KEY_OTHER", dir+"/ssh/id_ed25519_other"),
		knownHosts:       envOr("SANDBOX_TEST_SSH_KNOWN_HOSTS", dir+"/ssh/known_hosts"),
		knownHostsHashed: envOr("SANDBOX_TEST_SSH_KNOWN_HOSTS_HASHED", dir+"/ssh/known_hosts_hashed"),
		knownHostsWrong:  envOr("SANDBOX_TEST_SSH_KNOWN_HOSTS_WRONG", dir+"/ssh/known_hosts_wrong"),
		fingerprint:      os.Getenv("SANDBOX_TEST_SSH_HOST_FINGERPRINT"),
	}
	cfg, err := ParseURL(e.url)
	if err != nil {
		t.Fatalf("SANDBOX_TEST_SSH_HOST: %v", err)
	}
	c, err := net.DialTimeout("tcp", cfg.Addr(), 3*time.Second)
	if err != nil {
		t.Fatalf("SANDBOX_ACC_SSH is set but the test sshd at %s does not answer (run scripts/setup-sshd.sh): %v", cfg.Addr(), err)
	}
	c.Close()
	if e.fingerprint == "" {
		e.fingerprint = fingerprintOfPubFile(t, filepath.Join(dir, "sshd/ssh_host_ed25519_key.pub"))
	}
	// Keep the developer's own agent out of the tests.
	t.Setenv("SSH_AUTH_SOCK", "")
	t.Cleanup(CloseAll)
	return e
}

// config is the test sshd with the authorized key and the plain known_hosts.
func (e testEnv) config(t *testing.T) Config {
	t.Helper()
	cfg, err := ParseURL(e.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.KeyFile = e.key
	cfg.KnownHostsFile = e.knownHosts
	return cfg
}

func fingerprintOfPubFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		t.Fatal(err)
	}
	return ssh.FingerprintSHA256(pub)
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// echoUnix serves a line echo on a unix socket in a temp dir (the sshd runs
// on this machine, so it can forward to it).
func echoUnix(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "echo.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	serveEcho(t, l)
	return path
}

// echoTCP serves a line echo on 127.0.0.1.
func echoTCP(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveEcho(t, l)
	return l.Addr().String()
}

func serveEcho(t *testing.T, l net.Listener) {
	serve(t, l, func(c net.Conn) { io.Copy(c, c) })
}

// serve hands every connection l accepts to handle, in its own goroutine,
// until l is closed at cleanup.
func serve(t *testing.T, l net.Listener, handle func(net.Conn)) {
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
}

// roundTrip writes a line on c and expects it back.
func roundTrip(c net.Conn, msg string) error {
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		return err
	}
	got, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(got) != msg {
		return errors.New("echo mismatch: " + got)
	}
	return nil
}

// serveAgent runs an in-process ssh-agent holding the given key files on a
// temp socket and points SSH_AUTH_SOCK at it.
func serveAgent(t *testing.T, keyFiles ...string) {
	t.Helper()
	keyring := agent.NewKeyring()
	for _, f := range keyFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		k, err := ssh.ParseRawPrivateKey(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := keyring.Add(agent.AddedKey{PrivateKey: k}); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "agent.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	serve(t, l, func(c net.Conn) { agent.ServeAgent(keyring, c) })
	t.Setenv("SSH_AUTH_SOCK", path)
}

// proxy forwards TCP connections to target. cut() drops every connection
// (a network failure); freeze() stops forwarding bytes while keeping the
// connections open (a dead path that only keepalives notice).
type proxy struct {
	l      net.Listener
	target string

	mu       sync.Mutex
	conns    []net.Conn
	frozen   chan struct{} // nil when forwarding
	accepted int
}

func newProxy(t *testing.T, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target}
	t.Cleanup(func() { l.Close(); p.thaw(); p.cut() })
	go p.serve()
	return p
}

func (p *proxy) port() int { return p.l.Addr().(*net.TCPAddr).Port }

func (p *proxy) acceptedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *proxy) serve() {
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, in, out)
		p.accepted++
		p.mu.Unlock()
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		p.waitThawed()
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (p *proxy) waitThawed() {
	p.mu.Lock()
	f := p.frozen
	p.mu.Unlock()
	if f != nil {
		<-f
	}
}

func (p *proxy) cut() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

func (p *proxy) freeze() {
	p.mu.Lock()
	if p.frozen == nil {
		p.frozen = make(chan struct{})
	}
	p.mu.Unlock()
}

func (p *proxy) thaw() {
	p.mu.Lock()
	if p.frozen != nil {
		close(p.frozen)
		p.frozen = nil
	}
	p.mu.Unlock()
}
