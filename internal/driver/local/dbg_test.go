package local

import (
	"context"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

func TestDbgPids(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	spec := testSpec("pids")
	spec.PidsLimit = 32
	spec.MemoryBytes = 64 << 20
	mustCreate(t, d, spec)
	for i := 0; i < 10; i++ {
		cmd, _ := d.execCmd(context.Background(), mustState(t, d), driver.ExecSpec{}, []string{"sh", "-c", "for i in $(seq 40); do sleep 30 & done; wait"})
		out, err := cmd.CombinedOutput()
		t.Logf("%d: %v %q %v", i, err, out, cmd.ProcessState)
		sh(t, d, "pids", "pkill sleep; true")
	}
}

func mustState(t *testing.T, d *Driver) *instanceState {
	st, err := d.readState("pids")
	if err != nil {
		t.Fatal(err)
	}
	return st
}
