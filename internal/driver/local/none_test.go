package local

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// TestNoneIsolation: plain processes in the instance's workspace.
func TestNoneIsolation(t *testing.T) {
	d := openTest(t, driver.IsolationNone)
	ctx := context.Background()
	if _, err := d.CreateVolume(ctx, driver.VolumeSpec{Name: "vol"}); err != nil {
		t.Fatal(err)
	}
	spec := driver.InstanceSpec{Name: "plain", Command: []string{"sleep", "3600"}, Running: true,
		Env:       map[string]string{"TASK": "demo"},
		Files:     []driver.File{{Path: "/workspace/in/task.txt", Content: []byte("task")}, {Path: "rel.txt", Content: []byte("rel")}},
		Mounts:    []driver.Mount{{Volume: "vol", Target: "/workspace/vol"}},
		PidsLimit: 64,
	}
	mustCreate(t, d, spec)
	ws := filepath.Join(d.instanceDir("plain"), workspace)
	if got := sh(t, d, "plain", "pwd; echo $TASK; cat in/task.txt rel.txt; echo v > vol/f"); got != ws+"\ndemo\ntaskrel" {
		t.Errorf("none: %q", got)
	}
	if b, _ := os.ReadFile(filepath.Join(d.volumeData("vol"), "f")); string(b) != "v\n" {
		t.Errorf("volume through the workspace link: %q", b)
	}
	if err := d.CopyFiles(ctx, "plain", []driver.File{{Path: "/etc/nope", Content: []byte("x")}}); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("a file outside the workdir: %v, want ErrUnsupported", err)
	}
	bad := spec
	bad.Name, bad.Network = "isolated", driver.NetworkIsolated
	if _, err := d.CreateInstance(ctx, bad); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("network isolated without bwrap: %v", err)
	}
	st, _ := d.readState("plain")
	if d.cg != nil {
		if b, _ := os.ReadFile(filepath.Join(d.cg.parent["pids"], d.instanceID("plain"), "pids.max")); strings.TrimSpace(string(b)) != "64" {
			t.Errorf("pids.max %q", b)
		}
		if len(cgroupPids(st.Cgroups)) < 2 {
			t.Errorf("the instance's processes are not in its cgroup")
		}
	}
	if err := d.StopInstance(ctx, "plain", 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if s := status(t, d, "plain"); s != driver.StatusStopped {
		t.Errorf("after stop: %s", s)
	}
	if n := len(cgroupPids(st.Cgroups)); n != 0 {
		t.Errorf("%d processes survived stop", n)
	}
	if err := d.StartInstance(ctx, "plain"); err != nil {
		t.Fatal(err)
	}
	sh(t, d, "plain", "true")
}

// TestNoneExpiry: the wrapper records the agent's exit code without the provider.
func TestNoneExpiry(t *testing.T) {
	d := openTest(t, driver.IsolationNone)
	spec := driver.InstanceSpec{Name: "short", Command: []string{"sleep", "3600"}, Running: true, Lifetime: time.Second}
	mustCreate(t, d, spec)
	waitFor(t, 20*time.Second, "expired", func() bool { return status(t, d, "short") == driver.StatusExpired })
	if code, ok := lastExit(d.instanceDir("short")); !ok || code != 124 {
		t.Errorf("recorded exit %d %v, want 124", code, ok)
	}
}

// TestNoneKillWithoutCgroups: with no cgroup to find them by, a stop that
// must KILL still reaches the command through the wrapper's session.
func TestNoneKillWithoutCgroups(t *testing.T) {
	d := openTest(t, driver.IsolationNone)
	d.cg = nil
	spec := driver.InstanceSpec{Name: "stubborn", Running: true,
		Command: []string{"sh", "-c", "trap '' TERM; sleep 3600 & wait; sleep 3600"}}
	mustCreate(t, d, spec)
	st, _ := d.readState("stubborn")
	var members []int
	waitFor(t, 5*time.Second, "the command's processes", func() bool {
		members = sessionMembers(st.Pid)
		return len(members) >= 3 // agent, sh, sleep
	})
	if err := d.StopInstance(context.Background(), "stubborn", 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "every process of the session to die", func() bool {
		for _, pid := range members {
			if _, ok := procStart(pid); ok {
				return false
			}
		}
		return true
	})
}

// TestNoneUserReachesOnlyItsWorkspace: without isolation a non-root user
// runs on the host and reaches its workspace by path, through its group;
// other host users still cannot enter the instance directory.
func TestNoneUserReachesOnlyItsWorkspace(t *testing.T) {
	d := openTest(t, driver.IsolationNone)
	spec := driver.InstanceSpec{Name: "nobody", User: "65534:65534", Command: []string{"sleep", "3600"}, Running: true}
	mustCreate(t, d, spec)
	if got := sh(t, d, "nobody", "echo x > f && cat f && id -u"); got != "x\n65534\n" {
		t.Errorf("the user in its workspace: %q", got)
	}
	fi, err := os.Stat(d.instanceDir("nobody"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o710 || fi.Sys().(*syscall.Stat_t).Gid != 65534 {
		t.Errorf("instance directory: mode %v gid %d, want 0710 and the user's group", fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Gid)
	}
	out, err := exec.Command("setpriv", "--reuid=12345", "--regid=12345", "--clear-groups", "--", "/bin/sh", "-c", `exec ls "$0"`, filepath.Join(d.instanceDir("nobody"), workspace)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "ermission denied") {
		t.Errorf("another host user listed the workspace: %q, %v", out, err)
	}
}
