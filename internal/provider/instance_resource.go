package provider

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

var (
	_ resource.Resource                = (*instanceResource)(nil)
	_ resource.ResourceWithConfigure   = (*instanceResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*instanceResource)(nil)
	_ resource.ResourceWithImportState = (*instanceResource)(nil)
)

const (
	instanceKind         = "Sandbox Instance"
	defaultCreateTimeout = 10 * time.Minute
	defaultUpdateTimeout = 5 * time.Minute
	defaultDeleteTimeout = 5 * time.Minute
	// stopGrace is how long a stop waits for the processes to exit on SIGTERM.
	stopGrace = 10 * time.Second
)

// NewInstanceResource is the sandbox_instance resource.
func NewInstanceResource() resource.Resource { return &instanceResource{} }

type instanceResource struct {
	configured
}

func (r *instanceResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_instance"
}

func (r *instanceResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = instanceSchema(ctx)
}

func (r *instanceResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan instanceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	ctx, cancel := withTimeout(ctx, plan.Timeouts.Create, defaultCreateTimeout, &resp.Diagnostics)
	defer cancel()
	if resp.Diagnostics.HasError() {
		return
	}
	drv, cfg, diags := r.data.Driver(ctx, plan.Backend)
	resp.Diagnostics.Append(diags...)
	if !known(plan.Name) {
		plan.Name = types.StringValue(generatedName())
	}
	spec, diags := plan.toSpec(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	spec.Labels = driver.ObjectLabels(cfg.Name, r.data.Labels, spec.Labels)
	spec.Labels[driver.LabelName] = spec.Name
	literalLabels(plan, spec.Labels) // instance_import_spec.go
	ctx = tflog.SetField(ctx, "backend", cfg.Name)
	ctx = tflog.SetField(ctx, "instance", spec.Name)
	tflog.Debug(ctx, "creating sandbox instance", map[string]any{"image": spec.Image, "type": spec.Type})

	// CreateInstance is the only long wait; it removes what it created on
	// error. Should an object remain anyway (the deadline hit during the
	// clean-up), it is recorded in state: Terraform taints it, and destroys
	// it on the next apply, instead of losing track of it.
	inst, err := drv.CreateInstance(ctx, spec)
	if err != nil {
		resp.Diagnostics.Append(driverAttributeError(path.Root("name"), summary("Create", instanceKind), cfg, fmt.Sprintf("creating instance %q", spec.Name), err))
		if !errors.Is(err, driver.ErrAlreadyExists) {
			r.recordLeftover(ctx, cfg, &plan, resp)
		}
		return
	}
	resp.Diagnostics.Append(plan.observe(inst)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// recordLeftover puts an instance left behind by a failed create into state.
func (r *instanceResource) recordLeftover(ctx context.Context, cfg driver.Config, plan *instanceModel, resp *resource.CreateResponse) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	r.data.InvalidateInstances(cfg)
	insts, err := r.data.Instances(ctx, cfg)
	if err != nil {
		return
	}
	inst, ok := findByName(insts, plan.Name.ValueString())
	if !ok {
		return
	}
	tflog.Warn(ctx, "a failed create left an instance behind; recording it so it is destroyed", map[string]any{"id": inst.ID})
	resp.Diagnostics.Append(plan.observe(inst)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, plan)...)
}

func (r *instanceResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state instanceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	gone, changed, diags := r.data.refreshInstance(ctx, &state)
	resp.Diagnostics.Append(diags...)
	switch {
	case resp.Diagnostics.HasError():
	case gone:
		tflog.Info(ctx, "sandbox instance no longer exists; removing it from state", map[string]any{"instance": state.Name.ValueString(), "id": state.ID.ValueString()})
		resp.State.RemoveResource(ctx)
	case changed:
		resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
	}
}

// refreshInstance observes state's sandbox in its backend's shared list (one
// list per backend per refresh, not an inspect per instance) and reports
// whether it is gone or whether any observed value changed. Read and the
// server's fast Read (server.go) both use it, so they cannot disagree.
func (p *ProviderData) refreshInstance(ctx context.Context, state *instanceModel) (gone, changed bool, diags diag.Diagnostics) {
	cfg, d := ConfigFromHandle(ctx, state.Backend)
	diags.Append(d...)
	if diags.HasError() {
		return false, false, diags
	}
	insts, err := p.Instances(ctx, cfg)
	if err != nil {
		diags.Append(driverError(summary("Read", instanceKind), cfg, fmt.Sprintf("listing instances for %q", state.Name.ValueString()), err))
		return false, false, diags
	}
	inst, ok := insts[state.ID.ValueString()]
	if !ok {
		return true, false, diags
	}
	// A stopped or expired sandbox stays in state: only its status changes.
	before := *state
	diags.Append(state.observe(inst)...)
	return false, !sameObserved(&before, state), diags
}

func (r *instanceResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, state instanceModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := withTimeout(ctx, plan.Timeouts.Update, defaultUpdateTimeout, &resp.Diagnostics)
	defer cancel()
	drv, cfg, diags := r.data.Driver(ctx, plan.Backend)
	resp.Diagnostics.Append(diags...)
	spec, diags := plan.toSpec(ctx)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	id, object := state.ID.ValueString(), fmt.Sprintf("instance %q", state.Name.ValueString())
	fail := func(at, action string, err error) {
		resp.Diagnostics.Append(driverAttributeError(path.Root(at), summary("Update", instanceKind), cfg, action+" "+object, err))
		// Keep the prior state: the next plan proposes what did not happen.
		resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
	}
	status := state.Status.ValueString()
	exited := status == driver.StatusStopped && known(state.ExitCode) // ended by itself: kept stopped (instance_plan.go)
	starting := spec.Running && status != driver.StatusRunning && status != driver.StatusExpired && !exited
	// Limits change after a start rather than before it: Podman changes the
	// limits of running containers only (internal/driver/docker/podman.go).
	updateLimits := func() bool {
		limits := driver.Limits{CPUs: spec.CPUs, MemoryBytes: spec.MemoryBytes, PidsLimit: spec.PidsLimit}
		if err := drv.UpdateInstance(ctx, id, limits); err != nil {
			fail("memory", "changing the limits of", err)
			return false
		}
		return true
	}
	if limitsChanged(plan, state) && !starting && !updateLimits() {
		return
	}
	switch {
	case starting:
		if err := drv.StartInstance(ctx, id); err != nil {
			fail("running", "starting", err)
			return
		}
		if limitsChanged(plan, state) && !updateLimits() {
			return
		}
	case !spec.Running && status == driver.StatusRunning:
		if err := drv.StopInstance(ctx, id, stopGrace); err != nil {
			fail("running", "stopping", err)
			return
		}
	}
	inst, err := drv.InspectInstance(ctx, id)
	if err != nil {
		fail("id", "inspecting", err)
		return
	}
	resp.Diagnostics.Append(plan.observe(inst)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// limitsChanged compares what the user wrote for the in-place limits.
func limitsChanged(plan, state instanceModel) bool {
	return !plan.CPUs.Equal(state.CPUs) || !plan.Memory.Equal(state.Memory) || !plan.PidsLimit.Equal(state.PidsLimit)
}

func (r *instanceResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state instanceModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	ctx, cancel := withTimeout(ctx, state.Timeouts.Delete, defaultDeleteTimeout, &resp.Diagnostics)
	defer cancel()
	if resp.Diagnostics.HasError() {
		return
	}
	drv, cfg, ok := r.data.openDriver(ctx, state.Backend, &resp.Diagnostics)
	if !ok {
		return
	}
	err := drv.DeleteInstance(ctx, state.ID.ValueString())
	deleteFailed(&resp.Diagnostics, instanceKind, cfg, fmt.Sprintf("deleting instance %q", state.Name.ValueString()), err)
}

// withTimeout bounds ctx by a `timeouts` value (plan.Timeouts.Create, ...),
// def when it is unset, and adds its diagnostics to diags.
func withTimeout(ctx context.Context, timeout func(context.Context, time.Duration) (time.Duration, diag.Diagnostics), def time.Duration, diags *diag.Diagnostics) (context.Context, context.CancelFunc) {
	d, ds := timeout(ctx, def)
	diags.Append(ds...)
	return context.WithTimeout(ctx, d)
}

// findByName finds an instance by the name the user gave it.
func findByName(insts map[string]driver.Instance, name string) (driver.Instance, bool) {
	for _, in := range insts {
		if in.Name == name || in.Labels[driver.LabelName] == name {
			return in, true
		}
	}
	return driver.Instance{}, false
}

// generatedName is the default name: "sandbox-" and 8 random characters.
func generatedName() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "sandbox-" + string(b)
}
