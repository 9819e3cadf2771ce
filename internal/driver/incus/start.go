package incus

import (
	"context"
	"fmt"
	"io"
	"strings"

	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"
)

// Container starts are bounded. A container start runs LXC's pre-start
// hook, which calls back into incusd (`incusd callhook ... start`) to mount
// the storage and start the devices (NIC on the managed bridge, proxy
// devices, the agent's bind mount), and the hook gives up after 30 seconds
// ("Hook didn't finish within 30s"; forkstart then exits 1 and the start
// fails with "Failed to run: .../incusd forkstart ..."). Ten starts at once
// on a loaded two-core machine queue up in incusd long enough for every
// hook to time out (seen in TestConformanceSSH/ConcurrentCreates: all ten
// failed after ~33 s with "Failed to run lxc.hook.pre-start" in their
// lxc.log). So at most maxConcurrentStarts starts run at once per process
// (all backends share the server), and a start that failed in that hook is
// tried once more after a forced stop.
const maxConcurrentStarts = 3

var startSlots = make(chan struct{}, maxConcurrentStarts)

// acquireStart takes a start slot, or fails when ctx ends first.
func acquireStart(ctx context.Context) (func(), error) {
	select {
	case startSlots <- struct{}{}:
		return func() { <-startSlots }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a start slot (%d starts at once): %w", maxConcurrentStarts, ctx.Err())
	}
}

// start starts the instance within a start slot, retrying once when the
// start failed in LXC's pre-start hook (the lxc.log says so).
func (d *Driver) start(ctx context.Context, c incus.InstanceServer, name string) error {
	release, err := acquireStart(ctx)
	if err != nil {
		return d.errf(err, "start instance %q", name)
	}
	defer release()
	err = d.setState(ctx, c, name, api.InstanceStatePut{Action: "start"})
	if err == nil || ctx.Err() != nil || !hookTimedOut(c, name, err) {
		return err
	}
	// LXC may have left the instance half up: force it down (once: setState
	// waits for a stop already running), then again.
	_ = d.setState(ctx, c, name, api.InstanceStatePut{Action: "stop", Force: true})
	retryErr := d.setState(ctx, c, name, api.InstanceStatePut{Action: "start"})
	if retryErr == nil {
		return nil
	}
	if ctx.Err() == nil && hookTimedOut(c, name, retryErr) {
		return fmt.Errorf("%w (first attempt: %v); %s", retryErr, err, busyHookHint)
	}
	return fmt.Errorf("%w (first attempt: %v)", retryErr, err)
}

// busyHookHint explains a start whose LXC hook timed out twice: the evidence
// of a busy incusd (the hook waits for incusd to set up the devices).
const busyHookHint = "the instance's lxc.log shows LXC's pre-start hook waiting for incusd longer than LXC's 30 s limit, " +
	"twice: incusd was too busy to set the instance up (check the host's load); apply again with fewer " +
	"instances at once (terraform apply -parallelism=N)"

// failedToStart tells a request whose instance was there but did not start
// (LXC's forkstart failed) from one that failed before.
func failedToStart(err error) bool {
	return strings.Contains(err.Error(), "forkstart")
}

// hookTimedOut tells whether a failed start failed in LXC's start hooks
// (forkstart exiting 1 with "Failed to run lxc.hook.pre-start" in the
// instance's lxc.log), the failure a loaded incusd causes.
func hookTimedOut(c incus.InstanceServer, name string, err error) bool {
	if !failedToStart(err) {
		return false
	}
	r, lerr := c.GetInstanceLogfile(name, "lxc.log")
	if lerr != nil {
		return true // the log is gone with the failed start: forkstart said enough
	}
	defer r.Close()
	b, _ := io.ReadAll(io.LimitReader(r, 1<<20))
	log := string(b)
	return strings.Contains(log, "lxc.hook.pre-start") || strings.Contains(log, "Hook didn't finish")
}
