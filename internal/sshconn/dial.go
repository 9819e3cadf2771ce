package sshconn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"golang.org/x/crypto/ssh"
)

// handshakeTimeout bounds a TCP connect plus SSH handshake when the caller's
// ctx has no earlier deadline.
var handshakeTimeout = 30 * time.Second

const clientVersion = "SSH-2.0-terraform-provider-sandbox"

// dialSession connects to cfg's target (directly or through its jump host),
// authenticates and verifies the host key.
func dialSession(ctx context.Context, cfg Config) (*session, error) {
	ctx, cancel := context.WithTimeout(ctx, handshakeTimeout)
	defer cancel()
	raw, err := connect(ctx, cfg)
	if err != nil {
		return nil, err
	}
	client, fp, err := handshake(ctx, raw, cfg)
	if err != nil {
		return nil, err
	}
	return newSession(client, raw, fp), nil
}

// connect opens the byte stream the SSH handshake runs over: a TCP
// connection, or a direct-tcpip channel through the (shared) jump host.
func connect(ctx context.Context, cfg Config) (net.Conn, error) {
	if cfg.JumpHost == "" {
		var d net.Dialer
		raw, err := d.DialContext(ctx, "tcp", cfg.Addr())
		if err != nil {
			return nil, fmt.Errorf("sshconn: %s: connect: %w", cfg, err)
		}
		return quickAck(raw), nil
	}
	jcfg, err := cfg.jumpConfig()
	if err != nil {
		return nil, err
	}
	jump, err := Get(ctx, jcfg)
	if err != nil {
		return nil, fmt.Errorf("sshconn: %s: jump host: %w", cfg, err)
	}
	raw, err := jump.DialContext(ctx, "tcp", cfg.Addr())
	if err != nil {
		return nil, fmt.Errorf("sshconn: %s: connect through jump host: %w", cfg, err)
	}
	return raw, nil
}

// handshake runs the SSH handshake over raw, closing raw on failure or when
// ctx ends first. It returns the client and the verified host key
// fingerprint.
func handshake(ctx context.Context, raw net.Conn, cfg Config) (*ssh.Client, string, error) {
	creds := loadCredentials(cfg)
	defer creds.close()
	method, err := creds.method()
	if err != nil {
		raw.Close()
		return nil, "", fmt.Errorf("sshconn: %s: %w", cfg, err)
	}
	policy, err := newHostKeyPolicy(cfg)
	if err != nil {
		raw.Close()
		return nil, "", err
	}
	conf := &ssh.ClientConfig{
		User:              cfg.User,
		Auth:              []ssh.AuthMethod{method},
		HostKeyCallback:   policy.check,
		HostKeyAlgorithms: policy.algorithms(),
		ClientVersion:     clientVersion,
	}
	// Channels (jump hosts) have no deadlines: closing raw is what unblocks.
	stop := context.AfterFunc(ctx, func() { raw.Close() })
	conn, chans, reqs, err := ssh.NewClientConn(raw, cfg.Addr(), conf)
	if !stop() {
		if err == nil {
			conn.Close()
		}
		return nil, "", fmt.Errorf("sshconn: %s: handshake: %w", cfg, context.Cause(ctx))
	}
	if err != nil {
		raw.Close()
		return nil, "", classify(cfg, err, policy, creds)
	}
	return ssh.NewClient(conn, chans, reqs), policy.verified, nil
}

// classify turns a handshake error into one that says what to do.
func classify(cfg Config, err error, policy *hostKeyPolicy, creds *credentials) error {
	switch {
	case policy.err != nil:
		return policy.err
	case strings.Contains(err.Error(), "unable to authenticate"):
		return fmt.Errorf("sshconn: %w", creds.authError(cfg, err))
	case strings.Contains(err.Error(), "no common algorithm for host key") && len(policy.known) > 0:
		return fmt.Errorf("sshconn: %s: the server offers none of the host key types known_hosts (%s) holds for it (%s); "+
			"if the server's keys changed, update the entry (`%s >> %s`) or pin host_key_fingerprint: %w",
			cfg, cfg.KnownHostsFile, strings.Join(describeKnown(policy.known), ", "), keyscanCommand(cfg, "ssh-ed25519"), cfg.KnownHostsFile, err)
	}
	var hk *HostKeyError
	if errors.As(err, &hk) {
		return hk
	}
	return fmt.Errorf("sshconn: %s: handshake: %w", cfg, err)
}
