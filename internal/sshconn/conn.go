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
	// dialing is a one-slot semaphore held while a session is dialled, so
	// concurrent callers dial once and waiters can give up with their ctx.
	dialing chan struct{}

	mu     sync.Mutex
	secret string   // PrivateKeyPEM, refreshed by Get
	cur    *session // nil before the first dial
	fp     string   // fingerprint of the last verified host key
}

// session is one SSH connection; a redial replaces it.
type session struct {
	client *ssh.Client
	raw    net.Conn // the transport under client (tests cut it)
	fp     string

	done    chan struct{} // closed when the session is dead
	once    sync.Once
	deadErr error
}

func newConn(cfg Config) *Conn {
	return &Conn{cfg: cfg, dialing: make(chan struct{}, 1), secret: cfg.PrivateKeyPEM}
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
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, fmt.Errorf("sshconn: %s: dial %s %s: %w", c.cfg, network, addr, ctxErr)
		}
		var rejected *ssh.OpenChannelError
		if errors.As(err, &rejected) {
			// The server answered: the connection is fine, the target is not.
			return nil, fmt.Errorf("sshconn: %s: dial %s %s: %w", c.cfg, network, addr, err)
		}
		s.kill(err)
		if attempt > 0 {
			return nil, fmt.Errorf("sshconn: %s: dial %s %s after reconnecting: %w", c.cfg, network, addr, err)
		}
	}
}

// session returns the live session, dialling a new one if there is none.
func (c *Conn) session(ctx context.Context) (*session, error) {
	if s := c.live(); s != nil {
		return s, nil
	}
	select {
	case c.dialing <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("sshconn: %s: waiting for connection: %w", c.cfg, ctx.Err())
	}
	defer func() { <-c.dialing }()
	if s := c.live(); s != nil { // another caller dialled meanwhile
		return s, nil
	}
	s, err := dialSession(ctx, c.config())
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.cur, c.fp = s, s.fp
	c.mu.Unlock()
	return s, nil
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
	c.cur = nil
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
