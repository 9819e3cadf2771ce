package provider

// The sandbox agent is the provider binary itself (or $SANDBOX_AGENT_BINARY)
// and must be a static executable to run in any image. A cgo build of the
// provider is dynamically linked: whatever needs the agent is refused at
// plan time with the reason, never discovered half-way through an apply.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// agentCheck reports why the agent cannot run in any sandbox (tests replace it).
var agentCheck = agent.Check

const agentUnavailableSummary = "Sandbox Agent Unavailable"

// agentRemedy says how to get a provider whose agent works: the agent is
// a Linux binary, so a provider built for another system needs one built
// separately.
func agentRemedy() string {
	build := "`CGO_ENABLED=0 GOOS=linux GOARCH=<the engine's architecture> go build ./cmd/sandbox-agent`"
	if runtime.GOOS != "linux" {
		return "The agent runs inside Linux sandboxes: set " + agent.EnvBinary + " to a static Linux build of it, " + build + "."
	}
	return "Use a release build of the provider, or build it with cgo off: " +
		"`CGO_ENABLED=0 go install github.com/sandboxfleet/terraform-provider-sandbox@latest`; " +
		"or set " + agent.EnvBinary + " to a static build of cmd/sandbox-agent, " + build + "."
}

// checkInstanceAgent reports, for a sandbox about to be created, what the
// missing agent costs it: an error where it cannot be made without it
// (driver.AgentNeeds), a warning elsewhere.
func checkInstanceAgent(spec driver.InstanceSpec, cfg driver.Config, diags *diag.Diagnostics) {
	err := agentCheck()
	if err == nil {
		return
	}
	detail := fmt.Sprintf("The provider's sandbox agent cannot run inside sandboxes: %v.", err)
	need := driver.AgentNeeds(cfg, spec)
	if need.Required {
		at := path.Root("backend")
		if spec.Lifetime > 0 {
			at = path.Root("lifetime")
		} else if len(spec.Command) > 0 {
			at = path.Root("command")
		}
		diags.AddAttributeError(at, agentUnavailableSummary, detail+" The sandbox cannot be made without it: "+need.Reason+". "+agentRemedy())
		return
	}
	instead := ""
	if spec.Security.Init && cfg.Driver == driver.Docker {
		instead = " Docker's own init stands in for `security.init`."
	}
	diags.AddAttributeWarning(path.Root("security"), agentUnavailableSummary, detail+" The sandbox is made without it."+instead+
		" A sandbox_initializer that starts a service or waits for readiness will be refused for this sandbox. "+agentRemedy())
}

// checkInitializerAgent refuses, at plan time, an initializer whose steps
// need the agent when the provider has none to give.
func checkInitializerAgent(needsAgent, hasService bool, diags *diag.Diagnostics) {
	if !needsAgent {
		return
	}
	err := agentCheck()
	if err == nil {
		return
	}
	at := path.Root("kind")
	if hasService {
		at = path.Root("service")
	}
	diags.AddAttributeError(at, agentUnavailableSummary, fmt.Sprintf("This initializer starts a service and waits for it "+
		"through the sandbox agent, which cannot run inside sandboxes: %v. %s", err, agentRemedy()))
}

// requireAgentInside checks, before an initializer changes anything, that
// the agent answers inside the sandbox: a sandbox created while the agent
// was unusable for its engine (a cgo build, another CPU architecture) has
// none, and would otherwise fail only at the service step.
func requireAgentInside(ctx context.Context, t initTarget, diags *diag.Diagnostics) bool {
	res, err := t.drv.Exec(ctx, t.ref.ID, driver.ExecSpec{Command: agent.VersionCommand()})
	if err != nil && !errors.Is(err, driver.ErrInvalid) && !errors.Is(err, driver.ErrNotFound) {
		// The engine, not the agent: unreachable, timed out, ... (the
		// sandbox itself was just seen running, so not found is the agent)
		diags.Append(driverError(summary("Create", initializerKind), t.cfg, "checking the sandbox agent in "+t.object(), err))
		return false
	}
	if err == nil && res.ExitCode == 0 && strings.HasPrefix(string(res.Stdout), agent.VersionMagic) {
		return true
	}
	why := fmt.Sprint(err)
	if err == nil {
		why = fmt.Sprintf("`%s` exited with %d: %s", strings.Join(agent.VersionCommand(), " "), res.ExitCode,
			strings.TrimSpace(string(res.Stderr)+string(res.Stdout)))
	}
	diags.AddAttributeError(path.Root("instance"), agentUnavailableSummary, fmt.Sprintf("This initializer needs the sandbox "+
		"agent inside %s on the %s backend %q to start its service and probe readiness, but the agent does not answer "+
		"there: %s. The sandbox was created without a usable agent (the provider binary could not serve as the agent "+
		"for this engine). Nothing was run. %s Then replace the sandbox (`terraform apply -replace=ADDRESS` with the "+
		"sandbox_instance's address).", t.object(), t.cfg.Driver, t.cfg.Name, why, agentRemedy()))
	return false
}
