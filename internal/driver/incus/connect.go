package incus

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	incus "github.com/lxc/incus/v6/client"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// EnvSocket overrides the local socket path, as for the incus CLI.
const EnvSocket = "INCUS_SOCKET"

const userAgent = "terraform-provider-sandbox"

// isRemote tells a local socket address ("", unix://PATH, or a path) from an
// https:// server.
func isRemote(address string) (bool, error) {
	switch {
	case address == "", strings.HasPrefix(address, "unix://"), strings.HasPrefix(address, "/"):
		return false, nil
	case strings.HasPrefix(address, "https://"):
		if _, err := url.Parse(address); err != nil {
			return false, fmt.Errorf("address %q: %v", address, err)
		}
		return true, nil
	}
	return false, fmt.Errorf("address %q: use unix://PATH for the local socket or https://HOST:8443 for a remote server", address)
}

// socketPath resolves the local socket: the address, else $INCUS_SOCKET, else
// the client's own default ("" lets it pick /var/lib/incus or /run/incus).
func socketPath(address string) string {
	if p := strings.TrimPrefix(address, "unix://"); p != "" {
		return p
	}
	return os.Getenv(EnvSocket)
}

// connect opens the server connection. The client disables HTTP keep-alive
// by default; we turn it back on so a burst of calls reuses connections
// instead of dialing (and, remotely, handshaking) every time.
func connect(ctx context.Context, cfg driver.IncusConfig) (incus.InstanceServer, error) {
	// The client keeps this context for every later request, and the
	// connection outlives the Terraform call that opened it: keep the
	// values, drop the cancellation (else every call after the first RPC
	// fails with "context canceled").
	ctx = context.WithoutCancel(ctx)
	remote, err := isRemote(cfg.Address)
	if err != nil {
		return nil, err
	}
	if !remote {
		args := &incus.ConnectionArgs{UserAgent: userAgent, SkipGetServer: true}
		s, err := incus.ConnectIncusUnixWithContext(ctx, socketPath(cfg.Address), args)
		if err != nil {
			return nil, err
		}
		return finishConnect(s, nil)
	}
	args, pin, err := remoteArgs(cfg)
	if err != nil {
		return nil, err
	}
	s, err := incus.ConnectIncusWithContext(ctx, cfg.Address, args)
	if err != nil {
		return nil, err
	}
	return finishConnect(s, pin)
}

// finishConnect enables keep-alive (and the fingerprint pin) on the client's
// transport, then makes the first request, which also checks we are trusted.
func finishConnect(s incus.InstanceServer, pin []byte) (incus.InstanceServer, error) {
	hc, err := s.GetHTTPClient()
	if err != nil {
		return nil, err
	}
	t, ok := hc.Transport.(*http.Transport)
	if !ok {
		return nil, fmt.Errorf("unexpected HTTP transport %T", hc.Transport)
	}
	t.DisableKeepAlives = false
	t.MaxIdleConns = 64
	t.MaxIdleConnsPerHost = 64
	if pin != nil {
		pinCertificate(t.TLSClientConfig, pin)
	}
	srv, _, err := s.GetServer()
	if err != nil {
		return nil, err
	}
	if srv.Auth != "trusted" {
		return nil, errors.New("the server does not trust this client certificate (add it with `incus config trust add-certificate`)")
	}
	return s, nil
}

// remoteArgs reads the certificate files. Without a server certificate or a
// pinned fingerprint the server must present a certificate the system CAs
// accept: a server certificate is never trusted silently.
func remoteArgs(cfg driver.IncusConfig) (*incus.ConnectionArgs, []byte, error) {
	if cfg.ClientCertFile == "" || cfg.ClientKeyFile == "" {
		return nil, nil, errors.New("a remote server needs client_cert_file and client_key_file")
	}
	args := &incus.ConnectionArgs{UserAgent: userAgent, SkipGetServer: true}
	var err error
	if args.TLSClientCert, err = readFile(cfg.ClientCertFile); err != nil {
		return nil, nil, err
	}
	if args.TLSClientKey, err = readFile(cfg.ClientKeyFile); err != nil {
		return nil, nil, err
	}
	if cfg.ServerCertFile != "" {
		if args.TLSServerCert, err = readFile(cfg.ServerCertFile); err != nil {
			return nil, nil, err
		}
	}
	var pin []byte
	if cfg.ServerFingerprint != "" {
		if pin, err = parseFingerprint(cfg.ServerFingerprint); err != nil {
			return nil, nil, err
		}
		// The chain is not checked against CAs; pinCertificate checks the leaf.
		args.InsecureSkipVerify = args.TLSServerCert == ""
	}
	return args, pin, nil
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return string(b), nil
}

// parseFingerprint accepts a SHA-256 fingerprint as hex, with or without
// colons and an "SHA256:" prefix (the form `incus info` prints is plain hex).
func parseFingerprint(s string) ([]byte, error) {
	h := strings.ToLower(strings.TrimSpace(s))
	h = strings.TrimPrefix(h, "sha256:")
	h = strings.ReplaceAll(h, ":", "")
	b, err := hex.DecodeString(h)
	if err != nil || len(b) != sha256.Size {
		return nil, fmt.Errorf("server_fingerprint %q: want the 64 hex digits of the certificate's SHA-256", s)
	}
	return b, nil
}

// pinCertificate makes every handshake (HTTP and websocket dials share this
// config) fail unless the server's leaf certificate has the pinned hash.
func pinCertificate(c *tls.Config, pin []byte) {
	c.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("the server presented no certificate")
		}
		sum := sha256.Sum256(raw[0])
		if subtle.ConstantTimeCompare(sum[:], pin) != 1 {
			return fmt.Errorf("server certificate fingerprint %x does not match server_fingerprint", sum)
		}
		return nil
	}
}
