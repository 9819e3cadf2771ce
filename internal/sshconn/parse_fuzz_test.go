package sshconn

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// FuzzParseURL: an accepted ssh:// URL yields a host, a port in range, a
// user and an absolute socket path or none, and the URL written back from
// them parses to the same Config; a refused one is named, except that a
// password never appears in the error.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"ssh://host", "ssh://alice@host", "ssh://alice@host:2222", "ssh://alice@host:2222/run/docker.sock",
		"ssh://[::1]:22", "ssh://[fe80::1%25eth0]:22/x", "ssh://host/", "ssh://a%40b@host", "ssh://h%2fx",
		"ssh://alice:secret@host", "ssh://alice:secret@host:bad", "ssh://alice:secret@[::1", "ssh://:secret@host",
		"ssh://host:0", "ssh://host:65536", "ssh://host:+22", "ssh://host?x=1", "ssh://host#f", "ssh:host",
		"ssh://", "ssh:///path", "tcp://host:2376", "host", "", "SSH://host", "ssh://ho st", "ssh://host:22:22",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		t.Setenv("USER", "fuzzuser")
		cfg, err := ParseURL(s)
		if err != nil {
			if secret := secretPrefix(s); secret != "" {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("ParseURL(%q): error %q shows the password", s, err)
				}
				return
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Fatalf("ParseURL(%q): error %q does not name the URL", s, err)
			}
			return
		}
		if cfg.Host == "" || cfg.User == "" || cfg.Port < 1 || cfg.Port > 65535 {
			t.Fatalf("ParseURL(%q) = %+v: host, user or port missing or out of range", s, cfg)
		}
		if cfg.SocketPath != "" && !strings.HasPrefix(cfg.SocketPath, "/") {
			t.Fatalf("ParseURL(%q): socket path %q is not absolute", s, cfg.SocketPath)
		}
		if err := cfg.validate(); err != nil {
			t.Fatalf("ParseURL(%q) = %+v, which does not validate: %v", s, cfg, err)
		}
		again := (&url.URL{
			Scheme: "ssh", User: url.User(cfg.User),
			Host: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)), Path: cfg.SocketPath,
		}).String()
		back, err := ParseURL(again)
		if err != nil || back != cfg {
			t.Fatalf("ParseURL(%q) = %+v; written back as %q it parses to %+v, %v", s, cfg, again, back, err)
		}
	})
}

// secretPrefix is the start of a URL up to the end of a user info that
// holds a non-empty password ("ssh://u:pw@"), or "" when there is none.
func secretPrefix(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return ""
	}
	rest := s[i+3:]
	if end := strings.IndexAny(rest, "/?#"); end >= 0 {
		rest = rest[:end]
	}
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return ""
	}
	if _, pw, _ := strings.Cut(rest[:at], ":"); pw == "" {
		return ""
	}
	return s[:i+3+at+1]
}

// FuzzJumpHost: an accepted jump host is a host and port without a socket
// path; a refused one is named in the error.
func FuzzJumpHost(f *testing.F) {
	for _, s := range []string{
		"bastion", "bob@bastion", "bob@bastion:2222", "ssh://bob@bastion:2222", "[::1]:2200", "bastion/x",
		"bob@", "@bastion", "bastion:0", "ssh://", "bob:pw@bastion", "a b", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		t.Setenv("USER", "fuzzuser")
		target := Config{User: "alice", Host: "target.test", Port: 22, JumpHost: s}
		j, err := target.jumpConfig()
		if err != nil {
			asURL := "ssh://" + strings.TrimPrefix(s, "ssh://")
			if secret := secretPrefix(asURL); secret != "" {
				if strings.Contains(err.Error(), strings.TrimPrefix(secret, "ssh://")) {
					t.Fatalf("jump host %q: error %q shows the password", s, err)
				}
			} else if !strings.Contains(err.Error(), strings.Trim(fmt.Sprintf("%q", strings.TrimPrefix(s, "ssh://")), `"`)) {
				t.Fatalf("jump host %q: error %q does not name it", s, err)
			}
			return
		}
		if j.Host == "" || j.User == "" || j.Port < 1 || j.Port > 65535 || j.SocketPath != "" {
			t.Fatalf("jump host %q gives %+v", s, j)
		}
	})
}

// FuzzNormalizeFingerprint: an accepted pin is a 32-byte SHA-256 in the
// exact form ssh.FingerprintSHA256 prints, and normalizing it again changes
// nothing; a refused one is named in the error.
func FuzzNormalizeFingerprint(f *testing.F) {
	sum := ssh.FingerprintSHA256(fixedKey(1))
	for _, s := range []string{
		sum, sum + "=", " " + sum + "\n", strings.TrimPrefix(sum, "SHA256:"), "sha256:" + sum[7:], "MD5:aa:bb",
		"SHA256:", "SHA256:AAAA", sum[:len(sum)-1] + "B", sum + "A", "SHA256:" + strings.Repeat("/", 43), "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := NormalizeFingerprint(s)
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Fatalf("NormalizeFingerprint(%q): error %q does not name the value", s, err)
			}
			return
		}
		raw, err := base64.RawStdEncoding.DecodeString(strings.TrimPrefix(got, "SHA256:"))
		if err != nil || len(raw) != 32 {
			t.Fatalf("NormalizeFingerprint(%q) = %q: not SHA256:<base64 of 32 bytes>", s, got)
		}
		if canonical := "SHA256:" + base64.RawStdEncoding.EncodeToString(raw); got != canonical {
			t.Fatalf("NormalizeFingerprint(%q) = %q, but ssh prints that hash as %q", s, got, canonical)
		}
		if again, err := NormalizeFingerprint(got); err != nil || again != got {
			t.Fatalf("NormalizeFingerprint(%q) = %q, %v: not stable", got, again, err)
		}
	})
}

// fixedKey is a deterministic ed25519 public key, so seeds can hold it.
func fixedKey(seed byte) ssh.PublicKey {
	priv := ed25519.NewKeyFromSeed([]byte(strings.Repeat(string(rune('a'+seed)), ed25519.SeedSize)))
	k, err := ssh.NewPublicKey(priv.Public())
	if err != nil {
		panic(err)
	}
	return k
}

// FuzzKnownHosts: whatever lines precede it, a known_hosts entry for the
// target keeps the target's key trusted, and a key the file never names is
// never trusted: it is reported as unknown or changed. A file that cannot
// be read is named in the error.
func FuzzKnownHosts(f *testing.F) {
	trusted, other := fixedKey(1), fixedKey(2)
	line := func(k ssh.PublicKey) string { return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(k))) }
	for _, s := range []string{
		"", "# comment", "other.test " + line(other), "[target.test]:2222 " + line(other),
		knownhosts.Line([]string{"target.test"}, other), "*.test " + line(other), "!target.test,*.test " + line(other),
		"@revoked * " + line(other), "@cert-authority *.test " + line(other), "target.test ssh-ed25519 !!!!",
		"target.test\r\n", "|1|bad|bad " + line(other), "target.test", "  \t", "target.test ssh-rsa AAAA comment",
		"@unknown target.test " + line(other),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, content string) {
		file := filepath.Join(t.TempDir(), "known_hosts")
		text := content + "\ntarget.test " + line(trusted) + "\n"
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		db, known, err := lookupKnownHosts(file, "target.test:22")
		if err != nil {
			if !strings.Contains(err.Error(), file) {
				t.Fatalf("known_hosts %q: error %q does not name the file", text, err)
			}
			return
		}
		mentions := func(k ssh.PublicKey) bool {
			return strings.Contains(content, base64.StdEncoding.EncodeToString(k.Marshal())[:40])
		}
		if !mentions(trusted) {
			if err := db("target.test:22", dummyAddr, trusted); err != nil {
				t.Fatalf("known_hosts %q: the target's own entry is not trusted: %v", text, err)
			}
			if !holds(known, trusted) {
				t.Fatalf("known_hosts %q: the target's key is not among the known keys %v", text, known)
			}
		}
		if stranger := fixedKey(3); !mentions(stranger) {
			var keyErr *knownhosts.KeyError
			if err := db("target.test:22", dummyAddr, stranger); !errors.As(err, &keyErr) {
				t.Fatalf("known_hosts %q: a key it never names is not refused: %v", text, err)
			}
		}
	})
}

func holds(known []knownhosts.KnownKey, k ssh.PublicKey) bool {
	for _, kk := range known {
		if string(kk.Key.Marshal()) == string(k.Marshal()) {
			return true
		}
	}
	return false
}
