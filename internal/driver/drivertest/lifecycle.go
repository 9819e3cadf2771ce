package drivertest

import (
	"errors"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

func testInfo(t *testing.T, s *suite) {
	sc := s.open(t)
	info := sc.info(t)
	if info.EngineVersion == "" {
		t.Error("Info.EngineVersion is empty")
	}
	if len(info.Capabilities) == 0 {
		t.Fatal("Info.Capabilities is empty")
	}
	if !info.Has(driver.CapContainers) && !info.Has(driver.CapVMs) {
		t.Errorf("capabilities %q name neither %q nor %q", info.Capabilities, driver.CapContainers, driver.CapVMs)
	}
	if !info.Has(driver.CapExec) {
		t.Errorf("capabilities %q lack %q, which every backend needs for initializers", info.Capabilities, driver.CapExec)
	}
	seen := map[string]bool{}
	for _, c := range info.Capabilities {
		if seen[c] {
			t.Errorf("capability %q reported twice", c)
		}
		seen[c] = true
	}
}

func testScopeIdempotent(t *testing.T, s *suite) {
	sc := s.open(t) // EnsureScope once
	if err := sc.d.EnsureScope(ctx(t)); err != nil {
		t.Fatalf("second EnsureScope: %v", err)
	}
	if err := sc.d.DeleteScope(ctx(t)); err != nil {
		t.Fatalf("DeleteScope of an empty scope: %v", err)
	}
	if err := sc.d.EnsureScope(ctx(t)); err != nil {
		t.Fatalf("EnsureScope after DeleteScope: %v", err)
	}
	// The re-created scope must be usable.
	in := sc.create(t, sc.spec("scope"))
	sc.expectOutput(t, in.ID, "echo ok", "ok\n")

	// A scope still in use is refused as such, and what uses it is intact.
	if err := sc.d.DeleteScope(ctx(t)); !errors.Is(err, driver.ErrInUse) {
		t.Fatalf("DeleteScope with an instance in it: got %v, want an error wrapping driver.ErrInUse", err)
	}
	sc.expectOutput(t, in.ID, "echo still", "still\n")
}

func testLifecycle(t *testing.T, s *suite) {
	sc := s.open(t)
	other := s.open(t)

	spec := sc.spec("life")
	in := sc.create(t, spec)
	if in.Name != spec.Name || in.Status != driver.StatusRunning {
		t.Errorf("created instance: name %q status %q, want %q running", in.Name, in.Status, spec.Name)
	}
	got := sc.inspect(t, in.ID)
	if got.ID != in.ID || got.Name != spec.Name || got.Status != driver.StatusRunning {
		t.Errorf("inspect: id %q name %q status %q, want %q %q running", got.ID, got.Name, got.Status, in.ID, spec.Name)
	}
	if err := labelsInclude(got.Labels, map[string]string{"drivertest": "yes", driver.LabelManagedBy: driver.ManagedByValue}); err != nil {
		t.Errorf("inspect labels %v: %v", got.Labels, err)
	}
	backend := got.Labels[driver.LabelBackend]
	if backend == "" {
		t.Errorf("inspect labels %v lack %s", got.Labels, driver.LabelBackend)
	}

	// The same name in another backend is a different instance.
	theirSpec := other.spec("life")
	theirSpec.Name = spec.Name
	theirs := other.create(t, theirSpec)
	if theirs.ID == in.ID {
		t.Fatalf("two backends gave the same ID %q to instances of the same name", in.ID)
	}
	checkListScoped(t, sc, in.ID, theirs.ID, backend)
	checkListScoped(t, other, theirs.ID, in.ID, other.inspect(t, theirs.ID).Labels[driver.LabelBackend])

	checkExecResult(t, sc, in.ID)

	if err := sc.d.StopInstance(ctx(t), in.ID, 2*time.Second); err != nil {
		t.Fatalf("StopInstance: %v", err)
	}
	if st := sc.inspect(t, in.ID).Status; st != driver.StatusStopped {
		t.Errorf("after stop: status %q, want %q", st, driver.StatusStopped)
	}
	if _, err := sc.d.Exec(ctx(t), in.ID, driver.ExecSpec{Command: []string{"true"}}); err == nil {
		t.Error("Exec in a stopped instance succeeded, want an error")
	}
	if err := sc.d.StartInstance(ctx(t), in.ID); err != nil {
		t.Fatalf("StartInstance: %v", err)
	}
	if st := sc.inspect(t, in.ID).Status; st != driver.StatusRunning {
		t.Errorf("after start: status %q, want %q", st, driver.StatusRunning)
	}
	sc.expectOutput(t, in.ID, "echo again", "again\n")

	checkDelete(t, sc, in.ID)
	if _, err := other.d.InspectInstance(ctx(t), theirs.ID); err != nil {
		t.Errorf("deleting in one backend touched the other: %v", err)
	}
}

// checkListScoped: the scope lists mine, with its backend label, and never
// theirs.
func checkListScoped(t *testing.T, sc *scope, mine, theirs, backend string) {
	t.Helper()
	list := sc.listIDs(t)
	in, ok := list[mine]
	if !ok {
		t.Errorf("ListInstances does not find %s", mine)
	} else if in.Status != driver.StatusRunning || in.Name == "" {
		t.Errorf("listed instance %s: name %q status %q, want a name and running", mine, in.Name, in.Status)
	}
	if _, ok := list[theirs]; ok {
		t.Errorf("ListInstances returns %s, an instance of another backend", theirs)
	}
	for id, in := range list {
		if in.Labels[driver.LabelBackend] != backend {
			t.Errorf("listed instance %s has backend label %q, want %q", id, in.Labels[driver.LabelBackend], backend)
		}
	}
}

// checkExecResult: stdout and stderr are separate, a non-zero exit is a
// result and not an error, stdin is fed.
func checkExecResult(t *testing.T, sc *scope, id string) {
	t.Helper()
	res := sc.exec(t, id, driver.ExecSpec{Command: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
	if res.ExitCode != 3 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Errorf("exec: exit %d stdout %q stderr %q, want 3 %q %q", res.ExitCode, res.Stdout, res.Stderr, "out\n", "err\n")
	}
	res = sc.exec(t, id, driver.ExecSpec{Command: []string{"cat"}, Stdin: []byte("piped\n")})
	if res.ExitCode != 0 || string(res.Stdout) != "piped\n" {
		t.Errorf("exec with stdin: exit %d stdout %q, want 0 %q", res.ExitCode, res.Stdout, "piped\n")
	}
	if _, err := sc.d.Exec(ctx(t), "no-such-instance-"+uniqueName("x"), driver.ExecSpec{Command: []string{"true"}}); err == nil {
		t.Error("Exec in a missing instance succeeded, want an error")
	}
}

// checkDelete: delete, delete again (nil), then gone everywhere.
func checkDelete(t *testing.T, sc *scope, id string) {
	t.Helper()
	if err := sc.d.DeleteInstance(ctx(t), id); err != nil {
		t.Fatalf("DeleteInstance: %v", err)
	}
	if err := sc.d.DeleteInstance(ctx(t), id); err != nil {
		t.Errorf("second DeleteInstance: %v, want nil", err)
	}
	_, err := sc.d.InspectInstance(ctx(t), id)
	expectNotFound(t, "InspectInstance after delete", err)
	if _, ok := sc.listIDs(t)[id]; ok {
		t.Errorf("ListInstances still returns deleted %s", id)
	}
}

func testExecEnv(t *testing.T, s *suite) {
	sc := s.open(t)
	spec := sc.spec("env")
	spec.Env = map[string]string{"TASK": "demo", "SPACED": "a b"}
	spec.Workdir = "/workspace"
	spec.User = "1000:1000"
	in := sc.create(t, spec)

	sc.expectOutput(t, in.ID, `echo "$TASK|$SPACED"; pwd; id -u; id -g`, "demo|a b\n/workspace\n1000\n1000\n")
	res := sc.exec(t, in.ID, driver.ExecSpec{
		Command: []string{"sh", "-c", `echo "$TASK|$EXTRA"; pwd; id -u`},
		Env:     map[string]string{"TASK": "override", "EXTRA": "x"},
		Workdir: "/tmp",
		User:    "0",
	})
	if want := "override|x\n/tmp\n0\n"; res.ExitCode != 0 || string(res.Stdout) != want {
		t.Errorf("exec with env/workdir/user: exit %d stdout %q stderr %q, want %q", res.ExitCode, res.Stdout, res.Stderr, want)
	}
	// The main command itself (sleep) runs as the instance user with its env.
	sc.expectOutput(t, in.ID, `p=$(pidof sleep | cut -d' ' -f1); stat -c %u /proc/$p; tr '\0' '\n' < /proc/$p/environ | grep '^TASK='`,
		"1000\nTASK=demo\n")
}

func testCreateStopped(t *testing.T, s *suite) {
	sc := s.open(t)
	spec := sc.spec("stopped")
	spec.Running = false
	spec.Files = []driver.File{{Path: "/etc/drivertest/kept.txt", Content: []byte("kept\n"), Mode: 0o644}}
	in := sc.create(t, spec)
	for _, got := range []driver.Instance{in, sc.inspect(t, in.ID)} {
		if got.Status != driver.StatusStopped && got.Status != driver.StatusCreated {
			t.Errorf("running=false: status %q, want %q or %q", got.Status, driver.StatusStopped, driver.StatusCreated)
		}
	}
	if err := sc.d.StartInstance(ctx(t), in.ID); err != nil {
		t.Fatalf("StartInstance: %v", err)
	}
	sc.waitStatus(t, in.ID, 30*time.Second, driver.StatusRunning)
	sc.expectOutput(t, in.ID, "cat /etc/drivertest/kept.txt", "kept\n")
}

// testExited: an instance whose command ends is stopped, not expired and not
// gone, and starts again.
func testExited(t *testing.T, s *suite) {
	sc := s.open(t)
	spec := sc.spec("exited")
	spec.Command = []string{"sh", "-c", "sleep 1; exit 3"}
	in := sc.create(t, spec)
	sc.waitStatus(t, in.ID, 30*time.Second, driver.StatusStopped)
	if _, ok := sc.listIDs(t)[in.ID]; !ok {
		t.Errorf("exited instance %s is not listed", in.ID)
	}
	if err := sc.d.StartInstance(ctx(t), in.ID); err != nil {
		t.Fatalf("StartInstance after exit: %v", err)
	}
	sc.waitStatus(t, in.ID, 30*time.Second, driver.StatusRunning)
}

func testCreateFailure(t *testing.T, s *suite) {
	sc := s.open(t)
	before := sc.listIDs(t)
	spec := sc.spec("bad")
	spec.Image = "drivertest-no-such-image-" + uniqueName("x") + ":missing"
	in, err := sc.d.CreateInstance(ctx(t), spec)
	if err == nil {
		t.Errorf("CreateInstance with a missing image succeeded (%+v), want an error", in)
	}
	after := sc.listIDs(t)
	for id, in := range after {
		if _, ok := before[id]; !ok {
			t.Errorf("failed create left instance %s (%s, %s) behind", id, in.Name, in.Status)
		}
	}
	// The name is free again: a good create with it works.
	spec.Image = s.h.Image
	ok := sc.create(t, spec)
	sc.expectOutput(t, ok.ID, "echo fine", "fine\n")
}
