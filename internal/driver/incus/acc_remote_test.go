package incus_test

import (
	"encoding/base64"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testcert"
)

// remoteAddr is where the test exposes the local incusd over HTTPS when it
// does not listen on the network already.
const remoteAddr = "127.0.0.1:18443"

// TestRemoteHTTPS reaches the local server as a remote one: client
// certificate, then the server certificate pinned by file or fingerprint.
// Without either the self-signed server certificate must be refused.
func TestRemoteHTTPS(t *testing.T) {
	preCheck(t)
	local, err := incus.ConnectIncusUnix("", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Disconnect()
	addr := exposeHTTPS(t, local)
	certFile, keyFile := trustNewClient(t, local)
	srv, _, err := local.GetServer()
	if err != nil {
		t.Fatal(err)
	}
	serverCert := filepath.Join(t.TempDir(), "server.crt")
	if err := os.WriteFile(serverCert, []byte(srv.Environment.Certificate), 0o600); err != nil {
		t.Fatal(err)
	}
	base := driver.IncusConfig{Address: "https://" + addr, ClientCertFile: certFile, ClientKeyFile: keyFile}

	for name, mutate := range map[string]func(*driver.IncusConfig){
		"fingerprint": func(c *driver.IncusConfig) { c.ServerFingerprint = srv.Environment.CertificateFingerprint },
		"fingerprint base64": func(c *driver.IncusConfig) {
			c.ServerFingerprint = base64Fingerprint(t, srv.Environment.CertificateFingerprint)
		},
		"cert file": func(c *driver.IncusConfig) { c.ServerCertFile = serverCert },
		"cert file and fingerprint": func(c *driver.IncusConfig) {
			c.ServerCertFile, c.ServerFingerprint = serverCert, srv.Environment.CertificateFingerprint
		},
	} {
		cfg := base
		mutate(&cfg)
		d, err := driver.Open(testCtx(t), driver.Config{Driver: driver.Incus, Name: "remote-test", Incus: &cfg})
		if err != nil {
			t.Fatal(err)
		}
		if info, err := d.Info(testCtx(t)); err != nil || info.EngineVersion == "" {
			t.Errorf("%s: Info = %+v, %v", name, info, err)
		}
		if name == "fingerprint" {
			remoteInstance(t, d)
		}
		_ = d.Close()
	}

	for name, mutate := range map[string]func(*driver.IncusConfig){
		"no pin":            func(*driver.IncusConfig) {},
		"wrong fingerprint": func(c *driver.IncusConfig) { c.ServerFingerprint = strings.Repeat("ab", 32) },
		"wrong base64 fingerprint": func(c *driver.IncusConfig) {
			c.ServerFingerprint = base64Fingerprint(t, strings.Repeat("ab", 32))
		},
		"other cert file": func(c *driver.IncusConfig) { c.ServerCertFile = testcert.NewClient(t, "not-the-server").CertFile },
	} {
		cfg := base
		mutate(&cfg)
		d, err := driver.Open(testCtx(t), driver.Config{Driver: driver.Incus, Name: "remote-test", Incus: &cfg})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Info(testCtx(t)); err == nil {
			t.Errorf("%s: connected to a server whose certificate was not pinned", name)
		} else if !strings.Contains(err.Error(), "certificate") {
			t.Errorf("%s: error %v does not name the certificate", name, err)
		}
		_ = d.Close()
	}
}

// base64Fingerprint turns a hex SHA-256 into SHA256:<base64>, unpadded.
func base64Fingerprint(t *testing.T, hexFP string) string {
	t.Helper()
	b, err := hex.DecodeString(hexFP)
	if err != nil || len(b) != 32 {
		t.Fatalf("fingerprint %q: %v", hexFP, err)
	}
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(b)
}

// exposeHTTPS makes the server listen on remoteAddr unless it listens
// somewhere already. The listener is left in place: tests of other packages
// running in parallel may use it too.
func exposeHTTPS(t *testing.T, c incus.InstanceServer) string {
	t.Helper()
	srv, etag, err := c.GetServer()
	if err != nil {
		t.Fatal(err)
	}
	if a := srv.Config["core.https_address"]; a != "" {
		return a
	}
	put := srv.Writable()
	put.Config["core.https_address"] = remoteAddr
	if err := c.UpdateServer(put, etag); err != nil {
		t.Fatalf("listen on %s: %v", remoteAddr, err)
	}
	return remoteAddr
}

// trustNewClient makes a client certificate, adds it to the server's trust
// store for the test, and returns the PEM files.
func trustNewClient(t *testing.T, c incus.InstanceServer) (certFile, keyFile string) {
	t.Helper()
	cert := testcert.NewClient(t, "sandbox-remote-test")
	certFile, keyFile, der := cert.CertFile, cert.KeyFile, cert.DER
	name := "sandbox-remote-test-" + uniqueName("c")
	// The API takes the base64 DER (the PEM body without its armour).
	err := c.CreateCertificate(api.CertificatesPost{CertificatePut: api.CertificatePut{Name: name, Type: api.CertificateTypeClient, Certificate: base64.StdEncoding.EncodeToString(der)}})
	if err != nil {
		t.Fatalf("trust the client certificate: %v", err)
	}
	t.Cleanup(func() { untrust(c, name, "") })
	return certFile, keyFile
}

// untrust removes the certificates with that name or fingerprint.
func untrust(c incus.InstanceServer, name, fingerprint string) {
	certs, _ := c.GetCertificates()
	for _, ct := range certs {
		if (name != "" && ct.Name == name) || (fingerprint != "" && ct.Fingerprint == fingerprint) {
			_ = c.DeleteCertificate(ct.Fingerprint)
		}
	}
}

// remoteInstance runs an instance through the remote connection: the agent
// is uploaded (no bind mount from this host), files and exec work.
func remoteInstance(t *testing.T, d driver.Driver) {
	t.Helper()
	ctx := testCtx(t)
	if err := d.EnsureScope(ctx); err != nil {
		t.Fatalf("remote EnsureScope: %v", err)
	}
	defer func() {
		if err := d.DeleteScope(testCtx(t)); err != nil {
			t.Errorf("remote DeleteScope: %v", err)
		}
	}()
	in, err := d.CreateInstance(ctx, driver.InstanceSpec{
		Name: "r1", Image: fixtureImage, Running: true, Command: []string{"sleep", "600"}, Lifetime: time.Hour,
		Security: driver.Security{Init: true},
		Files:    []driver.File{{Path: "/etc/remote.txt", Content: []byte("over https\n"), Mode: 0o600}},
	})
	if err != nil {
		t.Fatalf("remote CreateInstance: %v", err)
	}
	defer func() { _ = d.DeleteInstance(testCtx(t), in.ID) }()
	res, err := d.Exec(ctx, in.ID, driver.ExecSpec{Command: []string{"sh", "-c", "cat /etc/remote.txt; test -x /.sandbox/sandbox-agent && echo uploaded"}})
	if err != nil || string(res.Stdout) != "over https\nuploaded\n" {
		t.Errorf("remote exec: %q %q %v", res.Stdout, res.Stderr, err)
	}
}
