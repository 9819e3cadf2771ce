package incus_test

import (
	"strings"
	"testing"
	"time"

	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	sandboxincus "github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/incus"
)

// A system container (the image's init stays PID 1) with a lifetime: the
// detached `agent poweroff` stops it at the deadline, with nobody calling
// the driver, and it is then reported expired and kept. Starting it again
// past the deadline stops it again.
func TestSystemContainerLifetime(t *testing.T) {
	preCheck(t)
	d := scoped(t, nil)
	in, err := d.CreateInstance(testCtx(t), driver.InstanceSpec{
		Name: "ttl", Image: fixtureImage, Running: true, Lifetime: 3 * time.Second,
		Security: driver.Security{CapDrop: []string{"ALL"}}, // the watcher keeps CAP_SYS_BOOT
	})
	if err != nil {
		t.Fatal(err)
	}
	if in.Status != driver.StatusRunning || in.ExpiresAt.IsZero() {
		t.Fatalf("after create: status %q, expires_at %v", in.Status, in.ExpiresAt)
	}
	res, err := d.Exec(testCtx(t), in.ID, driver.ExecSpec{Command: []string{"cat", "/proc/1/comm"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "init" {
		t.Errorf("PID 1 is %q (%v), want the image's init", res.Stdout, err)
	}
	waitStopped(t, d, in.ID, time.Until(in.ExpiresAt)+20*time.Second)
	got, err := d.InspectInstance(testCtx(t), in.ID)
	if err != nil || got.Status != driver.StatusExpired {
		t.Fatalf("after the deadline: %+v, %v; want expired and kept", got, err)
	}
	if err := d.StartInstance(testCtx(t), in.ID); err != nil {
		t.Fatalf("start past the deadline: %v", err)
	}
	waitStopped(t, d, in.ID, 20*time.Second)
}

// A system container restarted outside the driver (incus restart, a host
// reboot) keeps its lifetime: the start hook arms the watcher again, so it
// still stops at its deadline, and a start by anyone past the deadline ends
// at once.
func TestSystemContainerLifetimeSurvivesOutsideRestart(t *testing.T) {
	preCheck(t)
	testLifetimeSurvivesOutsideRestart(t, nil)
}

func testLifetimeSurvivesOutsideRestart(t *testing.T, mutate func(*driver.IncusConfig)) {
	d := scoped(t, mutate)
	in, err := d.CreateInstance(testCtx(t), driver.InstanceSpec{
		Name: "ttl-restart", Image: fixtureImage, Running: true, Lifetime: 12 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := rawClient(t, in.Labels[driver.LabelBackend])
	setState := func(action string) {
		t.Helper()
		// Incus' view of an instance in its last second flips between
		// running and stopped (see status in instances.go), and a start
		// while the stop is still being cleaned up fails: the test waits
		// for a stop that lasts, and tries once more on "already running".
		for retry := time.Now().Add(20 * time.Second); ; time.Sleep(500 * time.Millisecond) {
			op, err := c.UpdateInstanceState(in.ID, api.InstanceStatePut{Action: action, Force: true, Timeout: -1}, "")
			if err == nil {
				err = op.WaitContext(testCtx(t))
			}
			if err == nil {
				return
			}
			if !strings.Contains(err.Error(), "already running") || time.Now().After(retry) {
				t.Fatalf("%s %s outside the driver: %v", action, in.ID, err)
			}
		}
	}
	setState("restart")
	if time.Until(in.ExpiresAt) < 2*time.Second {
		t.Fatalf("the restart took too long to tell anything: expires at %v", in.ExpiresAt)
	}
	// The pid file of the watcher armed at create survives on the rootfs:
	// the pid it names now must be a running watcher again.
	res, err := d.Exec(testCtx(t), in.ID, driver.ExecSpec{Command: []string{"sh", "-c", "grep -q poweroff /proc/$(cat " + sandboxincus.WatcherPidFile + ")/cmdline"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("after the restart no watcher runs: exit %d, %q, %v", res.ExitCode, res.Stderr, err)
	}
	waitStopped(t, d, in.ID, time.Until(in.ExpiresAt)+20*time.Second)
	waitStoppedFor(t, c, in.ID, 2*time.Second)
	setState("start")
	waitStopped(t, d, in.ID, 20*time.Second)
}

// waitStoppedFor waits until the server has reported the instance stopped
// for settle without a break (at most a minute).
func waitStoppedFor(t *testing.T, c incus.InstanceServer, id string, settle time.Duration) {
	t.Helper()
	since, give := time.Time{}, time.Now().Add(time.Minute)
	for ; time.Now().Before(give); time.Sleep(250 * time.Millisecond) {
		inst, _, err := c.GetInstance(id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case inst.Status != "Stopped":
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= settle:
			return
		}
	}
	t.Fatalf("instance %s did not stay stopped for %s", id, settle)
}

// A command with spaces in its arguments runs from the agent's argv file:
// no shell quoting involved, PID 1 is the agent.
func TestCommandArgvFile(t *testing.T) {
	preCheck(t)
	d := scoped(t, nil)
	in, err := d.CreateInstance(testCtx(t), driver.InstanceSpec{
		Name: "argv", Image: fixtureImage, Running: true,
		Command: []string{"sh", "-c", `echo "$0" > /tmp/arg; exec sleep 600`, "two  spaces 'quoted'"},
	})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := d.Exec(testCtx(t), in.ID, driver.ExecSpec{Command: []string{"cat", "/tmp/arg"}})
		if err == nil && res.ExitCode == 0 {
			if got := strings.TrimSpace(string(res.Stdout)); got != "two  spaces 'quoted'" {
				t.Errorf("argument seen by the command: %q", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the command never ran: %+v, %v", res, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitStopped polls the engine (not the driver) until the instance no
// longer runs.
func waitStopped(t *testing.T, d driver.Driver, id string, within time.Duration) {
	t.Helper()
	in, err := d.InspectInstance(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	c := rawClient(t, in.Labels[driver.LabelBackend])
	deadline := time.Now().Add(within)
	for {
		inst, _, err := c.GetInstance(id)
		if err != nil {
			t.Fatal(err)
		}
		if inst.Status == "Stopped" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s still %s after %s", id, inst.Status, within)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
