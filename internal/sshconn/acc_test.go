package sshconn

// Tests against the private sshd of scripts/setup-sshd.sh (gate SANDBOX_ACC_SSH).

import (
	"context"
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

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testgate"
)

// mustDialEcho opens a channel to a fresh echo socket and checks a round trip.
func mustDialEcho(t *testing.T, c *Conn) {
	t.Helper()
	nc, err := c.DialContext(ctxTimeout(t, 10*time.Second), "unix", echoUnix(t))
	if err != nil {
		t.Fatalf("DialContext: %v", err)
	}
	defer nc.Close()
	if err := roundTrip(nc, "hello"); err != nil {
		t.Fatal(err)
	}
}

func TestAccKeyFile(t *testing.T) {
	e := accEnv(t)
	c, err := Get(ctxTimeout(t, 10*time.Second), e.config(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.HostKeyFingerprint(); got != e.fingerprint {
		t.Errorf("HostKeyFingerprint = %q, want %q", got, e.fingerprint)
	}
	mustDialEcho(t, c)
	nc, err := c.DialContext(ctxTimeout(t, 10*time.Second), "tcp", echoTCP(t))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := roundTrip(nc, "over direct-tcpip"); err != nil {
		t.Fatal(err)
	}
}

func TestAccEncryptedKey(t *testing.T) {
	e := accEnv(t)
	cfg := e.config(t)
	cfg.KeyFile = e.keyEnc
	ctx := ctxTimeout(t, 10*time.Second)

	_, err := Get(ctx, cfg)
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "encrypted") || !strings.Contains(err.Error(), "ssh_key_passphrase_env") {
		t.Errorf("no passphrase: err = %v", err)
	}

	cfg.KeyPassphraseEnv = "SANDBOX_TEST_PASSPHRASE_UNDER_TEST"
	t.Setenv(cfg.KeyPassphraseEnv, "wrong")
	if _, err := Get(ctx, cfg); err == nil || !strings.Contains(err.Error(), "decrypting") {
		t.Errorf("wrong passphrase: err = %v", err)
	}

	t.Setenv(cfg.KeyPassphraseEnv, e.passphrase)
	c, err := Get(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustDialEcho(t, c)
}

func TestAccAgent(t *testing.T) {
	e := accEnv(t)
	serveAgent(t, e.key)
	cfg := e.config(t)
	cfg.KeyFile = ""
	c, err := Get(ctxTimeout(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustDialEcho(t, c)
}

// A key file the server refuses does not stop the agent's key from working:
// the first that works wins.
func TestAccFirstThatWorks(t *testing.T) {
	e := accEnv(t)
	serveAgent(t, e.key)
	cfg := e.config(t)
	cfg.KeyFile = e.keyOther
	c, err := Get(ctxTimeout(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustDialEcho(t, c)
}

func TestAccProviderPrivateKey(t *testing.T) {
	e := accEnv(t)
	pem, err := os.ReadFile(e.key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.config(t)
	cfg.KeyFile = ""
	cfg.PrivateKeyPEM = string(pem)
	c, err := Get(ctxTimeout(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustDialEcho(t, c)
}

func TestAccWrongClientKey(t *testing.T) {
	e := accEnv(t)
	cfg := e.config(t)
	cfg.KeyFile = e.keyOther
	_, err := Get(ctxTimeout(t, 10*time.Second), cfg)
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("err = %v, want ErrAuth", err)
	}
	want := fingerprintOfPubFile(t, e.keyOther+".pub")
	if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "authorized_keys") {
		t.Errorf("error should name the refused key %s and authorized_keys: %v", want, err)
	}
}

func TestAccUnknownHostKey(t *testing.T) {
	e := accEnv(t)
	for name, file := range map[string]string{
		"empty":   writeKnownHosts(t, "# nothing"),
		"missing": filepath.Join(t.TempDir(), "known_hosts"),
	} {
		cfg := e.config(t)
		cfg.KnownHostsFile = file
		_, err := Get(ctxTimeout(t, 10*time.Second), cfg)
		var hk *HostKeyError
		if !errors.As(err, &hk) || hk.Changed || hk.Offered != e.fingerprint {
			t.Fatalf("%s: err = %v, want an unknown-key HostKeyError offering %s", name, err, e.fingerprint)
		}
		for _, want := range []string{e.fingerprint, "ssh-keyscan -t ed25519 -p 2222 127.0.0.1", file, "host_key_fingerprint"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error lacks %q: %v", name, want, err)
			}
		}
	}
}

func TestAccChangedHostKey(t *testing.T) {
	e := accEnv(t)
	cfg := e.config(t)
	cfg.KnownHostsFile = e.knownHostsWrong
	_, err := Get(ctxTimeout(t, 10*time.Second), cfg)
	var hk *HostKeyError
	if !errors.As(err, &hk) || !hk.Changed || hk.Offered != e.fingerprint {
		t.Fatalf("err = %v, want a changed-key HostKeyError offering %s", err, e.fingerprint)
	}
	if !strings.Contains(err.Error(), "ssh-keygen -R '[127.0.0.1]:2222'") {
		t.Errorf("error does not say how to replace the entry: %v", err)
	}
}

func TestAccPinnedFingerprint(t *testing.T) {
	e := accEnv(t)
	cfg := e.config(t)
	cfg.KnownHostsFile = filepath.Join(t.TempDir(), "none") // the pin alone decides
	cfg.HostKeyFingerprint = e.fingerprint
	c, err := Get(ctxTimeout(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustDialEcho(t, c)

	cfg.HostKeyFingerprint = "SHA256:" + strings.Repeat("A", 43) // no real key
	_, err = Get(ctxTimeout(t, 10*time.Second), cfg)
	var hk *HostKeyError
	if !errors.As(err, &hk) || hk.Pinned != cfg.HostKeyFingerprint || !strings.Contains(err.Error(), e.fingerprint) {
		t.Fatalf("wrong pin: err = %v", err)
	}
}

func TestAccHashedKnownHosts(t *testing.T) {
	e := accEnv(t)
	cfg := e.config(t)
	cfg.KnownHostsFile = e.knownHostsHashed
	c, err := Get(ctxTimeout(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustDialEcho(t, c)
	fp, err := Fingerprint(ctxTimeout(t, 5*time.Second), cfg)
	if err != nil || fp != e.fingerprint {
		t.Errorf("Fingerprint = %q, %v; want %q", fp, err, e.fingerprint)
	}
}

// The Docker API answers through direct-streamlocal to the remote socket.
func TestAccDockerSocket(t *testing.T) {
	e := accEnv(t)
	const sock = "/var/run/docker.sock"
	if _, err := os.Stat(sock); err != nil && !testgate.Enabled("SANDBOX_ACC_DOCKER") {
		t.Skip("no local dockerd and SANDBOX_ACC_DOCKER is not set")
	}
	c, err := Get(ctxTimeout(t, 10*time.Second), e.config(t))
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return c.DialContext(ctx, "unix", sock)
		},
	}}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get("http://docker/_ping")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(body) != "OK" {
		t.Fatalf("GET /_ping = %d %q", resp.StatusCode, body)
	}
}

// Many concurrent callers share one connection (one session is dialled).
func TestAccConcurrentDials(t *testing.T) {
	e := accEnv(t)
	cfg := e.config(t)
	sock, tcp := echoUnix(t), echoTCP(t)
	const n = 40
	var wg sync.WaitGroup
	errs := make(chan error, n)
	conns := make(chan *Conn, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- concurrentRoundTrip(cfg, i, sock, tcp, conns)
		}()
	}
	wg.Wait()
	close(errs)
	close(conns)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	var first *Conn
	for c := range conns {
		if first == nil {
			first = c
		}
		if c != first {
			t.Fatalf("Get returned different connections for one config")
		}
	}
	if s := first.live(); s == nil {
		t.Fatalf("shared session died")
	}
}

func concurrentRoundTrip(cfg Config, i int, sock, tcp string, conns chan<- *Conn) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Get(ctx, cfg)
	if err != nil {
		return err
	}
	conns <- c
	network, addr := "unix", sock
	if i%2 == 1 {
		network, addr = "tcp", tcp
	}
	nc, err := c.DialContext(ctx, network, addr)
	if err != nil {
		return fmt.Errorf("caller %d: %w", i, err)
	}
	defer nc.Close()
	return roundTrip(nc, fmt.Sprintf("caller-%d", i))
}

// A rejected channel (no such socket) leaves the connection in place.
func TestAccDialRejected(t *testing.T) {
	e := accEnv(t)
	c, err := Get(ctxTimeout(t, 10*time.Second), e.config(t))
	if err != nil {
		t.Fatal(err)
	}
	before := c.live()
	if _, err := c.DialContext(ctxTimeout(t, 10*time.Second), "unix", "/nonexistent/socket"); err == nil {
		t.Fatal("dial to a missing socket succeeded")
	}
	if c.live() != before {
		t.Errorf("a rejected channel replaced the session")
	}
}

// pinnedVia is the test sshd reached through a proxy, with the host key pinned.
func pinnedVia(t *testing.T, e testEnv, p *proxy) Config {
	cfg := e.config(t)
	cfg.Port = p.port()
	cfg.HostKeyFingerprint = e.fingerprint
	return cfg
}

// A dropped connection is redialled transparently by the next DialContext.
func TestAccRedialAfterDrop(t *testing.T) {
	e := accEnv(t)
	target, _ := ParseURL(e.url)
	p := newProxy(t, target.Addr())
	c, err := Get(ctxTimeout(t, 10*time.Second), pinnedVia(t, e, p))
	if err != nil {
		t.Fatal(err)
	}
	mustDialEcho(t, c)
	first := c.live()

	p.cut()
	mustDialEcho(t, c)
	if c.live() == first {
		t.Errorf("the session was not replaced after the drop")
	}
}

// A path that silently stops carrying bytes is noticed by keepalives; the
// next call redials instead of hanging.
func TestAccKeepaliveMarksDead(t *testing.T) {
	e := accEnv(t)
	setKeepalive(t, 100*time.Millisecond, 300*time.Millisecond)
	target, _ := ParseURL(e.url)
	p := newProxy(t, target.Addr())
	c, err := Get(ctxTimeout(t, 10*time.Second), pinnedVia(t, e, p))
	if err != nil {
		t.Fatal(err)
	}
	first := c.live()
	p.freeze()
	select {
	case <-first.done:
	case <-time.After(5 * time.Second):
		t.Fatal("keepalive did not mark the frozen connection dead")
	}
	if !strings.Contains(first.deadErr.Error(), "keepalive") {
		t.Errorf("dead because %v, want keepalive", first.deadErr)
	}
	p.thaw()
	mustDialEcho(t, c)
}

func setKeepalive(t *testing.T, interval, timeout time.Duration) {
	oldI, oldT := keepaliveInterval, keepaliveTimeout
	keepaliveInterval, keepaliveTimeout = interval, timeout
	t.Cleanup(func() { keepaliveInterval, keepaliveTimeout = oldI, oldT })
}

// A server that accepts TCP but never speaks SSH fails within the ctx.
func TestAccHandshakeHonoursContext(t *testing.T) {
	e := accEnv(t)
	target, _ := ParseURL(e.url)
	p := newProxy(t, target.Addr())
	p.freeze()
	start := time.Now()
	_, err := Get(ctxTimeout(t, 500*time.Millisecond), pinnedVia(t, e, p))
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want a deadline error", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Get took %s despite a 500ms deadline", d)
	}
}

// Callers that queue while a dial is in flight share its outcome: a host
// that never answers costs one connection attempt, and each caller still
// gives up at its own deadline.
func TestAccWaitersShareOneDial(t *testing.T) {
	e := accEnv(t)
	target, _ := ParseURL(e.url)
	p := newProxy(t, target.Addr())
	p.freeze()
	cfg := pinnedVia(t, e, p)
	start := time.Now()
	var wg sync.WaitGroup
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			if _, err := Get(ctx, cfg); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want a deadline error", err)
			}
		}()
	}
	wg.Wait()
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("10 waiters took %s", d)
	}
	if n := p.acceptedCount(); n != 1 {
		t.Errorf("%d connection attempts, want 1 shared dial", n)
	}
}

// The same sshd serves as its own bastion: the target is reached through a
// direct-tcpip channel of the (pooled) jump connection.
func TestAccJumpHost(t *testing.T) {
	e := accEnv(t)
	cfg := e.config(t)
	cfg.JumpHost = fmt.Sprintf("%s@%s:%d", cfg.User, cfg.Host, cfg.Port)
	c, err := Get(ctxTimeout(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustDialEcho(t, c)
	jcfg, _ := cfg.withDefaults().jumpConfig()
	if j := peek(jcfg); j == nil || j.live() == nil {
		t.Fatal("the jump connection is not pooled")
	}
	if c.HostKeyFingerprint() != e.fingerprint {
		t.Errorf("target fingerprint = %q", c.HostKeyFingerprint())
	}

	// Losing the bastion loses the target; both come back on the next call.
	peek(jcfg).live().kill(errors.New("test: bastion dropped"))
	mustDialEcho(t, c)

	// The bastion is verified against known_hosts too.
	cfg.KnownHostsFile = e.knownHostsWrong
	cfg.HostKeyFingerprint = e.fingerprint // pins the target only
	_, err = Get(ctxTimeout(t, 10*time.Second), cfg)
	var hk *HostKeyError
	if !errors.As(err, &hk) || !hk.Changed || !strings.Contains(err.Error(), "jump host") {
		t.Errorf("bastion with a changed key: err = %v", err)
	}
}
