package local

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// TestStaticCapabilitiesCoverInfo: the provider plans against
// driver.StaticCapabilities, so everything this host's driver reports in
// Info must be there too (the static table may allow more: it cannot know
// the host, and the driver refuses the rest at create).
func TestStaticCapabilitiesCoverInfo(t *testing.T) {
	for _, isolation := range []string{driver.IsolationBwrap, driver.IsolationNone} {
		cfg := driver.Config{Driver: driver.Local, Name: "caps", Local: &driver.LocalConfig{Root: t.TempDir(), Isolation: isolation}}
		d, err := Open(context.Background(), cfg)
		if err != nil {
			t.Logf("%s: %v", isolation, err)
			continue
		}
		info, err := d.Info(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		static := driver.Info{Capabilities: driver.StaticCapabilities(driver.Local, cfg)}
		for _, c := range info.Capabilities {
			if !static.Has(c) {
				t.Errorf("isolation %s: Info reports %q, which StaticCapabilities lacks: plans would refuse what the driver does", isolation, c)
			}
		}
	}
}

// TestLimitsUnenforceable: a limit this host cannot enforce (no cgroups:
// not root) fails the create with ErrUnsupported, naming the attribute; a
// pids_limit too small for init is refused too.
func TestLimitsUnenforceable(t *testing.T) {
	d := &Driver{backend: "b"} // no cgroups
	for attr, l := range map[string]driver.Limits{"cpus": {CPUs: 0.5}, "memory": {MemoryBytes: 64 << 20}, "pids_limit": {PidsLimit: 64}} {
		err := d.checkLimits(l)
		if !errors.Is(err, driver.ErrUnsupported) || !strings.HasPrefix(err.Error(), attr+": ") {
			t.Errorf("%s without cgroups: %v, want ErrUnsupported starting with %q", attr, err, attr+": ")
		}
	}
	d.cg = &cgroups{parent: map[string]string{"pids": "/x", "memory": "/x", "cpu": "/x"}}
	if err := d.checkLimits(driver.Limits{PidsLimit: minPidsLimit - 1}); err == nil || !strings.HasPrefix(err.Error(), "pids_limit: ") {
		t.Errorf("pids_limit %d: %v, want an error naming pids_limit", minPidsLimit-1, err)
	}
	if err := d.checkLimits(driver.Limits{CPUs: 1, MemoryBytes: 1 << 30, PidsLimit: minPidsLimit}); err != nil {
		t.Errorf("limits with cgroups: %v", err)
	}
}
