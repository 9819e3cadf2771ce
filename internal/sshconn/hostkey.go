package sshconn

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// HostKeyError is returned when the server's host key is not trusted: it is
// unknown to the known_hosts file, differs from the known key, or differs from
// the pinned fingerprint. The message says how to trust the key.
type HostKeyError struct {
	Host     string   // host:port as dialled
	Offered  string   // SHA256 fingerprint of the key the server offered
	KeyType  string   // e.g. ssh-ed25519
	Line     string   // known_hosts line that would trust the offered key
	Known    []string // fingerprints (with file:line) the policy expected
	File     string   // known_hosts file consulted; empty with a pin
	Pinned   string   // the pinned fingerprint, if any
	Changed  bool     // a key was known for the host and this is not it
	Revoked  bool     // the key is marked @revoked
	keyscan  string
	fileNote string
}

func (e *HostKeyError) Error() string {
	trust := fmt.Sprintf("pin it with host_key_fingerprint = %q", e.Offered)
	switch {
	case e.Revoked:
		return fmt.Sprintf("ssh: host key of %s (%s %s) is marked @revoked in %s", e.Host, e.KeyType, e.Offered, e.File)
	case e.Pinned != "":
		return fmt.Sprintf("ssh: HOST KEY MISMATCH for %s: the server offered %s %s but host_key_fingerprint pins %s. "+
			"This may be a man-in-the-middle attack. If the key changed legitimately (verify it out of band), %s",
			e.Host, e.KeyType, e.Offered, e.Pinned, trust)
	case e.Changed:
		return fmt.Sprintf("ssh: HOST KEY CHANGED for %s: the server offered %s %s but %s. "+
			"This may be a man-in-the-middle attack. If the key changed legitimately (verify it out of band), "+
			"remove the old entry with `ssh-keygen -R '%s' -f %s`, then add the new one with `%s >> %s` "+
			"(or append the line %q), or %s",
			e.Host, e.KeyType, e.Offered, "known_hosts expects "+strings.Join(e.Known, ", "),
			knownhosts.Normalize(e.Host), e.File, e.keyscan, e.File, e.Line, trust)
	default:
		return fmt.Sprintf("ssh: host key of %s is unknown: %s%s has no entry for it; the server offered %s %s. "+
			"Verify this fingerprint out of band, then trust it with `%s >> %s` (or append the line %q), or %s",
			e.Host, e.File, e.fileNote, e.KeyType, e.Offered, e.keyscan, e.File, e.Line, trust)
	}
}

// hostKeyPolicy verifies the host key for one handshake and remembers the
// verified fingerprint or the rejection.
type hostKeyPolicy struct {
	cfg      Config
	db       ssh.HostKeyCallback // nil with a pin or without a known_hosts file
	fileNote string
	known    []knownhosts.KnownKey
	pin      string

	verified string
	err      *HostKeyError
}

func newHostKeyPolicy(cfg Config) (*hostKeyPolicy, error) {
	p := &hostKeyPolicy{cfg: cfg}
	if cfg.HostKeyFingerprint != "" {
		pin, err := NormalizeFingerprint(cfg.HostKeyFingerprint)
		if err != nil {
			return nil, err
		}
		p.pin = pin
		return p, nil
	}
	db, known, err := lookupKnownHosts(cfg.KnownHostsFile, cfg.Addr())
	if errors.Is(err, fs.ErrNotExist) {
		p.fileNote = " (the file does not exist)"
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	p.db, p.known = db, known
	return p, nil
}

// algorithms restricts the host key algorithms to those of the known keys,
// so a server with several host keys shows the one known_hosts holds
// instead of failing as "changed". Nil means the library default.
func (p *hostKeyPolicy) algorithms() []string {
	var algos []string
	for _, k := range p.known {
		for _, a := range algorithmsFor(k.Key.Type()) {
			if !slices.Contains(algos, a) {
				algos = append(algos, a)
			}
		}
	}
	return algos
}

// algorithmsFor maps a key type to the signature algorithms that prove it.
func algorithmsFor(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{keyType}
}

// check is the ssh.HostKeyCallback.
func (p *hostKeyPolicy) check(_ string, _ net.Addr, key ssh.PublicKey) error {
	fp := ssh.FingerprintSHA256(key)
	if p.pin != "" {
		if fp == p.pin {
			p.verified = fp
			return nil
		}
		p.err = p.newError(key)
		p.err.Pinned = p.pin
		return p.err
	}
	if p.db == nil {
		p.err = p.newError(key)
		return p.err
	}
	err := p.db(p.cfg.Addr(), dummyAddr, key)
	if err == nil {
		p.verified = fp
		return nil
	}
	p.err = p.newError(key)
	var keyErr *knownhosts.KeyError
	var revoked *knownhosts.RevokedError
	switch {
	case errors.As(err, &revoked):
		p.err.Revoked = true
	case errors.As(err, &keyErr):
		p.err.Changed = len(keyErr.Want) > 0
		p.err.Known = describeKnown(keyErr.Want)
	default:
		return err
	}
	return p.err
}

func (p *hostKeyPolicy) newError(key ssh.PublicKey) *HostKeyError {
	addr := p.cfg.Addr()
	return &HostKeyError{
		Host:     addr,
		Offered:  ssh.FingerprintSHA256(key),
		KeyType:  key.Type(),
		Line:     knownhosts.Line([]string{knownhosts.Normalize(addr)}, key),
		File:     p.cfg.KnownHostsFile,
		keyscan:  keyscanCommand(p.cfg, key.Type()),
		fileNote: p.fileNote,
	}
}

func describeKnown(keys []knownhosts.KnownKey) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, fmt.Sprintf("%s %s (%s:%d)", k.Key.Type(), ssh.FingerprintSHA256(k.Key), k.Filename, k.Line))
	}
	return out
}

// keyscanCommand is the ssh-keyscan invocation that prints the known_hosts
// line for the offered key type.
func keyscanCommand(cfg Config, keyType string) string {
	t := strings.TrimPrefix(keyType, "ssh-")
	if strings.HasPrefix(keyType, "ecdsa-") {
		t = "ecdsa"
	}
	cmd := "ssh-keyscan -t " + t
	if cfg.Port != DefaultPort {
		cmd += " -p " + strconv.Itoa(cfg.Port)
	}
	return cmd + " " + cfg.Host
}

// dummyAddr satisfies knownhosts, which matches the host name given to it
// first; the remote address is not consulted (like OpenSSH's CheckHostIP=no).
var dummyAddr = &net.TCPAddr{IP: net.IPv4zero}

// lookupKnownHosts opens a known_hosts file and returns its callback and the
// keys it holds for addr (host:port; hashed entries and [host]:port match).
func lookupKnownHosts(file, addr string) (ssh.HostKeyCallback, []knownhosts.KnownKey, error) {
	if _, err := os.Stat(file); err != nil {
		return nil, nil, err
	}
	db, err := knownhosts.New(file)
	if err != nil {
		return nil, nil, fmt.Errorf("ssh: reading known_hosts %s: %w", file, err)
	}
	// Checking a key the file cannot contain lists the keys it has.
	var keyErr *knownhosts.KeyError
	if err := db(addr, dummyAddr, probeKey()); errors.As(err, &keyErr) {
		return db, keyErr.Want, nil
	}
	return db, nil, nil
}

var probeKey = sync.OnceValue(func() ssh.PublicKey {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		panic(err)
	}
	return k
})

// NormalizeFingerprint checks a pinned fingerprint ("SHA256:" followed by
// base64, padding optional) and returns it in ssh.FingerprintSHA256's form.
func NormalizeFingerprint(fp string) (string, error) {
	s := strings.TrimSpace(fp)
	b64, ok := strings.CutPrefix(s, "SHA256:")
	if !ok {
		return "", fmt.Errorf("sshconn: host key fingerprint %q: expected SHA256:<base64>, as printed by `ssh-keygen -lf` or `ssh-keyscan HOST | ssh-keygen -lf -`", fp)
	}
	b64 = strings.TrimRight(b64, "=")
	// Strict: a last character with stray low bits decodes to the same hash
	// but would never equal the fingerprint the server's key prints.
	raw, err := base64.RawStdEncoding.Strict().DecodeString(b64)
	if err != nil || len(raw) != 32 {
		return "", fmt.Errorf("sshconn: host key fingerprint %q: not a SHA256 fingerprint (43 base64 characters after SHA256:)", fp)
	}
	return "SHA256:" + b64, nil
}

// Fingerprint returns the host key fingerprint the connection for cfg will
// accept, so it can be recorded (for example in a backend handle, where a
// change then shows in the plan). It is cheap when it can be:
//   - a pinned fingerprint is returned as is (normalized), without network;
//   - a live shared connection answers with the key it verified;
//   - a known_hosts file holding exactly one key for the host answers with
//     that key, without network (the dial accepts only that key's algorithm);
//
// otherwise (several known keys, or none) it connects as Get does and returns
// the verified key; an unknown key fails with a *HostKeyError saying how to
// trust it.
func Fingerprint(ctx context.Context, cfg Config) (string, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return "", err
	}
	if cfg.HostKeyFingerprint != "" {
		return NormalizeFingerprint(cfg.HostKeyFingerprint)
	}
	if c := peek(cfg); c != nil && c.live() != nil {
		return c.HostKeyFingerprint(), nil
	}
	_, known, err := lookupKnownHosts(cfg.KnownHostsFile, cfg.Addr())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if len(known) == 1 {
		return ssh.FingerprintSHA256(known[0].Key), nil
	}
	c, err := Get(ctx, cfg)
	if err != nil {
		return "", err
	}
	return c.HostKeyFingerprint(), nil
}
