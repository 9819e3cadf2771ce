package provider

// The initializer's view of its service inside the sandbox: where initplan
// put it (service step), whether it still runs (agent `probe pid`), and
// stopping it on destroy.

import (
	"context"
	"fmt"
	"strings"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/initplan"
)

// serviceOf returns the plan's service start step, if it has one.
func serviceOf(p initplan.Plan) (initplan.Step, bool) {
	for _, st := range p.Steps {
		if st.Kind == initplan.StepService {
			return st, true
		}
	}
	return initplan.Step{}, false
}

// splitAtWait cuts the plan before its readiness wait, so that state can
// be saved between the two: pre holds everything up to the service start,
// wait the rest (nil steps without a service).
func splitAtWait(p initplan.Plan) (pre, wait initplan.Plan) {
	pre, wait = p, p
	pre.Steps, wait.Steps = p.Steps, nil
	for i, st := range p.Steps {
		if st.Kind == initplan.StepWait {
			pre.Steps, wait.Steps = p.Steps[:i], p.Steps[i:]
			break
		}
	}
	return pre, wait
}

// serviceState is what a probe of the service's pid file found.
type serviceState int

const (
	serviceUnknown serviceState = iota // the probe itself could not run
	serviceRunning
	serviceGone
)

// probeService asks the agent inside the sandbox whether the process in
// the service's pid file still runs.
func probeService(ctx context.Context, d driver.Driver, id string, svc initplan.Step) (serviceState, string) {
	argv := agent.ProbeCommand(agent.Probe{Kind: agent.ProbePID, PIDFile: svc.PIDFile})
	res, err := d.Exec(ctx, id, driver.ExecSpec{Command: argv, User: svc.User, MaxOutput: initplan.MaxOutput})
	switch {
	case err != nil:
		return serviceUnknown, err.Error()
	case res.ExitCode == 0:
		return serviceRunning, ""
	case res.ExitCode == agent.ExitNotReady:
		return serviceGone, strings.TrimSpace(string(res.Stderr))
	}
	return serviceUnknown, fmt.Sprintf("probe exited with status %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
}

// stopScript stops the service's process group: TERM, up to 10 s for it to
// exit (so a re-run can bind the same port), then KILL. The agent started
// the service as a session leader, so its pid is also its group id. $2 is
// the agent, whose pid probe also counts an unreaped zombie as gone.
const stopScript = `f=$1
[ -f "$f" ] || exit 0
p=$(cat "$f")
[ -n "$p" ] || exit 0
kill -s TERM -- "-$p" 2>/dev/null || kill -s TERM "$p" 2>/dev/null || { rm -f "$f"; exit 0; }
i=0
while "$2" probe pid "$f" >/dev/null 2>&1 && [ "$i" -lt 100 ]; do sleep 0.1; i=$((i+1)); done
kill -s KILL -- "-$p" 2>/dev/null
kill -s KILL "$p" 2>/dev/null
rm -f "$f"
exit 0
`

// stopService stops the service as the user it runs as.
func stopService(ctx context.Context, d driver.Driver, id string, svc initplan.Step) error {
	res, err := d.Exec(ctx, id, driver.ExecSpec{Command: []string{"sh", "-c", stopScript, "sh", svc.PIDFile, agent.PathInInstance}, User: svc.User, MaxOutput: initplan.MaxOutput})
	switch {
	case err != nil:
		return err
	case res.ExitCode != 0:
		return fmt.Errorf("stopping the service exited with status %d: %s", res.ExitCode, strings.TrimSpace(string(res.Stderr)))
	}
	return nil
}
