package provider_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testcert"
)

// incusHTTPSAddr is where the tests reach the local incusd over HTTPS when
// it has no listener yet (left set: parallel tests may use it).
const incusHTTPSAddr = "127.0.0.1:18443"

// TestAccBackend_incusTrustToken: first contact over HTTPS with a client
// certificate the server does not trust yet. The token from
// `incus config trust add` is read from the variable named by
// trust_token_env; after the apply the certificate is trusted, the token
// is nowhere in state, and later plans need no token.
func TestAccBackend_incusTrustToken(t *testing.T) {
	acctest.PreCheckIncus(t)
	name := acctest.RandomName("tf-acc")
	acctest.SweepOnCleanup(t, acctest.DriverConfig(driver.Incus, name))
	addr := incusHTTPSListener(t)
	cert := testcert.NewClient(t, "tf-acc-trust-token")
	certFile, keyFile, fingerprint := cert.CertFile, cert.KeyFile, cert.Fingerprint()
	t.Cleanup(func() { _ = exec.Command("incus", "config", "trust", "remove", fingerprint).Run() })
	tokenName := "tf-acc-" + fingerprint[:12]
	out, err := exec.Command("incus", "config", "trust", "add", tokenName, "-q").Output()
	if err != nil {
		t.Fatalf("incus config trust add: %v", err)
	}
	t.Cleanup(func() { _ = exec.Command("incus", "config", "trust", "revoke-token", tokenName).Run() })
	token := strings.TrimSpace(string(out))
	const tokenEnv = "TF_ACC_INCUS_TRUST_TOKEN"
	t.Setenv(tokenEnv, token)

	cfg := acctest.BackendConfigWith("test", driver.Incus, name, fmt.Sprintf(`address = "https://%s"
    client_cert_file   = %q
    client_key_file    = %q
    server_fingerprint = %q
    trust_token_env    = %q`, addr, certFile, keyFile, incusServerFingerprint(t), tokenEnv))
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             acctest.CheckNoManagedObjects(acctest.DriverConfig(driver.Incus, name)),
		Steps: []resource.TestStep{
			{
				Config: cfg,
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttr("sandbox_backend.test", "handle.settings.trust_token_env", tokenEnv),
					checkNoValueInState(token),
					func(*terraform.State) error {
						if err := exec.Command("incus", "config", "trust", "show", fingerprint).Run(); err != nil {
							return fmt.Errorf("the client certificate %s is not trusted after first contact: %v", fingerprint, err)
						}
						return nil
					},
				),
			},
			{
				// Trusted now: the (spent) token is no longer needed.
				PreConfig:        func() { os.Setenv(tokenEnv, "") },
				Config:           cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}

// checkNoValueInState fails when any attribute of any resource holds secret.
func checkNoValueInState(secret string) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		for addr, rs := range s.RootModule().Resources {
			for k, v := range rs.Primary.Attributes {
				if strings.Contains(v, secret) {
					return fmt.Errorf("%s.%s holds the trust token", addr, k)
				}
			}
		}
		return nil
	}
}

// incusHTTPSListener returns the server's HTTPS address, making it listen
// on incusHTTPSAddr when it has none.
func incusHTTPSListener(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("incus", "config", "get", "core.https_address").Output()
	if err != nil {
		t.Fatalf("incus config get core.https_address: %v", err)
	}
	if a := strings.TrimSpace(string(out)); a != "" {
		return a
	}
	if out, err := exec.Command("incus", "config", "set", "core.https_address", incusHTTPSAddr).CombinedOutput(); err != nil {
		t.Fatalf("listen on %s: %v: %s", incusHTTPSAddr, err, out)
	}
	return incusHTTPSAddr
}

// incusServerFingerprint is the SHA-256 of the server's certificate.
func incusServerFingerprint(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("incus", "query", "/1.0").Output()
	if err != nil {
		t.Fatalf("incus query /1.0: %v", err)
	}
	var srv struct {
		Environment struct {
			Fingerprint string `json:"certificate_fingerprint"`
		} `json:"environment"`
	}
	if err := json.Unmarshal(out, &srv); err != nil || srv.Environment.Fingerprint == "" {
		t.Fatalf("server fingerprint from %s: %v", out, err)
	}
	return srv.Environment.Fingerprint
}
