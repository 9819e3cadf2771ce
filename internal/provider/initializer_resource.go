package provider

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/initplan"
)

var (
	_ resource.Resource                   = (*initializerResource)(nil)
	_ resource.ResourceWithConfigure      = (*initializerResource)(nil)
	_ resource.ResourceWithValidateConfig = (*initializerResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*initializerResource)(nil)
	_ resource.ResourceWithImportState    = (*initializerResource)(nil)
)

const initializerKind = "Sandbox Initializer"

// NewInitializerResource is the sandbox_initializer resource.
func NewInitializerResource() resource.Resource { return &initializerResource{} }

// initializerResource holds no lock of its own: initializers of different
// sandboxes run in parallel, and those of one sandbox in the order their
// depends_on gives.
type initializerResource struct {
	configured
}

func (r *initializerResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_initializer"
}

func (r *initializerResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = initializerSchema(ctx)
}

// ValidateConfig expands the initializer as soon as its inputs are known,
// so a bad setting or path fails `terraform validate`, at its attribute.
func (r *initializerResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m initializerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() || !valuesKnown(ctx, m.inputs()...) {
		return
	}
	if m.Kind.IsNull() {
		m.Kind = types.StringValue(initplan.KindCustom)
	}
	_, diags := m.expand(ctx, initplan.DefaultName)
	resp.Diagnostics.Append(diags...)
}

// ModifyPlan turns a service found dead by the last refresh into a
// replacement, which runs on_destroy and starts it again.
func (r *initializerResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	if req.State.Raw.IsNull() {
		r.checkAgent(ctx, req, resp)
		return
	}
	var running types.Bool
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("service_running"), &running)...)
	if known(running) && !running.ValueBool() {
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("service_running"), types.BoolUnknown())...)
		resp.RequiresReplace = append(resp.RequiresReplace, path.Root("service_running"))
	}
}

// checkAgent refuses a new initializer that needs the sandbox agent when
// the provider cannot give one (agent_check.go).
func (r *initializerResource) checkAgent(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	var plan initializerModel
	if d := req.Plan.Get(ctx, &plan); d.HasError() || !valuesKnown(ctx, plan.inputs()...) {
		return // checked once its values are known; Create checks inside the sandbox too
	}
	p, d := plan.expand(ctx, "plan")
	if d.HasError() {
		return // ValidateConfig reports it
	}
	_, hasService := serviceOf(p)
	checkInitializerAgent(p.NeedsAgent(), hasService && known(plan.Service), &resp.Diagnostics)
}

func (r *initializerResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan initializerModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	ctx, cancel := withTimeout(ctx, plan.Timeouts.Create, defaultInitCreateTimeout, &resp.Diagnostics)
	defer cancel()
	if resp.Diagnostics.HasError() {
		return
	}
	t, ok := r.target(ctx, plan.Instance, &resp.Diagnostics)
	if !ok {
		return
	}
	plan.ID = types.StringValue(newInitializerID())
	p, diags := plan.expand(ctx, plan.ID.ValueString())
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() || !r.requireRunning(ctx, t, &resp.Diagnostics) {
		return
	}
	if p.NeedsAgent() && !requireAgentInside(ctx, t, &resp.Diagnostics) {
		return
	}
	ctx = tflog.SetField(ctx, "backend", t.cfg.Name)
	ctx = tflog.SetField(ctx, "instance", t.ref.Name)
	tflog.Debug(ctx, "running sandbox initializer", map[string]any{"kind": p.Kind, "steps": len(p.Steps), "id": plan.ID.ValueString()})
	r.run(ctx, t, p, &plan, resp)
}

// run executes the plan in two parts with state saved in between, so a
// readiness wait that times out never loses track of the started service.
// On any failure the state is kept: Terraform then marks the initializer
// tainted, and the next apply replaces it (on_destroy, then a fresh run).
func (r *initializerResource) run(ctx context.Context, t initTarget, p initplan.Plan, plan *initializerModel, resp *resource.CreateResponse) {
	pre, wait := splitAtWait(p)
	plan.ReadyAt, plan.ServiceLog, plan.ServiceRunning = types.StringNull(), types.StringNull(), types.BoolNull()
	svc, hasService := serviceOf(p)
	if hasService {
		plan.ServiceLog = types.StringValue(svc.LogPath)
	}
	res, err := initplan.Run(ctx, t.drv, t.ref.ID, pre)
	resp.Diagnostics.Append(plan.setResults(res.Steps)...)
	if err != nil {
		resp.Diagnostics.Append(runError(summary("Create", initializerKind), t, err, res.Steps))
		if hasService {
			plan.ServiceRunning = types.BoolValue(false) // never started, or failed to
		}
		resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
		return
	}
	if !hasService {
		resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
		return
	}
	plan.ServiceRunning = types.BoolValue(true)
	if resp.Diagnostics.Append(resp.State.Set(ctx, plan)...); resp.Diagnostics.HasError() {
		return
	}
	r.awaitReady(ctx, t, wait, svc, plan, resp)
}

// awaitReady polls the service's probe; state was saved before, and is
// saved again with ready_at, or with what the failure found.
func (r *initializerResource) awaitReady(ctx context.Context, t initTarget, wait initplan.Plan, svc initplan.Step, plan *initializerModel, resp *resource.CreateResponse) {
	waited, err := initplan.Run(ctx, t.drv, t.ref.ID, wait)
	if err != nil {
		resp.Diagnostics.Append(runError(summary("Create", initializerKind), t, err, nil))
		// The create deadline may have passed: probe on a short one of its own.
		pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		if state, _ := probeService(pctx, t.drv, t.ref.ID, svc); state == serviceGone {
			plan.ServiceRunning = types.BoolValue(false)
		}
		cancel()
	}
	plan.ReadyAt = timeValue(waited.ReadyAt)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
}

func (m *initializerModel) setResults(rs []initplan.Result) diag.Diagnostics {
	l, diags := resultsValue(rs)
	m.Results = l
	return diags
}

func (r *initializerResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state initializerModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ref, diags := InstanceFromHandle(ctx, state.Instance)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	// One shared list per backend per refresh (see ProviderData.Instances).
	insts, err := r.data.Instances(ctx, ref.Config)
	if err != nil {
		resp.Diagnostics.Append(driverError(summary("Read", initializerKind), ref.Config, fmt.Sprintf("listing instances to find %q", ref.Name), err))
		return
	}
	inst, ok := insts[ref.ID]
	if !ok {
		// Deleted, or replaced by a sandbox with another id: what ran is gone
		// with it, so the next plan runs the initializer again.
		tflog.Info(ctx, "the initializer's sandbox no longer exists; removing it from state", map[string]any{"backend": ref.Config.Name, "instance": ref.Name})
		resp.State.RemoveResource(ctx)
		return
	}
	if !inst.Running() || state.ServiceLog.IsNull() {
		return // a stopped sandbox is kept as it is; nothing to probe
	}
	r.refreshService(ctx, ref, &state, resp)
}

// refreshService records whether the service still runs. A probe that
// cannot run (agent missing, engine hiccup) changes nothing.
func (r *initializerResource) refreshService(ctx context.Context, ref InstanceRef, state *initializerModel, resp *resource.ReadResponse) {
	p, diags := state.expand(ctx, state.ID.ValueString())
	svc, hasService := serviceOf(p)
	if diags.HasError() || !hasService {
		return
	}
	drv, _, diags := r.data.Driver(ctx, ref.Backend)
	if diags.HasError() {
		resp.Diagnostics.Append(diags...)
		return
	}
	switch found, why := probeService(ctx, drv, ref.ID, svc); found {
	case serviceRunning:
		state.ServiceRunning = types.BoolValue(true)
	case serviceGone:
		tflog.Info(ctx, "the initializer's service is no longer running; the next plan replaces the initializer", map[string]any{"instance": ref.Name, "reason": why})
		state.ServiceRunning = types.BoolValue(false)
	default:
		tflog.Warn(ctx, "could not check the initializer's service", map[string]any{"instance": ref.Name, "reason": why})
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, state)...)
}

// Update only ever changes on_destroy, timeouts or the instance handle's
// connection settings: everything else requires replacement.
func (r *initializerResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan initializerModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *initializerResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state initializerModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	ctx, cancel := withTimeout(ctx, state.Timeouts.Delete, defaultInitDeleteTimeout, &resp.Diagnostics)
	defer cancel()
	if resp.Diagnostics.HasError() {
		return
	}
	t, ok := r.target(ctx, state.Instance, &resp.Diagnostics)
	if !ok {
		return
	}
	// The shared snapshot (at most a few seconds old) keeps a destroy of many
	// initializers to a few list calls; a sandbox deleted since then makes
	// on_destroy fail, which is only a warning.
	insts, err := r.data.Instances(ctx, t.cfg)
	if err != nil {
		resp.Diagnostics.Append(driverError(summary("Delete", initializerKind), t.cfg, "listing instances to find "+t.object(), err))
		return
	}
	inst, found := insts[t.ref.ID]
	if !found {
		return // the sandbox is gone, and everything the initializer did with it
	}
	p, diags := state.expand(ctx, state.ID.ValueString())
	if diags.HasError() {
		resp.Diagnostics.AddWarning("On-Destroy Commands Not Run", fmt.Sprintf("The initializer on %s could not be expanded again, so its on_destroy commands and service stop were skipped: %s", t.object(), diagSummaries(diags)))
		return
	}
	if !inst.Running() {
		if len(p.OnDestroy) > 0 {
			resp.Diagnostics.AddWarning("On-Destroy Commands Not Run", fmt.Sprintf("%s is %s, so the on_destroy commands of the initializer were skipped. Start it before destroying the initializer to run them.", t.object(), inst.Status))
		}
		return
	}
	r.teardown(ctx, t, p, resp)
}

// teardown runs on_destroy, then stops the service. Failures are warnings:
// a destroy must not get stuck on a cleanup command.
func (r *initializerResource) teardown(ctx context.Context, t initTarget, p initplan.Plan, resp *resource.DeleteResponse) {
	res, err := initplan.RunDestroy(ctx, t.drv, t.ref.ID, p)
	if err != nil {
		resp.Diagnostics.AddWarning("On-Destroy Command Failed",
			fmt.Sprintf("Initializer on %s: %v.%s\n\nThe initializer was destroyed anyway; clean up by hand if needed.", t.object(), err, stderrTail(res.Steps)))
	}
	if svc, ok := serviceOf(p); ok {
		if err := stopService(ctx, t.drv, t.ref.ID, svc); err != nil {
			resp.Diagnostics.AddWarning("Service Not Stopped",
				fmt.Sprintf("Initializer on %s: stopping its service %v failed: %v. It may still be running.", t.object(), svc.Command, err))
		}
	}
}

// ImportState refuses: an initializer records something that ran; there
// is nothing on the engine to find and adopt.
func (r *initializerResource) ImportState(_ context.Context, _ resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.AddError("Import Not Supported",
		"sandbox_initializer cannot be imported: it records commands that ran and a service that was started, which "+
			"cannot be read back from a sandbox. Add the resource to the configuration and apply: it runs again.")
}

// initTarget is the sandbox an initializer works on and its backend.
type initTarget struct {
	ref InstanceRef
	cfg driver.Config
	drv driver.Driver
}

// object names the sandbox and its backend for messages.
func (t initTarget) object() string {
	return fmt.Sprintf("instance %q of %s", t.ref.Name, backendLabel(t.cfg))
}

func (r *initializerResource) target(ctx context.Context, handle types.Object, diags *diag.Diagnostics) (initTarget, bool) {
	ref, d := InstanceFromHandle(ctx, handle)
	if diags.Append(d...); diags.HasError() {
		return initTarget{}, false
	}
	drv, cfg, d := r.data.Driver(ctx, ref.Backend)
	if diags.Append(d...); diags.HasError() {
		return initTarget{}, false
	}
	return initTarget{ref: ref, cfg: cfg, drv: drv}, true
}

// requireRunning fails early, and clearly, when the sandbox is gone or stopped.
func (r *initializerResource) requireRunning(ctx context.Context, t initTarget, diags *diag.Diagnostics) bool {
	insts, err := r.data.Instances(ctx, t.cfg)
	if err != nil {
		diags.Append(driverError(summary("Create", initializerKind), t.cfg, "listing instances to find "+t.object(), err))
		return false
	}
	inst, ok := insts[t.ref.ID]
	switch {
	case !ok:
		diags.AddAttributeError(path.Root("instance"), summary("Create", initializerKind),
			fmt.Sprintf("%s (id %s) does not exist. It was deleted or replaced outside this plan; apply again so its sandbox_instance is recreated first.", t.object(), t.ref.ID))
		return false
	case !inst.Running():
		diags.AddAttributeError(path.Root("instance"), summary("Create", initializerKind),
			fmt.Sprintf("%s is %s: an initializer runs its commands in a running sandbox. Set `running = true` on the sandbox_instance (or start it) and apply again.", t.object(), inst.Status))
		return false
	}
	return true
}

// runError is the diagnostic of a failed run: the step, command, exit code
// and cause from initplan, the end of the failing command's stderr, and
// what to do.
func runError(sum string, t initTarget, err error, steps []initplan.Result) diag.Diagnostic {
	adviceText := "Fix the command, the service or the image and apply again. The initializer is kept in state as " +
		"tainted: the next apply replaces it, running its on_destroy commands and then everything again."
	if errors.Is(err, driver.ErrUnavailable) || errors.Is(err, driver.ErrNotFound) || errors.Is(err, driver.ErrUnsupported) {
		adviceText = advice(t.cfg, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		adviceText = "The create timeout ran out; raise `timeouts.create` (default " + defaultInitCreateTimeout.String() + ") or `service.timeout`. " + adviceText
	}
	return diag.NewErrorDiagnostic(sum, fmt.Sprintf("Initializer on %s: %v.%s\n\n%s", t.object(), err, stderrTail(steps), adviceText))
}

// stderrTail shows the end of the last result's stderr when it failed.
func stderrTail(steps []initplan.Result) string {
	if len(steps) == 0 {
		return ""
	}
	last := steps[len(steps)-1]
	if last.ExitCode == 0 || strings.TrimSpace(last.Stderr) == "" {
		return ""
	}
	lines := strings.Split(strings.TrimRight(last.Stderr, "\n"), "\n")
	if len(lines) > 20 {
		lines = lines[len(lines)-20:]
	}
	return fmt.Sprintf("\n\nEnd of the stderr of %q (exit code %d):\n%s", last.Command, last.ExitCode, strings.Join(lines, "\n"))
}

func diagSummaries(diags diag.Diagnostics) string {
	var parts []string
	for _, d := range diags.Errors() {
		parts = append(parts, d.Summary()+": "+d.Detail())
	}
	return strings.Join(parts, "; ")
}

// newInitializerID is "init-" and 10 random characters; it names the
// service's files inside the sandbox, so two initializers never share them.
func newInitializerID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "init-" + string(b)
}
