package incus

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// StopInstance stops gracefully within grace, then by force.
func (d *Driver) StopInstance(ctx context.Context, id string, grace time.Duration) error {
	c, id, err := d.instanceClient(ctx, id)
	if err != nil {
		return err
	}
	return d.stopInstance(ctx, c, id, grace)
}

// DeleteInstance stops the instance (gracefully within deleteGrace, then by
// force) and deletes it; a missing one is no error.
func (d *Driver) DeleteInstance(ctx context.Context, id string) error {
	c, id, err := d.instanceClient(ctx, id)
	if err != nil {
		return err
	}
	d.forget(id)
	inst, _, err := c.GetInstance(id)
	switch {
	case err != nil && api.StatusErrorCheck(err, http.StatusNotFound):
		return nil // deleting what is gone is done
	case err == nil && inst.StatusCode == api.Stopped:
		err = d.runOperation(ctx, c, "DELETE", "/instances/"+url.PathEscape(id), nil)
		if err == nil || !strings.Contains(err.Error(), "is running") { // started meanwhile: stop it first
			return d.errf(ignoreNotFound(err), "delete instance %q", id)
		}
	}
	grace := stopGrace
	if inst != nil {
		grace = deleteGrace(inst)
	}
	return ignoreNotFound(d.removeInstance(ctx, c, id, grace))
}

func ignoreNotFound(err error) error {
	if err != nil && (driver.IsNotFound(err) || api.StatusErrorCheck(err, http.StatusNotFound)) {
		return nil
	}
	return err
}

// deleteGrace is how long a delete lets the running instance stop by
// itself: its own grace. The agent as PID 1 passes SIGTERM on and kills its
// command stopGrace later, so it gets a little more than that; an image's
// init (a system container, a VM) acts on the stop signal within stopGrace.
// A bare command as PID 1 (security.init off) gets none, as a Docker
// container's removal: the kernel drops a signal to a namespace's init that
// has no handler for it, so a grace there is mostly time spent waiting (3 s
// per delete doubled the conformance suite's time).
func deleteGrace(inst *api.Instance) time.Duration {
	initCmd := ""
	for _, line := range strings.Split(inst.Config["raw.lxc"], "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && strings.TrimSpace(k) == "lxc.init.cmd" {
			initCmd = strings.TrimSpace(v)
		}
	}
	switch {
	case inst.Type == string(api.InstanceTypeVM) || initCmd == "":
		return stopGrace
	case strings.HasPrefix(initCmd, agent.PathInInstance+" init"):
		return stopGrace + 2*time.Second
	}
	return 0
}

// stopInstance asks the instance to stop and gives it grace (bounded by
// half of what is left of ctx), then forces it, once. A graceful stop that
// did not end (ctx ran out) is not followed by a force stop.
func (d *Driver) stopInstance(ctx context.Context, c incus.InstanceServer, name string, grace time.Duration) error {
	if deadline, ok := ctx.Deadline(); ok {
		grace = min(grace, time.Until(deadline)/2)
	}
	if secs := int(grace / time.Second); secs > 0 {
		err := d.setState(ctx, c, name, api.InstanceStatePut{Action: "stop", Timeout: secs})
		if err == nil || driver.IsNotFound(err) || ctx.Err() != nil {
			return err
		}
	}
	return d.setState(ctx, c, name, api.InstanceStatePut{Action: "stop", Force: true})
}

// removeInstance stops the instance (see stopInstance) and deletes it.
func (d *Driver) removeInstance(ctx context.Context, c incus.InstanceServer, name string, grace time.Duration) error {
	// The stop may fail on an instance in an odd state; the delete decides.
	stopErr := d.stopInstance(ctx, c, name, grace)
	err := d.runOperation(ctx, c, "DELETE", "/instances/"+url.PathEscape(name), nil)
	if err != nil && strings.Contains(err.Error(), "is running") && ctx.Err() == nil && stopEnded(stopErr) {
		// An instance stopping itself at its deadline can race the stop, and
		// the delete then finds it running still; the first stop has ended,
		// so one more is not a second stop in progress.
		stopErr = d.setState(ctx, c, name, api.InstanceStatePut{Action: "stop", Force: true})
		err = d.runOperation(ctx, c, "DELETE", "/instances/"+url.PathEscape(name), nil)
	}
	if err != nil && stopErr != nil && !driver.IsNotFound(stopErr) {
		return fmt.Errorf("%w (stopping first: %v)", d.errf(err, "delete instance %q", name), stopErr)
	}
	return d.errf(err, "delete instance %q", name)
}

// stopEnded tells whether a stop's operation is known to have ended: it
// succeeded or the server reported its failure.
func stopEnded(err error) bool {
	var failed *opFailure
	return err == nil || errors.As(err, &failed)
}

// setState runs a state change and waits for it; "already in that state" is
// success. Stops go through stop.
func (d *Driver) setState(ctx context.Context, c incus.InstanceServer, name string, st api.InstanceStatePut) error {
	var err error
	if st.Action == "stop" {
		err = d.stop(ctx, c, name, st)
	} else {
		err = d.runOperation(ctx, c, "PUT", statePath(name), st)
	}
	if err != nil && alreadyInState(err) {
		return nil
	}
	return d.errf(err, "%s instance %q", stateWhat(st), name)
}

// stop runs a stop and waits for it, one at a time per instance: a stop of
// ours still running there (its wait ran out of time before) is waited for
// instead of starting another. A second force stop while one was in
// progress left incusd 6.0.4 with the instance in ERROR and a stop
// operation that never ended, until incusd was restarted.
func (d *Driver) stop(ctx context.Context, c incus.InstanceServer, name string, st api.InstanceStatePut) error {
	if v, ok := d.stops.Load(name); ok {
		op, _ := v.(*api.Operation) // stops holds only operations
		_, err := d.waitOperation(ctx, c, op)
		if ctx.Err() != nil {
			return fmt.Errorf("an earlier stop is still running: %w", err)
		}
		d.stops.CompareAndDelete(name, v)
		if err == nil || !st.Force {
			return err // the earlier stop's result stands for this one; only a force goes further
		}
	}
	op, err := d.startOperation(ctx, c, "PUT", statePath(name), st)
	if err != nil {
		return err
	}
	d.stops.Store(name, op)
	_, err = d.waitOperation(ctx, c, op)
	if ctx.Err() == nil {
		d.stops.CompareAndDelete(name, op) // ended (or vanished): no longer in progress
	}
	return err
}

func statePath(name string) string { return "/instances/" + url.PathEscape(name) + "/state" }

// stateWhat names a state change for messages: "force stop", "stop (30 s
// grace)", "start".
func stateWhat(st api.InstanceStatePut) string {
	switch {
	case st.Action == "stop" && st.Force:
		return "force stop"
	case st.Action == "stop" && st.Timeout > 0:
		return fmt.Sprintf("stop (%d s grace)", st.Timeout)
	}
	return st.Action
}

func alreadyInState(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "already running") || strings.Contains(msg, "already stopped") ||
		strings.Contains(msg, "is not running")
}
