package local

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

func TestLifecycle(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	ctx := context.Background()
	spec := testSpec("life")
	spec.Env = map[string]string{"TASK": "demo"}
	spec.Labels = map[string]string{"role": "worker"}
	in := mustCreate(t, d, spec)
	if in.Name != "life" || in.ID == "" || in.Status != driver.StatusRunning {
		t.Fatalf("created %+v, want name life, running", in)
	}
	if got, err := d.InspectInstance(ctx, in.ID); err != nil || got.Name != "life" {
		t.Fatalf("inspect by ID: %+v %v", got, err)
	}
	if in.Labels["role"] != "worker" || in.Labels[driver.LabelBackend] != d.backend {
		t.Errorf("labels %v", in.Labels)
	}
	if got := sh(t, d, "life", "echo $TASK $(pwd) $(hostname) $(id -u)"); got != "demo /workspace life 0\n" {
		t.Errorf("env/workdir/hostname/uid: %q", got)
	}
	res, err := d.Exec(ctx, "life", driver.ExecSpec{Command: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
	if err != nil || res.ExitCode != 3 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Errorf("exec: %+v %v", res, err)
	}
	// PID 1 is the agent; the command runs beside it in the same PID namespace.
	if got := sh(t, d, "life", "cat /proc/1/cmdline | tr '\\0' ' '"); !strings.Contains(got, "sandbox-agent init") {
		t.Errorf("pid 1 is %q", got)
	}
	if err := d.StopInstance(ctx, "life", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if s := status(t, d, "life"); s != driver.StatusStopped {
		t.Fatalf("after stop: %s", s)
	}
	if _, err := d.Exec(ctx, "life", driver.ExecSpec{Command: []string{"true"}}); err == nil {
		t.Error("exec in a stopped instance succeeded")
	}
	if err := d.StartInstance(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	if s := status(t, d, "life"); s != driver.StatusRunning {
		t.Fatalf("after start: %s", s)
	}
	sh(t, d, "life", "true")
	if err := d.DeleteInstance(ctx, "life"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.InspectInstance(ctx, "life"); !driver.IsNotFound(err) {
		t.Errorf("inspect after delete: %v", err)
	}
	if err := d.DeleteInstance(ctx, "life"); err != nil {
		t.Errorf("second delete: %v, want nil (already gone)", err)
	}
}

func TestCreateDuplicate(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	mustCreate(t, d, testSpec("dup"))
	_, err := d.CreateInstance(context.Background(), testSpec("dup"))
	if !errors.Is(err, driver.ErrAlreadyExists) {
		t.Fatalf("second create: %v", err)
	}
	if s := status(t, d, "dup"); s != driver.StatusRunning {
		t.Errorf("the first instance is %s after a failed duplicate", s)
	}
}

// TestHostImage: no rootfs, the host's system directories read-only, the
// rest of the root the instance's own.
func TestHostImage(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	spec := testSpec("hosted")
	spec.Image = HostImage
	spec.Command = []string{"sleep", "infinity"}
	spec.Files = []driver.File{{Path: "/srv/x", Content: []byte("x")}, {Path: "/workspace/task.json", Content: []byte("{}")}}
	mustCreate(t, d, spec)
	got := sh(t, d, "hosted", "cat /srv/x /workspace/task.json; ls /usr/bin/env >/dev/null && echo usr; touch /usr/nope 2>/dev/null || echo ro; ls /root 2>/dev/null | wc -l")
	if got != "x{}usr\nro\n0\n" {
		t.Errorf("host image: %q", got)
	}
}

// TestReadOnlyRootfsAndEtc: a read-only root keeps the workspace and /tmp
// writable; /etc/hosts and /etc/hostname are the instance's.
func TestReadOnlyRootfsAndEtc(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	spec := testSpec("rofs")
	spec.Security.ReadOnlyRootfs = true
	mustCreate(t, d, spec)
	got := sh(t, d, "rofs", "touch /nope 2>/dev/null || echo ro; touch /workspace/a /tmp/b && echo rw; cat /etc/hostname; grep -c rofs /etc/hosts")
	if got != "ro\nrw\nrofs\n1\n" {
		t.Errorf("read-only root: %q", got)
	}
}

// TestTwoProviders: two drivers on the same root (as two provider
// processes) stopping, starting and updating one instance at once leave a
// consistent state.
func TestTwoProviders(t *testing.T) {
	d1 := openTest(t, driver.IsolationBwrap)
	dr, err := Open(context.Background(), d1.cfg)
	if err != nil {
		t.Fatal(err)
	}
	d2 := dr.(*Driver)
	mustCreate(t, d1, testSpec("shared"))
	errs := make(chan error, 40)
	for i := 0; i < 10; i++ {
		go func() { errs <- d1.StopInstance(context.Background(), "shared", time.Second) }()
		go func() { errs <- d2.StartInstance(context.Background(), "shared") }()
		go func() { errs <- d2.UpdateInstance(context.Background(), "shared", driver.Limits{PidsLimit: 100}) }()
		go func() { _, err := d1.ListInstances(context.Background()); errs <- err }()
	}
	for i := 0; i < 40; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if err := d2.StartInstance(context.Background(), "shared"); err != nil {
		t.Fatal(err)
	}
	st, err := d1.readState("shared")
	if err != nil || st.Spec.PidsLimit != 100 || !st.alive() {
		t.Fatalf("state after the race: %+v %v", st, err)
	}
	sh(t, d1, "shared", "true")
	// Exactly one sandbox runs: the others were stopped, not leaked.
	if n := len(cgroupPids(st.Cgroups)); d1.cg != nil && n > 6 {
		t.Errorf("%d processes in the instance's cgroups: a sandbox leaked", n)
	}
}

// TestWithoutOverlay: the fallback root (the image's top-level entries bound
// read-only on a tmpfs) still runs commands, files and the workspace.
func TestWithoutOverlay(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	d.overlay = false
	spec := testSpec("flat")
	spec.Files = []driver.File{{Path: "/workspace/a", Content: []byte("a")}, {Path: "/tmp/b", Content: []byte("b")}}
	mustCreate(t, d, spec)
	if got := sh(t, d, "flat", "cat a /tmp/b; touch /bin/x 2>/dev/null || echo ro"); got != "ab"+"ro\n" {
		t.Errorf("without overlay: %q", got)
	}
	spec = testSpec("flat-bad")
	spec.Files = []driver.File{{Path: "/etc/x", Content: []byte("x")}}
	if _, err := d.CreateInstance(context.Background(), spec); err == nil {
		t.Error("a file in the read-only rootfs was accepted")
	}
}
