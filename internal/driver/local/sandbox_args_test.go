package local

import (
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// TestReadOnlyRootIsLast: bwrap creates missing mount points (the workdir,
// volume targets, /tmp, the agent) in the new root as it mounts, so a
// read-only root must come after every mount, or the create fails with
// "Can't mkdir /workspace: Read-only file system".
func TestReadOnlyRootIsLast(t *testing.T) {
	mountOps := map[string]int{ // option -> number of arguments
		"--bind": 2, "--ro-bind": 2, "--dev-bind": 2, "--bind-try": 2, "--ro-bind-try": 2,
		"--tmpfs": 1, "--proc": 1, "--dev": 1, "--mqueue": 1, "--dir": 1,
		"--symlink": 2, "--file": 2, "--bind-data": 2, "--ro-bind-data": 2,
	}
	for _, overlay := range []bool{true, false} {
		d := &Driver{backend: "b", root: t.TempDir(), overlay: overlay, isolation: driver.IsolationBwrap}
		st := &instanceState{Lower: t.TempDir(), Spec: driver.InstanceSpec{
			Name: "ro", Workdir: "/srv/app", Network: driver.NetworkBridge,
			Mounts:   []driver.Mount{{Volume: "data", Target: "/data", ReadOnly: true}},
			Security: driver.Security{ReadOnlyRootfs: true},
		}}
		args := d.bwrapArgs(st, "/usr/local/bin/sandbox-agent")
		remount, lastMount := -1, -1
		for i := 0; i < len(args); i++ {
			switch {
			case args[i] == "--remount-ro" && i+1 < len(args) && args[i+1] == "/" && remount < 0:
				remount = i
				i++
			case mountOps[args[i]] > 0:
				lastMount = i
				i += mountOps[args[i]]
			}
		}
		if remount < 0 {
			t.Errorf("overlay %v: no --remount-ro / in %q", overlay, args)
			continue
		}
		if lastMount > remount {
			t.Errorf("overlay %v: %s %q comes after --remount-ro /: bwrap cannot make its mount point", overlay, args[lastMount], args[lastMount+1])
		}
	}
}

// TestSeccompOnlyUnprivileged: an unprivileged sandbox asks bwrap for the
// default filter (on amd64, the only architecture with one); a privileged
// one runs without, as on Docker.
func TestSeccompOnlyUnprivileged(t *testing.T) {
	d := &Driver{backend: "b", root: t.TempDir(), overlay: true, isolation: driver.IsolationBwrap}
	for _, privileged := range []bool{false, true} {
		st := &instanceState{Lower: t.TempDir(), Spec: driver.InstanceSpec{Name: "f", Security: driver.Security{Privileged: privileged}}}
		args := strings.Join(d.bwrapArgs(st, "/agent"), " ")
		want := !privileged && runtime.GOARCH == "amd64"
		if got := strings.Contains(args, "--seccomp "+strconv.Itoa(fdFilter)); got != want {
			t.Errorf("privileged %v: --seccomp in the arguments: %v, want %v", privileged, got, want)
		}
	}
}
