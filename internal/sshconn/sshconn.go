// Package sshconn dials SSH servers with golang.org/x/crypto/ssh, verifies
// host keys (known_hosts or a pinned fingerprint), and shares one connection
// per target in the process, redialling when it drops.
//
// API (fixed; the Docker and Incus drivers depend on it):
//
//	cfg, err := sshconn.ParseURL("ssh://user@host:22")   // fills User, Host, Port
//	cfg.KeyFile = ...; cfg.KnownHostsFile = ...
//	conn, err := sshconn.Get(ctx, cfg)                    // cached per cfg.Key()
//	c, err := conn.DialContext(ctx, "unix", "/var/run/docker.sock") // direct-streamlocal
//	c, err := conn.DialContext(ctx, "tcp", "127.0.0.1:8443")
//	fp := conn.HostKeyFingerprint()                       // "SHA256:..."
//
// Authentication offers, in this order and in one attempt: the KeyFile
// (decrypted with the passphrase in the environment variable KeyPassphraseEnv),
// the keys of the ssh-agent at SSH_AUTH_SOCK, then PrivateKeyPEM. The server
// takes the first one it accepts.
//
// Host keys are always verified: against HostKeyFingerprint when it is set,
// else against KnownHostsFile (default ~/.ssh/known_hosts). A jump host is
// always verified against KnownHostsFile.
package sshconn

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// DefaultPort is the SSH port used when a URL or jump host names none.
const DefaultPort = 22

// Config says where to connect and how to authenticate. PrivateKeyPEM is a
// secret (from the provider block) and is excluded from Key().
type Config struct {
	User               string
	Host               string
	Port               int
	KeyFile            string
	KeyPassphraseEnv   string
	KnownHostsFile     string
	HostKeyFingerprint string
	JumpHost           string // user@host:port
	PrivateKeyPEM      string

	// SocketPath is the path part of an ssh:// URL (a remote socket). It says
	// what to dial through the connection, not how to connect, so it is not
	// part of Key().
	SocketPath string
}

// ParseURL parses ssh://[user@]host[:port][/path]. The user defaults to $USER
// (else root) and the port to 22; a path becomes SocketPath.
func ParseURL(u string) (Config, error) {
	shown := redact(u) // errors name the URL, but never a password in it
	parsed, err := url.Parse(u)
	if err != nil {
		// Unwrapped: url.Parse's own error quotes the whole URL.
		return Config{}, fmt.Errorf("sshconn: invalid URL %q: %v", shown, errors.Unwrap(err))
	}
	if parsed.Scheme != "ssh" {
		return Config{}, fmt.Errorf("sshconn: URL %q: scheme must be ssh://", shown)
	}
	if parsed.Opaque != "" || parsed.RawQuery != "" || parsed.Fragment != "" {
		return Config{}, fmt.Errorf("sshconn: URL %q: expected ssh://[user@]host[:port][/socket-path]", shown)
	}
	cfg := Config{Host: parsed.Hostname()}
	if cfg.Host == "" {
		return Config{}, fmt.Errorf("sshconn: URL %q has no host", shown)
	}
	if strings.Contains(cfg.Host, ":") && !strings.HasPrefix(parsed.Host, "[") {
		// url.Parse takes "host:22:22" as host "host:22", port 22.
		return Config{}, fmt.Errorf("sshconn: URL %q: invalid host %q; write an IPv6 address in brackets, e.g. ssh://[::1]:22", shown, parsed.Host)
	}
	if parsed.User != nil {
		if _, has := parsed.User.Password(); has {
			return Config{}, fmt.Errorf("sshconn: URL %q contains a password: only key authentication is supported", shown)
		}
		cfg.User = parsed.User.Username()
	}
	if p := parsed.Port(); p != "" {
		if cfg.Port, err = parsePort(p); err != nil {
			return Config{}, fmt.Errorf("sshconn: URL %q: %w", shown, err)
		}
	}
	if parsed.Path != "" && parsed.Path != "/" {
		cfg.SocketPath = parsed.Path
	}
	return cfg.withDefaults(), nil
}

// redact hides the password of a URL's user info, whether or not the URL
// parses.
func redact(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		return u
	}
	user, password, _ := strings.Cut(rest[:at], ":")
	if password == "" {
		return u
	}
	// A malformed URL may repeat the user info further on: hide it there too.
	return scheme + "://" + user + ":xxxxx" + strings.ReplaceAll(rest[at:], ":"+password+"@", ":xxxxx@")
}

func parsePort(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("invalid port %q", s)
	}
	return n, nil
}

// defaultUser is the login name when none is given.
func defaultUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "root"
}

// withDefaults fills the user, port and known_hosts file and expands "~" in
// file names, so that equivalent configs share one Key().
func (c Config) withDefaults() Config {
	if c.User == "" {
		c.User = defaultUser()
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.KnownHostsFile == "" {
		c.KnownHostsFile = "~/.ssh/known_hosts"
	}
	c.KnownHostsFile = expandHome(c.KnownHostsFile)
	c.KeyFile = expandHome(c.KeyFile)
	c.HostKeyFingerprint = strings.TrimSpace(c.HostKeyFingerprint)
	return c
}

// expandHome replaces a leading "~/" by the home directory.
func expandHome(p string) string {
	if p == "~" || strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[1:])
		}
	}
	return p
}

// Addr is host:port of the target.
func (c Config) Addr() string {
	c = c.withDefaults()
	return net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
}

// String names the target for messages: user@host:port.
func (c Config) String() string {
	c = c.withDefaults()
	return c.User + "@" + c.Addr()
}

// Key identifies a connection: configs with the same Key share one
// connection. It leaves out PrivateKeyPEM (a secret) and SocketPath.
func (c Config) Key() string {
	c = c.withDefaults()
	c.PrivateKeyPEM = ""
	c.SocketPath = ""
	b, _ := json.Marshal(c)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (c Config) validate() error {
	if c.Host == "" {
		return errors.New("sshconn: no host")
	}
	if c.Port < 1 || c.Port > 65535 {
		return fmt.Errorf("sshconn: invalid port %d", c.Port)
	}
	if c.HostKeyFingerprint != "" {
		if _, err := NormalizeFingerprint(c.HostKeyFingerprint); err != nil {
			return err
		}
	}
	if c.JumpHost != "" {
		if _, err := c.jumpConfig(); err != nil {
			return err
		}
	}
	return nil
}

// jumpConfig is the bastion's Config: user@host[:port] (ssh:// accepted), its
// user defaulting to the target's, with the target's credentials and
// known_hosts file. A pinned fingerprint applies to the target only.
func (c Config) jumpConfig() (Config, error) {
	s := c.JumpHost
	if !strings.HasPrefix(s, "ssh://") {
		s = "ssh://" + s
	}
	j, err := ParseURL(s)
	if err != nil {
		// err names the jump host as ParseURL read it, password hidden.
		return Config{}, fmt.Errorf("sshconn: invalid jump host: %w", err)
	}
	if j.SocketPath != "" {
		return Config{}, fmt.Errorf("sshconn: invalid jump host %q: expected user@host:port", c.JumpHost)
	}
	if !strings.Contains(strings.TrimPrefix(c.JumpHost, "ssh://"), "@") {
		j.User = c.User
	}
	j.KeyFile = c.KeyFile
	j.KeyPassphraseEnv = c.KeyPassphraseEnv
	j.KnownHostsFile = c.KnownHostsFile
	j.PrivateKeyPEM = c.PrivateKeyPEM
	return j.withDefaults(), nil
}

// pool holds the shared connections by Key().
var pool = struct {
	sync.Mutex
	conns map[string]*Conn
}{conns: map[string]*Conn{}}

// Get returns the shared connection for cfg, dialling on first use. A
// connection that failed to dial stays in the pool and is dialled again by
// the next Get or DialContext.
func Get(ctx context.Context, cfg Config) (*Conn, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := lookup(cfg)
	if _, err := c.session(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// lookup returns the pooled Conn for cfg, creating it if needed.
func lookup(cfg Config) *Conn {
	key := cfg.Key()
	pool.Lock()
	defer pool.Unlock()
	c := pool.conns[key]
	if c == nil {
		c = newConn(cfg)
		pool.conns[key] = c
	}
	// The secret is not part of the key: keep the latest one for redials.
	if cfg.PrivateKeyPEM != "" {
		c.setSecret(cfg.PrivateKeyPEM)
	}
	return c
}

// peek returns the pooled Conn for cfg if one exists, without dialling.
func peek(cfg Config) *Conn {
	pool.Lock()
	defer pool.Unlock()
	return pool.conns[cfg.withDefaults().Key()]
}

// CloseAll closes every shared connection and empties the pool (tests, and
// the end of the provider process).
func CloseAll() {
	pool.Lock()
	conns := pool.conns
	pool.conns = map[string]*Conn{}
	pool.Unlock()
	for _, c := range conns {
		c.close()
	}
}
