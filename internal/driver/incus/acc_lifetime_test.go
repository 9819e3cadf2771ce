package incus_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
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
