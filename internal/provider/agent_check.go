package provider

// The sandbox agent is the provider binary itself (or $SANDBOX_AGENT_BINARY)
// and must be a static executable to run in any image. A cgo build of the
// provider is dynamically linked: whatever needs the agent is refused at
// plan time with the reason, never discovered half-way through an apply.

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// agentCheck reports why the agent cannot run in any sandbox (tests replace it).
var agentCheck = agent.Check

const agentUnavailableSummary = "Sandbox Agent Unavailable"

// agentRemedy says how to get a provider whose agent works.
const agentRemedy = "Use a release build of the provider, or build it with cgo off: " +
	"`CGO_ENABLED=0 go install github.com/sandboxfleet/terraform-provider-sandbox@latest`; " +
	"or set " + agent.EnvBinary + " to a static build of cmd/sandbox-agent (`CGO_ENABLED=0 go build ./cmd/sandbox-agent`) " +
	"for the engine's architecture."

// checkInstanceAgent reports, for a sandbox about to be created, what the
// missing agent costs it: an error where the sandbox cannot work without it
// (a lifetime, the local backend), a warning elsewhere.
func checkInstanceAgent(plan instanceModel, cfg driver.Config, diags *diag.Diagnostics) {
	err := agentCheck()
	if err == nil {
		return
	}
	detail := fmt.Sprintf("The provider's sandbox agent cannot run inside sandboxes: %v.", err)
	switch {
	case known(plan.Lifetime):
		diags.AddAttributeError(path.Root("lifetime"), agentUnavailableSummary,
			detail+" A `lifetime` is enforced by the agent inside the sandbox. "+agentRemedy)
	case cfg.Driver == driver.Local:
		diags.AddAttributeError(path.Root("backend"), agentUnavailableSummary,
			detail+" The local backend runs every sandbox under the agent. "+agentRemedy)
	default:
		diags.AddAttributeWarning(path.Root("security"), agentUnavailableSummary,
			detail+" The sandbox gets the engine's own init instead, and a sandbox_initializer that starts a service "+
				"or waits for readiness will be refused for it. "+agentRemedy)
	}
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
		"through the sandbox agent, which cannot run inside sandboxes: %v. %s", err, agentRemedy))
}

// requireAgentInside checks, before an initializer changes anything, that
// the agent answers inside the sandbox: a sandbox created while the agent
// was unusable for its engine (a cgo build, another CPU architecture) has
// none, and would otherwise fail only at the service step.
func requireAgentInside(ctx context.Context, t initTarget, diags *diag.Diagnostics) bool {
	res, err := t.drv.Exec(ctx, t.ref.ID, driver.ExecSpec{Command: agent.VersionCommand()})
	switch {
	case err == nil && res.ExitCode == 0 && strings.HasPrefix(string(res.Stdout), agent.VersionMagic):
		return true
	case err == nil:
		err = fmt.Errorf("`%s` exited with %d: %s", strings.Join(agent.VersionCommand(), " "), res.ExitCode,
			strings.TrimSpace(string(res.Stderr)+string(res.Stdout)))
	}
	diags.AddAttributeError(path.Root("instance"), agentUnavailableSummary, fmt.Sprintf("This initializer needs the sandbox "+
		"agent inside %s on the %s backend %q to start its service and probe readiness, but the agent does not answer "+
		"there: %v. The sandbox was created without a usable agent (the provider binary could not serve as the agent "+
		"for this engine). Nothing was run. %s Then replace the sandbox (`terraform apply -replace=ADDRESS` with the "+
		"sandbox_instance's address).", t.object(), t.cfg.Driver, t.cfg.Name, err, agentRemedy))
	return false
}
