package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/sshconn"
)

// hostKeyTimeout bounds the plan-time handshake made when known_hosts alone
// cannot say which key is expected.
const hostKeyTimeout = 30 * time.Second

// pinHostKey records, in the handle of an ssh:// docker backend that pins no
// host key, the fingerprint of the key known_hosts trusts for it (a
// handshake settles it when known_hosts holds several keys or none). Every
// resource on the backend then verifies exactly that key, and trusting
// another key changes the handle, so the change shows in the plan.
func pinHostKey(ctx context.Context, cfg *driver.Config, secrets driver.Secrets, diags *diag.Diagnostics) bool {
	dc := cfg.Docker
	if cfg.Driver != driver.Docker || dc == nil || !strings.HasPrefix(dc.Host, "ssh://") || dc.HostKeyFingerprint != "" {
		return true
	}
	sc, err := dc.SSHConfig(secrets)
	if err != nil {
		diags.AddAttributeError(path.Root(driver.Docker).AtName("host"), "Invalid Docker Host", err.Error())
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, hostKeyTimeout)
	defer cancel()
	fp, err := sshconn.Fingerprint(ctx, sc)
	if err != nil {
		diags.Append(hostKeyDiagnostic(*cfg, err))
		return false
	}
	dc.HostKeyFingerprint = fp
	return true
}

// hostKeyDiagnostic explains why the host key could not be settled at plan
// time, pointing at the attributes that decide which key is trusted.
func hostKeyDiagnostic(cfg driver.Config, err error) diag.Diagnostic {
	at := path.Root(driver.Docker).AtName("known_hosts_file")
	var hk *sshconn.HostKeyError
	if errors.As(err, &hk) {
		return diag.NewAttributeErrorDiagnostic(at, "Untrusted SSH Host Key", fmt.Sprintf(
			"%s: %v.\n\nTo trust this host, verify the fingerprint %s out of band, then either add its key to the file named by "+
				"`docker.known_hosts_file` (default ~/.ssh/known_hosts) or set `docker.host_key_fingerprint = %q`, and plan again.",
			backendLabel(cfg), err, hk.Offered, hk.Offered))
	}
	return diag.NewAttributeErrorDiagnostic(at, "Unable to Verify SSH Host Key", fmt.Sprintf(
		"%s: known_hosts does not name exactly one key for this host, and asking the host for its key failed: %v.\n\n%s\n"+
			"Alternatively pin the key with `docker.host_key_fingerprint` (as `ssh-keygen -lf` prints it): the plan then needs no connection.",
		backendLabel(cfg), err, advice(cfg, err)))
}
