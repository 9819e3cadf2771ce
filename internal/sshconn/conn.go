package sshconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// Keepalive timing; variables so tests can shorten them.
var (
	keepaliveInterval = 15 * time.Second
	keepaliveTimeout  = 15 * time.Second
)

// Conn is a shared, self-healing SSH connection. It is safe for concurrent
// use; each DialContext opens a new channel over the current session and
// dials a new session when the previous one died.
type Conn struct {
	cfg Config

	mu      sync.Mutex
	secret  string    // PrivateKeyPEM, refreshed by Get
	cur     *session  // nil before the first dial
	pending *dialCall // the dial in flight, shared by every waiting caller
	fp      string    // fingerprint of the last verified host key
	closed  bool
}

// dialCall is one dial whose outcome every caller that asked meanwhile gets,
// so a host that is down costs one timeout, not one per queued caller.
type dialCall struct {
	done chan struct{}
	s    *session
	err  error
}

// session is one SSH connection; a redial replaces it.
type session struct {
	client *ssh.Client
	raw    net.Conn // what client runs over: TCP, or a channel of the jump host
	fp     string

	done    chan struct{} // closed when the session is dead
	once    sync.Once
	deadErr error
}

func newConn(cfg Config) *Conn {
	secret := cfg.PrivateKeyPEM
	cfg.PrivateKeyPEM = "" // kept in one place: secret
	return &Conn{cfg: cfg, secret: secret}
}

func (c *Conn) setSecret(pem string) {
	c.mu.Lock()
	c.secret = pem
	c.mu.Unlock()
}

// config returns the Config with the current secret.
func (c *Conn) config() Config {
	c.mu.Lock()
	defer c.mu.Unlock()
	cfg := c.cfg
	cfg.PrivateKeyPEM = c.secret
	return cfg
}

// HostKeyFingerprint is the SHA256 fingerprint of the verified host key.
func (c *Conn) HostKeyFingerprint() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fp
}

// DialContext opens a channel through the connection: "unix" forwards a
// remote socket (direct-streamlocal), "tcp" a remote address (direct-tcpip).
// When the connection turns out to be dead it is redialled and the channel
// opened once more.
func (c *Conn) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	switch network {
	case "unix", "tcp", "tcp4", "tcp6":
	default:
		return nil, fmt.Errorf("sshconn: %s: unsupported network %q (want unix or tcp)", c.cfg, network)
	}
	for attempt := 0; ; attempt++ {
		s, err := c.session(ctx)
		if err != nil {
			return nil, err
		}
		nc, err := s.client.DialContext(ctx, network, addr)
		if err == nil {
			return nc, nil
		}
		// "forward to", not "dial unix": the Docker client replaces errors
		// whose text holds "dial unix" with a generic message.
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("sshconn: %s: forward to %s %s: %w", c.cfg, network, addr, ctxErr)
		}
		var rejected *ssh.OpenChannelError
		if errors.As(err, &rejected) {
			// The server answered: the connection is fine, the target is not.
			return nil, fmt.Errorf("sshconn: %s: forward to %s %s: the server refused: %w", c.cfg, network, addr, err)
		}
		s.kill(err)
		if attempt > 0 {
			return nil, fmt.Errorf("sshconn: %s: forward to %s %s after reconnecting: %w", c.cfg, network, addr, err)
		}
	}
}

// session returns the live session, or waits (as long as ctx allows) for a
// dial that replaces a dead or missing one. The dial itself is not bound to
// the first caller's ctx, only to handshakeTimeout: others may be waiting for
// it, and a session that arrives late is kept for the next call.
func (c *Conn) session(ctx context.Context) (*session, error) {
	c.mu.Lock()
	if s := c.cur; s != nil && !s.dead() {
		c.mu.Unlock()
		return s, nil
	}
	call := c.pending
	if call == nil {
		call = &dialCall{done: make(chan struct{})}
		c.pending = call
		go c.dial(context.WithoutCancel(ctx), call)
	}
	c.mu.Unlock()
	select {
	case <-call.done:
		return call.s, call.err
	case <-ctx.Done():
		return nil, fmt.Errorf("sshconn: %s: connecting: %w", c.cfg, ctx.Err())
	}
}

// dial runs one dial and publishes its outcome.
func (c *Conn) dial(ctx context.Context, call *dialCall) {
	s, err := dialSession(ctx, c.config())
	c.mu.Lock()
	c.pending = nil
	switch {
	case err == nil && c.closed:
		s.kill(errors.New("closed"))
		s, err = nil, fmt.Errorf("sshconn: %s: connection closed", c.cfg)
	case err == nil:
		c.cur, c.fp = s, s.fp
	}
	c.mu.Unlock()
	call.s, call.err = s, err
	close(call.done)
}

// live returns the current session if it is not dead.
func (c *Conn) live() *session {
	c.mu.Lock()
	s := c.cur
	c.mu.Unlock()
	if s == nil || s.dead() {
		return nil
	}
	return s
}

func (c *Conn) close() {
	c.mu.Lock()
	s := c.cur
	c.cur, c.closed = nil, true
	c.mu.Unlock()
	if s != nil {
		s.kill(errors.New("closed"))
	}
}

// newSession wraps a connected client and starts watching it.
func newSession(client *ssh.Client, raw net.Conn, fp string) *session {
	s := &session{client: client, raw: raw, fp: fp, done: make(chan struct{})}
	go func() { s.kill(client.Wait()) }()
	go s.keepalive(keepaliveInterval, keepaliveTimeout)
	return s
}

func (s *session) dead() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// kill marks the session dead and closes it; later calls do nothing.
func (s *session) kill(err error) {
	s.once.Do(func() {
		s.deadErr = err
		close(s.done)
		s.client.Close()
		s.raw.Close()
	})
}

// keepalive sends keepalive@openssh.com every interval; a request without a
// reply within timeout means the peer or the path is gone: kill the session
// so the next call redials instead of hanging.
func (s *session) keepalive(interval, timeout time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		if err := s.ping(timeout); err != nil {
			s.kill(fmt.Errorf("keepalive: %w", err))
			return
		}
	}
}

func (s *session) ping(timeout time.Duration) error {
	reply := make(chan error, 1)
	go func() {
		// OpenSSH answers with a failure message; any answer will do.
		_, _, err := s.client.SendRequest("keepalive@openssh.com", true, nil)
		reply <- err
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-reply:
		return err
	case <-timer.C:
		return fmt.Errorf("no reply within %s", timeout)
	case <-s.done:
		return nil
	}
}
