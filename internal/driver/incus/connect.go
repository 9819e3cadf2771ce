package incus

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/sshconn"
)

// EnvSocket overrides the local socket path, as for the incus CLI.
const EnvSocket = "INCUS_SOCKET"

const userAgent = "terraform-provider-sandbox"

// Transports of an address.
const (
	transportUnix  = "unix"
	transportHTTPS = "https"
	transportSSH   = "ssh"
)

// transportOf tells a local socket address ("", unix://PATH, or a path)
// from an https:// server and an ssh:// host whose socket is reached
// through SSH.
func transportOf(address string) (string, error) {
	switch {
	case address == "", strings.HasPrefix(address, "unix://"), strings.HasPrefix(address, "/"):
		return transportUnix, nil
	case strings.HasPrefix(address, "https://"), strings.HasPrefix(address, "ssh://"):
		if _, err := url.Parse(address); err != nil {
			return "", fmt.Errorf("address %q: %v", address, err)
		}
		return strings.SplitN(address, ":", 2)[0], nil
	}
	return "", fmt.Errorf("address %q: use unix://PATH for the local socket, https://HOST:8443 or ssh://USER@HOST for a remote server", address)
}

// isRemote reports whether the server is on another host (as far as the
// driver can tell): its files cannot be bind-mounted from here.
func isRemote(address string) (bool, error) {
	t, err := transportOf(address)
	return t != transportUnix, err
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
func connect(ctx context.Context, cfg driver.IncusConfig, sec driver.Secrets) (incus.InstanceServer, error) {
	// The client keeps this context for every later request, and the
	// connection outlives the Terraform call that opened it: keep the
	// values, drop the cancellation (else every call after the first RPC
	// fails with "context canceled").
	ctx = context.WithoutCancel(ctx)
	transport, err := transportOf(cfg.Address)
	if err != nil {
		return nil, err
	}
	args := &incus.ConnectionArgs{UserAgent: userAgent, SkipGetServer: true}
	switch transport {
	case transportUnix:
		s, err := incus.ConnectIncusUnixWithContext(ctx, socketPath(cfg.Address), args)
		if err != nil {
			return nil, err
		}
		return finishConnect(s, connectOptions{})
	case transportSSH:
		sc, err := cfg.SSHConfig(sec)
		if err != nil {
			return nil, err
		}
		// The client's unix transport, with every dial (HTTP, websockets,
		// SFTP) going to the remote socket through the pooled SSH connection.
		s, err := incus.ConnectIncusUnixWithContext(ctx, sc.SocketPath, args)
		if err != nil {
			return nil, err
		}
		return finishConnect(s, connectOptions{dial: sshDialer(sc)})
	}
	args, pin, err := remoteArgs(cfg)
	if err != nil {
		return nil, err
	}
	s, err := incus.ConnectIncusWithContext(ctx, cfg.Address, args)
	if err != nil {
		return nil, err
	}
	return finishConnect(s, connectOptions{pin: pin, trustTokenEnv: cfg.TrustTokenEnv})
}

// connectOptions are the transport-specific parts of finishConnect.
type connectOptions struct {
	pin           []byte                                                   // server certificate SHA-256 (https)
	dial          func(ctx context.Context, _, _ string) (net.Conn, error) // replaces the socket dial (ssh)
	trustTokenEnv string                                                   // variable with a trust token (https)
}

// sshDialer dials the Incus socket on the SSH host. The connection comes
// from sshconn's pool on every dial, so a dropped connection is redialed.
func sshDialer(sc sshconn.Config) func(ctx context.Context, _, _ string) (net.Conn, error) {
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		conn, err := sshconn.Get(ctx, sc)
		if err != nil {
			return nil, fmt.Errorf("ssh to %s: %w", sc.Host, err)
		}
		c, err := conn.DialContext(ctx, "unix", sc.SocketPath)
		if err != nil {
			return nil, fmt.Errorf("ssh to %s: open %s: %w", sc.Host, sc.SocketPath, err)
		}
		return noDeadlines{c}, nil
	}
}

// noDeadlines is an SSH channel as a net.Conn whose deadlines are accepted
// and ignored: channels have none ("deadline not supported"), and the
// Incus client sets them on the connections it upgrades (websockets,
// SFTP). A dead peer is still noticed by sshconn's keepalive, which closes
// the channels.
type noDeadlines struct{ net.Conn }

func (noDeadlines) SetDeadline(time.Time) error      { return nil }
func (noDeadlines) SetReadDeadline(time.Time) error  { return nil }
func (noDeadlines) SetWriteDeadline(time.Time) error { return nil }

// finishConnect enables keep-alive (the fingerprint pin, the SSH dial) on the
// client's transport, then makes the first request, which also checks we
// are trusted (presenting the trust token if we are not yet).
func finishConnect(s incus.InstanceServer, o connectOptions) (incus.InstanceServer, error) {
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
	boundAnswers(t, answerWithin)
	if o.pin != nil {
		pinCertificate(t.TLSClientConfig, o.pin)
	}
	if o.dial != nil {
		t.DialContext = o.dial
	}
	srv, _, err := s.GetServer()
	if err != nil {
		return nil, err
	}
	if srv.Auth != "trusted" {
		if err := presentTrustToken(s, o.trustTokenEnv); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// boundAnswers makes the transport give up on a request whose answer does
// not begin within limit (answerWithin). The Incus client takes no context per
// request, so this is what keeps an incusd that stops answering (seen with
// 6.0.4 under load) from hanging a plan or an apply forever, on every call.
// Nothing waits that long on purpose: operations are waited for in
// waitSlice steps or over the events websocket, whose upgrade is answered at
// once, and the time to send a request body (an image upload) comes before
// the bound starts.
func boundAnswers(t *http.Transport, limit time.Duration) { t.ResponseHeaderTimeout = limit }

// trustedName is the name our certificate gets in the server's trust store.
const trustedName = "terraform-provider-sandbox"

// presentTrustToken adds our client certificate to the server's trust store
// with the token from the environment variable named tokenEnv (first
// contact), then checks the server now trusts us. Without a token it says
// how to get trusted.
func presentTrustToken(s incus.InstanceServer, tokenEnv string) error {
	token := ""
	if tokenEnv != "" {
		token = strings.TrimSpace(os.Getenv(tokenEnv))
	}
	if token == "" {
		hint := "set trust_token_env to a variable holding a token from `incus config trust add NAME`, or add the certificate with `incus config trust add-certificate`"
		if tokenEnv != "" {
			hint = fmt.Sprintf("the variable %s named by trust_token_env is empty; put a token from `incus config trust add NAME` in it, or add the certificate with `incus config trust add-certificate`", tokenEnv)
		}
		return fmt.Errorf("the server does not trust this client certificate: %s", hint)
	}
	err := s.CreateCertificate(api.CertificatesPost{
		CertificatePut: api.CertificatePut{Name: trustedName, Type: api.CertificateTypeClient},
		TrustToken:     token,
	})
	if err != nil {
		return fmt.Errorf("the server does not trust this client certificate, and it refused the trust token from %s (tokens are single-use and expire): %v", tokenEnv, err)
	}
	srv, _, err := s.GetServer()
	if err != nil {
		return err
	}
	if srv.Auth != "trusted" {
		return fmt.Errorf("the server accepted the trust token from %s but still does not trust this client certificate", tokenEnv)
	}
	return nil
}

// remoteArgs reads the certificate files. server_cert_file and
// server_fingerprint each pin the server's certificate: the handshake
// accepts exactly that certificate (pinCertificate), whatever CA signed
// it or another one. Without either the server must present a certificate
// the system CAs accept: a server certificate is never trusted silently.
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
	var pin []byte
	if cfg.ServerCertFile != "" {
		// Not args.TLSServerCert: the client would add it to the system
		// CAs, so any certificate they or it sign would pass.
		if pin, err = certificatePin(cfg.ServerCertFile); err != nil {
			return nil, nil, err
		}
	}
	if cfg.ServerFingerprint != "" {
		fp, err := parseFingerprint(cfg.ServerFingerprint)
		if err != nil {
			return nil, nil, err
		}
		if pin != nil && subtle.ConstantTimeCompare(fp, pin) != 1 {
			return nil, nil, fmt.Errorf("server_cert_file %s (SHA-256 %x) and server_fingerprint %q name different certificates; keep one of them", cfg.ServerCertFile, pin, cfg.ServerFingerprint)
		}
		pin = fp
	}
	// The chain is not checked against CAs; pinCertificate checks the leaf.
	args.InsecureSkipVerify = pin != nil
	return args, pin, nil
}

// certificatePin is the SHA-256 of the first certificate in a PEM file.
func certificatePin(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("server_cert_file: read %s: %w", path, err)
	}
	for rest := b; ; {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return nil, fmt.Errorf("server_cert_file %s holds no PEM certificate; use the certificate `incus info` prints, or server_fingerprint", path)
		}
		if block.Type == "CERTIFICATE" {
			if _, err := x509.ParseCertificate(block.Bytes); err != nil {
				return nil, fmt.Errorf("server_cert_file %s: %w", path, err)
			}
			sum := sha256.Sum256(block.Bytes)
			return sum[:], nil
		}
	}
}

func readFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return string(b), nil
}

// parseFingerprint accepts a SHA-256 fingerprint as hex (as `incus info`
// prints it; colons and an "SHA256:" prefix allowed) or as SHA256:<base64>
// (as OpenSSH and some tools print it, padding optional).
func parseFingerprint(s string) ([]byte, error) {
	t := strings.TrimSpace(s)
	prefixed := len(t) > 7 && strings.EqualFold(t[:7], "sha256:")
	if prefixed {
		t = t[7:]
	}
	if b, err := hex.DecodeString(strings.ReplaceAll(t, ":", "")); err == nil && len(b) == sha256.Size {
		return b, nil
	}
	if b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(t, "=")); err == nil && len(b) == sha256.Size && prefixed {
		return b, nil
	}
	return nil, fmt.Errorf("server_fingerprint %q: want the certificate's SHA-256 as 64 hex digits (`incus info` prints them) or as SHA256:<base64>", s)
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
