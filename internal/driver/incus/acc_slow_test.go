package incus_test

// Operations that outlast one server-side wait (5 s) on purpose. incusd
// 6.0.4 answers such a wait with an error while the operation still runs;
// each of these must still succeed through the driver.

import (
	"context"
	"strings"
	"testing"
	"time"

	incus "github.com/lxc/incus/v6/client"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// slowCtx bounds a slow test's operations.
func slowCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// slowHook is an LXC start hook that takes 12 s and leaves a mark, so the
// test knows the start it waited for ran it.
const slowHook = "#!/bin/sh\nsleep 12\necho ran >> /slow-hook-ran\n"

// setProfileRawLXC gives every container of the project raw (the driver
// sets no raw.lxc on a system container without hardening, so the
// profile's applies).
func setProfileRawLXC(t *testing.T, c incus.InstanceServer, raw string) {
	t.Helper()
	p, etag, err := c.GetProfile("default")
	if err != nil {
		t.Fatal(err)
	}
	put := p.Writable()
	put.Config["raw.lxc"] = raw
	if err := c.UpdateProfile("default", put, etag); err != nil {
		t.Fatal(err)
	}
}

// A create whose start takes 12 s (an LXC start hook that sleeps), then a
// stop and a start of it again: both succeed, and the hook ran each time.
func TestSlowStartHook(t *testing.T) {
	preCheck(t)
	backend := uniqueName("tf-acc")
	d := scopedNamed(t, backend, nil)
	setProfileRawLXC(t, rawClient(t, backend), "lxc.hook.start = /slow-hook")
	in, err := d.CreateInstance(slowCtx(t), driver.InstanceSpec{
		Name: "slow-start", Image: fixtureImage, Running: true,
		Files: []driver.File{{Path: "/slow-hook", Content: []byte(slowHook), Mode: 0o755}},
	})
	if err != nil {
		t.Fatalf("create with a 12 s start: %v", err)
	}
	hookRuns(t, d, in.ID, "ran\n")
	if err := d.StopInstance(slowCtx(t), in.ID, 0); err != nil {
		t.Fatal(err)
	}
	if err := d.StartInstance(slowCtx(t), in.ID); err != nil {
		t.Fatalf("start with a 12 s start hook: %v", err)
	}
	hookRuns(t, d, in.ID, "ran\nran\n")
}

func hookRuns(t *testing.T, d driver.Driver, id, want string) {
	t.Helper()
	res, err := d.Exec(slowCtx(t), id, driver.ExecSpec{Command: []string{"cat", "/slow-hook-ran"}})
	if err != nil || string(res.Stdout) != want {
		t.Fatalf("the start hook's marks: %q (stderr %q, %v); want %q", res.Stdout, res.Stderr, err, want)
	}
}

// A container whose PID 1 ignores the stop signal (sleep has no handler,
// and the kernel drops such signals to a namespace's init): the graceful
// stop runs out of its grace and the force stop follows; a delete forces it
// at once.
func TestStopIgnoredByPID1(t *testing.T) {
	preCheck(t)
	d := scoped(t, nil)
	spec := driver.InstanceSpec{Name: "deaf", Image: fixtureImage, Running: true, Command: []string{"sleep", "3600"}}
	in, err := d.CreateInstance(slowCtx(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.StopInstance(slowCtx(t), in.ID, 12*time.Second); err != nil {
		t.Fatalf("stop with 12 s grace: %v", err)
	}
	if got, err := d.InspectInstance(slowCtx(t), in.ID); err != nil || got.Status != driver.StatusStopped {
		t.Fatalf("after the stop: %s, %v; want stopped", got.Status, err)
	}
	if err := d.StartInstance(slowCtx(t), in.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteInstance(slowCtx(t), in.ID); err != nil {
		t.Fatalf("delete of a container ignoring its stop signal: %v", err)
	}
	if _, err := d.InspectInstance(slowCtx(t), in.ID); !driver.IsNotFound(err) {
		t.Fatalf("after the delete: %v; want not found", err)
	}
}

// A system container whose init ignores the stop signal (busybox init has
// no use for SIGWINCH): a delete waits out the instance's grace, then
// forces it once, and the instance is gone.
func TestDeleteIgnoredStopSignal(t *testing.T) {
	preCheck(t)
	backend := uniqueName("tf-acc")
	d := scopedNamed(t, backend, nil)
	setProfileRawLXC(t, rawClient(t, backend), "lxc.signal.halt = SIGWINCH")
	in, err := d.CreateInstance(slowCtx(t), driver.InstanceSpec{Name: "deaf-init", Image: fixtureImage, Running: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteInstance(slowCtx(t), in.ID); err != nil {
		t.Fatalf("delete of a system container ignoring its stop signal: %v", err)
	}
	if _, err := d.InspectInstance(slowCtx(t), in.ID); !driver.IsNotFound(err) {
		t.Fatalf("after the delete: %v; want not found", err)
	}
}

// A stop whose caller gave up while it ran is not doubled: the delete that
// follows waits for it, then forces once, and the instance ends deleted
// rather than wedged in ERROR.
func TestDeleteAfterAbandonedStop(t *testing.T) {
	preCheck(t)
	d := scoped(t, nil)
	in, err := d.CreateInstance(slowCtx(t), driver.InstanceSpec{
		Name: "abandoned", Image: fixtureImage, Running: true, Command: []string{"sleep", "3600"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// No deadline, so the grace is not cut to fit: cancelled while it runs.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(3*time.Second, cancel)
	if err := d.StopInstance(ctx, in.ID, 15*time.Second); err == nil || !strings.Contains(err.Error(), "still running") {
		t.Fatalf("stop abandoned after 3 s: %v; want the stop named as still running", err)
	}
	if err := d.DeleteInstance(slowCtx(t), in.ID); err != nil {
		t.Fatalf("delete after an abandoned stop: %v", err)
	}
	if _, err := d.InspectInstance(slowCtx(t), in.ID); !driver.IsNotFound(err) {
		t.Fatalf("after the delete: %v; want not found", err)
	}
}

// An exec that runs 12 s returns its output and status.
func TestSlowExec(t *testing.T) {
	preCheck(t)
	d := scoped(t, nil)
	in, err := d.CreateInstance(slowCtx(t), driver.InstanceSpec{
		Name: "slow-exec", Image: fixtureImage, Running: true, Command: []string{"sleep", "3600"},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Exec(slowCtx(t), in.ID, driver.ExecSpec{Command: []string{"sh", "-c", "sleep 12; echo done; exit 3"}})
	if err != nil || res.ExitCode != 3 || string(res.Stdout) != "done\n" {
		t.Fatalf("exec of 12 s: exit %d, %q, %v; want 3, \"done\\n\"", res.ExitCode, res.Stdout, err)
	}
}
