package incus

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testcert"
)

// signed is a certificate, its key and its PEM file.
type signed struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

// issue makes a certificate for the DNS name "incus.test" (a CA when parent
// is nil, else signed by parent) and writes it as PEM.
func issue(t *testing.T, name string, parent *signed) signed {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		DNSNames:  []string{"incus.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign|x509.KeyUsageDigitalSignature
	} else {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), name+".crt")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return signed{cert, key, file}
}

// TestServerCertFileIsAPin is the attack on server_cert_file: a server
// presents a certificate signed by the one in the file (the client used to
// add the file to the system CAs, so this passed). Only the certificate in
// the file itself may answer.
func TestServerCertFileIsAPin(t *testing.T) {
	ca := issue(t, "pinned", nil)
	leaf := issue(t, "impostor", &ca)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"type":"sync","status":"Success","status_code":200,"metadata":{"auth":"trusted","api_extensions":[],"environment":{"server_version":"6.0"}}}`))
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leaf.cert.Raw}, PrivateKey: leaf.key}}}
	srv.StartTLS()
	defer srv.Close()
	client := testcert.NewClient(t, "pin-test")
	base := driver.IncusConfig{Address: srv.URL, ClientCertFile: client.CertFile, ClientKeyFile: client.KeyFile}

	// The same server is reached when its own certificate is the pin: the
	// refusals below are the pin's doing, not a broken test server.
	cfg := base
	cfg.ServerCertFile = issueFile(t, leaf.cert.Raw)
	if _, err := connect(pinCtx(t), cfg, driver.Secrets{}); err != nil {
		t.Fatalf("pinned to the server's own certificate: %v", err)
	}
	for name, mutate := range map[string]func(*driver.IncusConfig){
		"cert file of the signing CA":   func(c *driver.IncusConfig) { c.ServerCertFile = ca.file },
		"fingerprint of the signing CA": func(c *driver.IncusConfig) { c.ServerFingerprint = hexSum(ca.cert.Raw) },
	} {
		cfg := base
		mutate(&cfg)
		_, err := connect(pinCtx(t), cfg, driver.Secrets{})
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: connected to a server presenting a certificate the CA signed (error %v)", name, err)
		}
	}
}

func pinCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func issueFile(t *testing.T, der []byte) string {
	file := filepath.Join(t.TempDir(), "server.crt")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

func hexSum(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

func TestRemoteArgsPins(t *testing.T) {
	client := testcert.NewClient(t, "pin-test")
	cert := issue(t, "server", nil)
	sum := sha256.Sum256(cert.cert.Raw)
	base := driver.IncusConfig{Address: "https://h:8443", ClientCertFile: client.CertFile, ClientKeyFile: client.KeyFile}
	for name, c := range map[string]driver.IncusConfig{
		"cert file":           {ServerCertFile: cert.file},
		"hex":                 {ServerFingerprint: hexSum(cert.cert.Raw)},
		"base64":              {ServerFingerprint: "SHA256:" + base64.StdEncoding.EncodeToString(sum[:])},
		"base64 unpadded":     {ServerFingerprint: "sha256:" + base64.RawStdEncoding.EncodeToString(sum[:])},
		"both, the same cert": {ServerCertFile: cert.file, ServerFingerprint: hexSum(cert.cert.Raw)},
	} {
		cfg := base
		cfg.ServerCertFile, cfg.ServerFingerprint = c.ServerCertFile, c.ServerFingerprint
		args, pin, err := remoteArgs(cfg)
		if err != nil || string(pin) != string(sum[:]) || !args.InsecureSkipVerify || args.TLSServerCert != "" {
			t.Errorf("%s: pin %x, skip CA check %v, CA %q, %v; want the certificate's hash and no CA", name, pin, args != nil && args.InsecureSkipVerify, args.TLSServerCert, err)
		}
	}
	notPEM := filepath.Join(t.TempDir(), "junk.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]driver.IncusConfig{
		"both, different certs": {ServerCertFile: cert.file, ServerFingerprint: strings.Repeat("ab", 32)},
		"no PEM":                {ServerCertFile: notPEM},
		"missing file":          {ServerCertFile: "/nonexistent/server.crt"},
		"base64 without prefix": {ServerFingerprint: base64.StdEncoding.EncodeToString(sum[:])},
		"base64 too short":      {ServerFingerprint: "SHA256:" + base64.StdEncoding.EncodeToString(sum[:16])},
	} {
		cfg := base
		cfg.ServerCertFile, cfg.ServerFingerprint = c.ServerCertFile, c.ServerFingerprint
		if _, _, err := remoteArgs(cfg); err == nil || !strings.Contains(err.Error(), "server_") {
			t.Errorf("%s: error %v, want one naming the attribute", name, err)
		}
	}
}
