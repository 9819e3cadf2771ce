package docker

// Start check: a command that cannot be started (not found, not
// executable) makes the agent exit at once with 127 (126 from the engine's
// own init). Create waits until the agent reports itself ready (it names
// itself agent.ReadyName after resolving the command) or the container has
// exited, so such a sandbox fails its create instead of being "applied" and
// then started again on every plan.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/outcap"
)

// startCheckTimeout bounds the wait for the agent's readiness. It is only
// spent when the agent neither gets ready nor exits (an overloaded engine).
const startCheckTimeout = 5 * time.Second

// errNotStarted reports a command the sandbox could not start.
func (d *Driver) errNotStarted(ctx context.Context, id, name string, code int) error {
	msg := strings.TrimSpace(d.logTail(ctx, id, 2048))
	if msg == "" {
		msg = "no output"
	}
	return fmt.Errorf("docker backend %q: instance %q: the command could not be started (exit code %d): %s: %w",
		d.backend, name, code, msg, driver.ErrInvalid)
}

// checkStarted waits (briefly) for the freshly started container's agent:
// ready means the command was found and started; an exit with 126/127
// means it could not be. Without the agent as PID 1 (another entrypoint)
// the engine fails the start itself and there is nothing to wait for. It
// returns its last inspect, which callers use as the instance's state
// instead of asking the engine once more.
func (d *Driver) checkStarted(ctx context.Context, id string) (container.InspectResponse, error) {
	cli, err := d.api()
	if err != nil {
		return container.InspectResponse{}, err
	}
	deadline := time.Now().Add(startCheckTimeout)
	delay := 2 * time.Millisecond
	// Readiness can be unknowable for a moment (the process exited between
	// the inspect and the read of /proc): look again a few times before
	// concluding the engine cannot tell, so a quick exit 127 is still seen.
	unknown := 0
	for {
		c, err := cli.ContainerInspect(ctx, id)
		if err != nil {
			return c, d.wrap(err, "instance %q", id)
		}
		if c.State == nil || c.Config == nil {
			return c, nil
		}
		name := c.Config.Labels[driver.LabelName]
		if !c.State.Running {
			if c.State.Status == "exited" && (c.State.ExitCode == 126 || c.State.ExitCode == agent.ExitNotStarted) {
				return c, d.errNotStarted(ctx, id, name, c.State.ExitCode)
			}
			return c, nil // exited by itself, quickly: a legitimate short command
		}
		if !withAgent(c.Config.Entrypoint) {
			return c, nil
		}
		// The process may be on this host: watch it in /proc without asking
		// the engine again while /proc shows it.
		ready, seen := false, d.ep.local && c.State.Pid > 0
		if seen {
			if ready, seen, err = waitAgentLocally(ctx, c.State.Pid, deadline); err != nil {
				return c, err
			}
		}
		if !seen {
			// It exited meanwhile (the next inspect tells how), or its pid
			// is not visible here (an engine in a VM, a provider in another
			// pid namespace): the engine's `top` can tell.
			var known bool
			if ready, known = d.agentReady(ctx, id); !known {
				unknown++
			}
		}
		if ready || unknown >= 3 || time.Now().After(deadline) {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return c, ctx.Err()
		case <-time.After(delay):
		}
		if delay < 20*time.Millisecond {
			delay *= 2
		}
	}
}

// agentReady asks the engine (`top`) whether PID 1 of a container whose
// processes this host cannot see has named itself agent.ReadyName. known is
// false when the engine cannot tell (the container is no longer running).
func (d *Driver) agentReady(ctx context.Context, id string) (ready, known bool) {
	cli, err := d.api()
	if err != nil {
		return false, false
	}
	top, err := cli.ContainerTop(ctx, id, []string{"-o", "pid,comm"})
	if err != nil {
		return false, false
	}
	ci := -1
	for i, t := range top.Titles {
		if strings.EqualFold(t, "comm") || strings.EqualFold(t, "command") {
			ci = i
		}
	}
	if ci < 0 {
		return false, false
	}
	for _, p := range top.Processes {
		if ci < len(p) && strings.TrimSpace(p[ci]) == agent.ReadyName {
			return true, true
		}
	}
	return false, true
}

// logTail is the end of the container's output (best effort).
func (d *Driver) logTail(ctx context.Context, id string, n int) string {
	cli, err := d.api()
	if err != nil {
		return ""
	}
	rc, err := cli.ContainerLogs(context.WithoutCancel(ctx), id, container.LogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"})
	if err != nil {
		return ""
	}
	defer rc.Close()
	out, errb := outcap.New(n, nil), outcap.New(n, nil)
	if _, err := stdcopy.StdCopy(out, errb, rc); err != nil {
		return ""
	}
	s, _ := errb.Bytes()
	if len(s) == 0 {
		s, _ = out.Bytes()
	}
	return string(s)
}

// withAgent reports whether the entrypoint runs the agent as init.
func withAgent(entrypoint []string) bool {
	return len(entrypoint) > 1 && entrypoint[0] == agent.PathInInstance && entrypoint[1] == "init"
}

// waitAgentLocally polls /proc/PID/comm of a container's agent on this
// host until it names itself ready, the deadline passes (ready too: as long
// as it runs, the sandbox counts as started) or /proc has no such process
// (not seen: it exited, or the engine's pids are not visible here).
func waitAgentLocally(ctx context.Context, pid int, deadline time.Time) (ready, seen bool, err error) {
	comm := "/proc/" + strconv.Itoa(pid) + "/comm"
	for delay := 2 * time.Millisecond; ; delay = min(2*delay, 20*time.Millisecond) {
		b, readErr := os.ReadFile(comm)
		if readErr != nil {
			return false, false, nil //nolint:nilerr // no such process here: the caller asks the engine
		}
		if strings.TrimSpace(string(b)) == agent.ReadyName || time.Now().After(deadline) {
			return true, true, nil
		}
		select {
		case <-ctx.Done():
			return false, true, ctx.Err()
		case <-time.After(delay):
		}
	}
}
