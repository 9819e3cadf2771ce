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

// pinHostKey records, in the handle of an ssh:// backend (docker host or
// incus address) that pins no host key, the fingerprint of the key
// known_hosts trusts for it (a handshake settles it when known_hosts holds
// several keys or none). Every resource on the backend then verifies
// exactly that key, and trusting another key changes the handle, so the
// change shows in the plan.
func pinHostKey(ctx context.Context, cfg *driver.Config, secrets driver.Secrets, diags *diag.Diagnostics) bool {
	slot, ok := sshSlotOf(cfg, secrets)
	if !ok || *slot.fingerprint != "" {
		return true
	}
	sc, err := slot.config()
	if err != nil {
		diags.AddAttributeError(path.Root(slot.block).AtName(slot.addressField), "Invalid SSH Address", err.Error())
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, hostKeyTimeout)
	defer cancel()
	fp, err := sshconn.Fingerprint(ctx, sc)
	if err != nil {
		diags.Append(hostKeyDiagnostic(*cfg, slot.block, err))
		return false
	}
	*slot.fingerprint = fp
	return true
}

// sshSlot is where a backend keeps its SSH connection settings.
type sshSlot struct {
	block        string // "docker" | "incus"
	addressField string // the attribute holding the ssh:// URL
	fingerprint  *string
	config       func() (sshconn.Config, error)
}

// sshSlotOf returns the SSH settings of a backend reached over ssh://.
func sshSlotOf(cfg *driver.Config, secrets driver.Secrets) (sshSlot, bool) {
	switch {
	case cfg.Driver == driver.Docker && cfg.Docker != nil && strings.HasPrefix(cfg.Docker.Host, "ssh://"):
		dc := cfg.Docker
		return sshSlot{driver.Docker, "host", &dc.HostKeyFingerprint, func() (sshconn.Config, error) { return dc.SSHConfig(secrets) }}, true
	case cfg.Driver == driver.Incus && cfg.Incus != nil && strings.HasPrefix(cfg.Incus.Address, "ssh://"):
		ic := cfg.Incus
		return sshSlot{driver.Incus, "address", &ic.HostKeyFingerprint, func() (sshconn.Config, error) { return ic.SSHConfig(secrets) }}, true
	}
	return sshSlot{}, false
}

// hostKeyDiagnostic explains why the host key could not be settled at plan
// time, pointing at the attributes that decide which key is trusted.
func hostKeyDiagnostic(cfg driver.Config, block string, err error) diag.Diagnostic {
	at := path.Root(block).AtName("known_hosts_file")
	var hk *sshconn.HostKeyError
	if errors.As(err, &hk) {
		return diag.NewAttributeErrorDiagnostic(at, "Untrusted SSH Host Key", fmt.Sprintf(
			"%s: %v.\n\nTo trust this host, verify the fingerprint %s out of band, then either add its key to the file named by "+
				"`%s.known_hosts_file` (default ~/.ssh/known_hosts) or set `%s.host_key_fingerprint = %q`, and plan again.",
			backendLabel(cfg), err, hk.Offered, block, block, hk.Offered))
	}
	return diag.NewAttributeErrorDiagnostic(at, "Unable to Verify SSH Host Key", fmt.Sprintf(
		"%s: known_hosts does not name exactly one key for this host, and asking the host for its key failed: %v.\n\n%s\n"+
			"Alternatively pin the key with `%s.host_key_fingerprint` (as `ssh-keygen -lf` prints it): the plan then needs no connection.",
		backendLabel(cfg), err, advice(cfg, err), block))
}
