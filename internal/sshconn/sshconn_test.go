package sshconn

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func TestParseURL(t *testing.T) {
	t.Setenv("USER", "alice")
	tests := []struct {
		in      string
		want    Config
		wantErr string
	}{
		{in: "ssh://ubuntu@gpu-1:2200", want: Config{User: "ubuntu", Host: "gpu-1", Port: 2200}},
		{in: "ssh://gpu-1", want: Config{User: "alice", Host: "gpu-1", Port: 22}},
		{in: "ssh://root@[::1]:22/run/podman/podman.sock", want: Config{User: "root", Host: "::1", Port: 22, SocketPath: "/run/podman/podman.sock"}},
		{in: "ssh://h/", want: Config{User: "alice", Host: "h", Port: 22}},
		{in: "tcp://h:22", wantErr: "scheme"},
		{in: "ssh://u:secret@h", wantErr: "password"},
		{in: "ssh://h:0", wantErr: "invalid port"},
		{in: "ssh://h:70000", wantErr: "invalid port"},
		{in: "ssh://", wantErr: "no host"},
		{in: "ssh://h?x=1", wantErr: "expected"},
		// url.Parse reads "h:22" as the host: an address no dial can reach.
		{in: "ssh://h:22:22", wantErr: "invalid host"},
		// Every error hides the password, not only the one about it.
		{in: "ssh://u:secret@h:bad", wantErr: "invalid port"},
		{in: "ssh://u:secret@[::1", wantErr: `"ssh://u:xxxxx@[::1"`},
		{in: "tcp://u:secret@h:22", wantErr: "scheme"},
	}
	for _, tt := range tests {
		got, err := ParseURL(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseURL(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("ParseURL(%q) error leaks the password: %v", tt.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseURL(%q): %v", tt.in, err)
			continue
		}
		home, _ := os.UserHomeDir()
		tt.want.KnownHostsFile = filepath.Join(home, ".ssh/known_hosts")
		if got != tt.want {
			t.Errorf("ParseURL(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestParseURLDefaultUserRoot(t *testing.T) {
	t.Setenv("USER", "")
	got, err := ParseURL("ssh://h")
	if err != nil || got.User != "root" {
		t.Fatalf("ParseURL = %+v, %v; want user root", got, err)
	}
}

func TestKeyLeavesOutSecretAndSocket(t *testing.T) {
	a := Config{User: "u", Host: "h", Port: 22, PrivateKeyPEM: "secret-a", SocketPath: "/a.sock"}
	b := Config{User: "u", Host: "h", PrivateKeyPEM: "secret-b"}
	if a.Key() != b.Key() {
		t.Errorf("Key differs by secret or socket path")
	}
	c := a
	c.KeyFile = "/k"
	if a.Key() == c.Key() {
		t.Errorf("Key ignores KeyFile")
	}
}

func TestJumpConfig(t *testing.T) {
	cfg := Config{User: "deploy", Host: "target", Port: 22, KeyFile: "/k", KnownHostsFile: "/kh",
		HostKeyFingerprint: "SHA256:x", JumpHost: "bastion:2200"}
	j, err := cfg.jumpConfig()
	if err != nil {
		t.Fatal(err)
	}
	if j.User != "deploy" || j.Host != "bastion" || j.Port != 2200 || j.KeyFile != "/k" || j.KnownHostsFile != "/kh" {
		t.Errorf("jumpConfig = %+v", j)
	}
	if j.HostKeyFingerprint != "" || j.JumpHost != "" {
		t.Errorf("jumpConfig carries the target's pin or jump host: %+v", j)
	}
	cfg.JumpHost = "ops@bastion"
	if j, _ = cfg.jumpConfig(); j.User != "ops" || j.Port != 22 {
		t.Errorf("jumpConfig(ops@bastion) = %+v", j)
	}
	cfg.JumpHost = "bastion/x"
	if _, err := cfg.jumpConfig(); err == nil {
		t.Errorf("jumpConfig accepted a path")
	}
	cfg.JumpHost = "ops:secret@bastion:bad"
	if _, err := cfg.jumpConfig(); err == nil || strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "ops:xxxxx@bastion:bad") {
		t.Errorf("jumpConfig(%q) error = %v; want it named with the password hidden", cfg.JumpHost, err)
	}
}

func TestNormalizeFingerprint(t *testing.T) {
	key := newTestKey(t)
	fp := ssh.FingerprintSHA256(key)
	for _, in := range []string{fp, fp + "=", "  " + fp + " "} {
		got, err := NormalizeFingerprint(in)
		if err != nil || got != fp {
			t.Errorf("NormalizeFingerprint(%q) = %q, %v; want %q", in, got, err, fp)
		}
	}
	// The last of 43 characters carries 2 stray bits: a variant decodes to
	// the same hash but never equals the fingerprint the server's key prints,
	// so a pin holding it would refuse the right server with a confusing error.
	last := strings.IndexByte(base64Alphabet, fp[len(fp)-1])
	strayBits := fp[:len(fp)-1] + string(base64Alphabet[last|1])
	for _, in := range []string{"", "MD5:aa:bb", "SHA256:short", strings.TrimPrefix(fp, "SHA256:"), strayBits} {
		if _, err := NormalizeFingerprint(in); err == nil {
			t.Errorf("NormalizeFingerprint(%q) accepted", in)
		}
	}
}

const base64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

func newTestKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writeKnownHosts(t *testing.T, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Fingerprint answers without network from a pin or a single known key:
// the hosts below do not exist.
func TestFingerprintWithoutNetwork(t *testing.T) {
	t.Cleanup(CloseAll)
	key := newTestKey(t)
	fp := ssh.FingerprintSHA256(key)
	ctx := ctxTimeout(t, 5*time.Second)

	got, err := Fingerprint(ctx, Config{Host: "192.0.2.1", HostKeyFingerprint: fp + "="})
	if err != nil || got != fp {
		t.Errorf("Fingerprint(pin) = %q, %v; want %q", got, err, fp)
	}

	hashed := knownhosts.HashHostname(knownhosts.Normalize("nowhere.invalid:2222"))
	file := writeKnownHosts(t,
		knownhosts.Line([]string{"other.invalid"}, newTestKey(t)),
		hashed+" "+strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))))
	got, err = Fingerprint(ctx, Config{Host: "nowhere.invalid", Port: 2222, KnownHostsFile: file})
	if err != nil || got != fp {
		t.Errorf("Fingerprint(hashed known_hosts) = %q, %v; want %q", got, err, fp)
	}

	if _, err := Fingerprint(ctx, Config{Host: "h", HostKeyFingerprint: "MD5:00"}); err == nil {
		t.Errorf("Fingerprint accepted an invalid pin")
	}
}

func TestHostKeyPolicy(t *testing.T) {
	known, offered := newTestKey(t), newTestKey(t)
	file := writeKnownHosts(t, knownhosts.Line([]string{"[h.example]:2222"}, known))
	cfg := Config{User: "u", Host: "h.example", Port: 2222, KnownHostsFile: file}

	p, err := newHostKeyPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.algorithms(); len(got) != 1 || got[0] != ssh.KeyAlgoED25519 {
		t.Errorf("algorithms = %v, want [ssh-ed25519]", got)
	}
	if err := p.check("", nil, known); err != nil || p.verified != ssh.FingerprintSHA256(known) {
		t.Errorf("known key: %v, verified %q", err, p.verified)
	}
	var hk *HostKeyError
	if err := p.check("", nil, offered); !errors.As(err, &hk) || !hk.Changed {
		t.Fatalf("changed key: err = %v", err)
	}
	for _, want := range []string{"CHANGED", ssh.FingerprintSHA256(offered), ssh.FingerprintSHA256(known),
		"ssh-keygen -R '[h.example]:2222'", "ssh-keyscan -t ed25519 -p 2222 h.example", "host_key_fingerprint"} {
		if !strings.Contains(hk.Error(), want) {
			t.Errorf("changed-key error lacks %q:\n%s", want, hk.Error())
		}
	}

	cfg.Host = "unknown.example"
	p, _ = newHostKeyPolicy(cfg)
	if err := p.check("", nil, offered); !errors.As(err, &hk) || hk.Changed {
		t.Fatalf("unknown key: err = %v", err)
	}
	if !strings.Contains(hk.Error(), "unknown") || !strings.Contains(hk.Error(), hk.Line) {
		t.Errorf("unknown-key error: %s", hk.Error())
	}

	cfg.KnownHostsFile = filepath.Join(t.TempDir(), "missing")
	p, err = newHostKeyPolicy(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.check("", nil, offered); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing known_hosts: err = %v", err)
	}
}

func TestRSAKnownKeyAllowsSHA2(t *testing.T) {
	got := algorithmsFor(ssh.KeyAlgoRSA)
	if len(got) != 3 || got[0] != ssh.KeyAlgoRSASHA512 {
		t.Errorf("algorithmsFor(ssh-rsa) = %v", got)
	}
}

func TestKeyFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := keyFileSigner(filepath.Join(dir, "none"), ""); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing key file: %v", err)
	}
	cr := loadCredentials(Config{KeyFile: filepath.Join(dir, "none"), PrivateKeyPEM: "not a key"})
	if _, err := cr.method(); !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "key file") ||
		!strings.Contains(err.Error(), "ssh_private_key") {
		t.Errorf("no credentials: %v", err)
	}
}

func TestDialContextRejectsNetwork(t *testing.T) {
	c := newConn(Config{Host: "h"}.withDefaults())
	if _, err := c.DialContext(context.Background(), "udp", "x:1"); err == nil {
		t.Errorf("udp accepted")
	}
}
