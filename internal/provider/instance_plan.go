package provider

// Plan-time behaviour of sandbox_instance: capability checks against the
// backend's static capabilities, and the start/stop plan derived from
// `running` and the observed `status`.

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

func (r *instanceResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	var plan instanceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// A plan equal to the refreshed state changes nothing the checks look at:
	// they passed when it was applied, and an empty re-plan of a fleet
	// should not pay for them (nor for decoding the state a second time).
	unchanged := !req.State.Raw.IsNull() && req.Plan.Raw.Equal(req.State.Raw)
	if !unchanged {
		checkCapabilities(ctx, plan, resp)
		if !resp.Diagnostics.HasError() {
			r.checkEngineLimits(ctx, plan, resp) // what this engine lacks (instance_engine_check.go)
		}
		// A create: Terraform plans a replacement's create again with no
		// prior state, and shows that plan's errors.
		if req.State.Raw.IsNull() && known(plan.Backend) {
			if cfg, d := ConfigFromHandle(ctx, plan.Backend); !d.HasError() {
				spec, _ := plan.toSpec(ctx)
				checkInstanceAgent(spec, cfg, &resp.Diagnostics)
			}
		}
	}
	if req.State.Raw.IsNull() {
		return // create: every computed value is known after apply
	}
	state := plan
	if !unchanged {
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if resp.Diagnostics.HasError() {
			return
		}
	}
	before := plan
	planRunState(&plan, state, &resp.Diagnostics)
	planHandle(&plan, state, &resp.Diagnostics)
	if !sameObserved(&before, &plan) {
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
	}
}

// planHandle follows an in-place change of the backend's connection settings
// (a newly trusted host key, another key file, ...): the instance's handle
// carries the new backend handle, so it is known in the plan.
func planHandle(plan *instanceModel, state instanceModel, diags *diag.Diagnostics) {
	if !known(plan.Backend) || plan.Backend.Equal(state.Backend) {
		return
	}
	h, d := instanceHandleValue(plan.Backend, state.ID.ValueString(), state.Name.ValueString(), state.Type.ValueString())
	diags.Append(d...)
	plan.Handle = h
	plan.Endpoints = types.MapUnknown(types.StringType) // e.g. a new advertise_host
}

// checkCapabilities reports, at the attribute that asks for it, what the
// backend cannot do. It needs only the handle's driver and settings, so it
// works on the first plan, before the backend exists.
func checkCapabilities(ctx context.Context, plan instanceModel, resp *resource.ModifyPlanResponse) {
	if !known(plan.Backend) {
		return
	}
	cfg, diags := ConfigFromHandle(ctx, plan.Backend)
	if diags.HasError() {
		// A handle written by hand with a key its driver lacks; one with
		// values not known yet is checked once they are.
		for _, d := range diags.Errors() {
			if d.Summary() == invalidHandleSummary {
				resp.Diagnostics.AddAttributeError(path.Root("backend"), d.Summary(), d.Detail())
			}
		}
		return
	}
	spec, _ := plan.toSpec(ctx) // values that do not convert are reported by validators
	warnRelaxedSecurity(spec.Security, &resp.Diagnostics)
	for _, p := range driver.CheckInstance(cfg, spec) {
		if p.Warning {
			resp.Diagnostics.AddAttributeWarning(path.Root(p.Attribute), p.Summary, p.Detail)
		} else {
			resp.Diagnostics.AddAttributeError(path.Root(p.Attribute), p.Summary, p.Detail)
		}
	}
}

// warnRelaxedSecurity names, in every plan that creates or changes a
// sandbox, what makes it unfit for untrusted code.
func warnRelaxedSecurity(s driver.Security, diags *diag.Diagnostics) {
	at := path.Root("security")
	if s.Privileged {
		diags.AddAttributeWarning(at.AtName("privileged"), "Privileged Sandbox",
			"`privileged = true` gives the sandbox every capability and the host's devices: code inside can take over "+
				"the host. Use it only for code you trust, never for untrusted code.")
	}
	if len(s.CapAdd) > 0 {
		diags.AddAttributeWarning(at.AtName("capabilities").AtName("add"), "Capabilities Added to a Sandbox",
			fmt.Sprintf("The sandbox gets %s beyond the engine's default set, which widens what code inside can do to "+
				"the kernel and the host. Add a capability only for code you trust.", strings.Join(s.CapAdd, ", ")))
	}
}

// planRunState plans the start or stop that `running` asks for. `running` is
// the user's wish and `status` what was observed: a sandbox stopped outside
// Terraform is started by an in-place update, never replaced. When nothing
// is to start or stop, the observed values are kept so that an update of
// limits does not show them as unknown.
func planRunState(plan *instanceModel, state instanceModel, diags *diag.Diagnostics) {
	status := state.Status.ValueString()
	want := boolOr(plan.Running, true)
	if want && status == driver.StatusExpired {
		diags.AddAttributeWarning(path.Root("status"), "Sandbox Expired",
			"The sandbox "+state.Name.ValueString()+" reached the end of its `lifetime` and was stopped; it is kept, not restarted. "+
				"Run `terraform apply -replace=ADDRESS` with this sandbox_instance's address (e.g. `sandbox_instance.NAME` or `sandbox_instance.NAME[0]`) "+
				"for a fresh one, or destroy it.")
	}
	exited := status == driver.StatusStopped && known(state.ExitCode)
	if want && exited {
		diags.AddAttributeWarning(path.Root("status"), "Sandbox Command Exited",
			fmt.Sprintf("The command of the sandbox %s exited with code %d by itself; `running = true` means started by apply, "+
				"so it is kept stopped, not restarted. Run `terraform apply -replace=ADDRESS` with this sandbox_instance's address "+
				"(e.g. `sandbox_instance.NAME`) to run it again, or destroy it.", state.Name.ValueString(), state.ExitCode.ValueInt64()))
	}
	changes := (want && status != driver.StatusRunning && status != driver.StatusExpired && !exited) ||
		(!want && status == driver.StatusRunning)
	if changes {
		plan.Status = types.StringUnknown()
		plan.IPAddress = types.StringUnknown()
		plan.Endpoints = types.MapUnknown(types.StringType)
		plan.ExitCode = types.Int64Unknown()
	} else {
		plan.Status, plan.IPAddress, plan.Endpoints, plan.ExitCode = state.Status, state.IPAddress, state.Endpoints, state.ExitCode
	}
}
