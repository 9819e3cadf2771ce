package incus_test

import (
	"strings"
	"testing"

	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testcert"
)

// TestTrustToken: a client the server does not trust yet presents a token
// made with `incus config trust add` (from the variable trust_token_env
// names) on first contact; its certificate is then in the trust store, and
// later connections need no token. Without a token, or with a spent one,
// the error says what to do.
func TestTrustToken(t *testing.T) {
	preCheck(t)
	local, err := incus.ConnectIncusUnix("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Disconnect()
	addr := exposeHTTPS(t, local)
	srv, _, err := local.GetServer()
	if err != nil {
		t.Fatal(err)
	}
	cert := testcert.NewClient(t, "sandbox-trust-test")
	certFile, keyFile, fingerprint := cert.CertFile, cert.KeyFile, cert.Fingerprint()
	t.Cleanup(func() { untrust(local, "", fingerprint) })

	const tokenEnv = "SANDBOX_TEST_INCUS_TRUST_TOKEN"
	cfg := driver.IncusConfig{Address: "https://" + addr, ClientCertFile: certFile, ClientKeyFile: keyFile,
		ServerFingerprint: srv.Environment.CertificateFingerprint, TrustTokenEnv: tokenEnv}
	info := func() error {
		d, err := driver.Open(testCtx(t), driver.Config{Driver: driver.Incus, Name: "trust-test", Incus: &cfg})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		_, err = d.Info(testCtx(t))
		return err
	}

	t.Setenv(tokenEnv, "")
	if err := info(); err == nil || !strings.Contains(err.Error(), tokenEnv) {
		t.Fatalf("untrusted, no token: err = %v, want one naming %s", err, tokenEnv)
	}

	tokenName := uniqueName("sandbox-trust-test")
	token := trustToken(t, local, tokenName)
	t.Setenv(tokenEnv, token)
	if err := info(); err != nil {
		t.Fatalf("first contact with a trust token: %v", err)
	}
	if !trusted(t, local, fingerprint) {
		t.Fatal("after first contact the client certificate is not in the trust store")
	}
	// Trusted now: the (spent) token is not presented again.
	if err := info(); err != nil {
		t.Fatalf("second contact: %v", err)
	}

	// A spent token is refused with the reason.
	untrust(local, "", fingerprint)
	if err := info(); err == nil || !strings.Contains(err.Error(), "refused the trust token") {
		t.Fatalf("spent token: err = %v", err)
	}
}

// trustToken makes a client trust token, as `incus config trust add NAME`.
func trustToken(t *testing.T, c incus.InstanceServer, name string) string {
	t.Helper()
	op, err := c.CreateCertificateToken(api.CertificatesPost{CertificatePut: api.CertificatePut{Name: name, Type: api.CertificateTypeClient}, Token: true})
	if err != nil {
		t.Fatalf("create a trust token: %v", err)
	}
	opAPI := op.Get()
	tok, err := opAPI.ToCertificateAddToken()
	if err != nil {
		t.Fatalf("read the trust token: %v", err)
	}
	// Tokens not used by the test are revoked (cancelling the operation).
	t.Cleanup(func() { _ = op.Cancel() })
	return tok.String()
}

// trusted reports whether the certificate with that fingerprint is trusted.
func trusted(t *testing.T, c incus.InstanceServer, fingerprint string) bool {
	t.Helper()
	certs, err := c.GetCertificates()
	if err != nil {
		t.Fatal(err)
	}
	for _, ct := range certs {
		if ct.Fingerprint == fingerprint {
			return true
		}
	}
	return false
}
