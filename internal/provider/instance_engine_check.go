package provider

// Plan-time check of an instance's limits against what its engine reports.
// checkCapabilities (instance_plan.go) knows only what a driver can do by
// construction; an engine of that driver may still lack a limit: Podman
// rootless on cgroup v1 sets none, a Podman or Docker host without a cgroup
// controller cannot set that one, Docker's disk quota needs xfs with pquota.
// Their driver reports that in Info's capabilities (sandbox_backend's
// `capabilities`), and this check turns it into a plan error at the
// attribute. It only runs when the instance sets such a limit, and only
// when the engine answers within engineCheckTimeout: an engine that does
// not answer is reported by apply, as before. It covers the docker driver
// (Docker and Podman engines) and the local one (whose Info is read from
// this host: limits need root and cgroups); other drivers refuse such
// limits at create. For incus it checks `type = "vm"` against the server's
// VM support (checkEngineVMs).

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// engineCheckTimeout bounds the Info call a plan may make.
const engineCheckTimeout = 5 * time.Second

func (r *instanceResource) checkEngineLimits(ctx context.Context, plan instanceModel, resp *resource.ModifyPlanResponse) {
	if r.data == nil || !known(plan.Backend) {
		return
	}
	r.checkEngineVMs(ctx, plan, resp)
	if cfg, diags := ConfigFromHandle(ctx, plan.Backend); diags.HasError() || (cfg.Driver != driver.Docker && cfg.Driver != driver.Local) {
		return
	}
	spec, diags := plan.toSpec(ctx)
	if diags.HasError() {
		return
	}
	limits := []struct {
		attr, capability string
		set              bool
	}{
		{"cpus", driver.CapCPULimit, spec.CPUs != 0},
		{"memory", driver.CapMemoryLimit, spec.MemoryBytes != 0},
		{"pids_limit", driver.CapPidsLimit, spec.PidsLimit > 0},
		{"disk", driver.CapDiskLimit, spec.DiskBytes != 0},
	}
	wanted := false
	for _, l := range limits {
		wanted = wanted || l.set
	}
	if !wanted {
		return
	}
	d, cfg, diags := r.data.Driver(ctx, plan.Backend)
	if diags.HasError() {
		return
	}
	static := driver.Info{Capabilities: driver.StaticCapabilities(cfg.Driver, cfg)}
	ictx, cancel := context.WithTimeout(ctx, engineCheckTimeout)
	defer cancel()
	info, err := d.Info(ictx)
	if err != nil || len(info.Capabilities) == 0 {
		tflog.Debug(ctx, "engine capabilities not checked at plan time", map[string]any{"backend": cfg.Name, "error": err})
		return
	}
	for _, l := range limits {
		// What the driver cannot do at all is reported by checkCapabilities.
		if l.set && static.Has(l.capability) && !info.Has(l.capability) {
			resp.Diagnostics.AddAttributeError(path.Root(l.attr), "Limit Not Supported by This Engine",
				"The "+cfg.Driver+" backend \""+cfg.Name+"\" runs on "+info.EngineVersion+", which cannot enforce `"+l.attr+
					"` (its capabilities lack \""+l.capability+"\"; see sandbox_backend.capabilities). "+
					"Remove the limit, or use an engine that supports it.")
		}
	}
}

// checkEngineVMs: `type = "vm"` on an Incus server without the qemu driver
// is a plan error at `type` when the server answers (its capabilities lack
// "vms"); when it does not answer, CreateInstance refuses with the same
// reason at apply.
func (r *instanceResource) checkEngineVMs(ctx context.Context, plan instanceModel, resp *resource.ModifyPlanResponse) {
	if plan.Type.ValueString() != driver.TypeVM {
		return
	}
	if cfg, diags := ConfigFromHandle(ctx, plan.Backend); diags.HasError() || cfg.Driver != driver.Incus {
		return
	}
	d, cfg, diags := r.data.Driver(ctx, plan.Backend)
	if diags.HasError() {
		return
	}
	ictx, cancel := context.WithTimeout(ctx, engineCheckTimeout)
	defer cancel()
	info, err := d.Info(ictx)
	if err != nil || len(info.Capabilities) == 0 {
		tflog.Debug(ctx, "VM support not checked at plan time", map[string]any{"backend": cfg.Name, "error": err})
		return
	}
	if !info.Has(driver.CapVMs) {
		resp.Diagnostics.AddAttributeError(path.Root("type"), "Virtual Machines Not Supported by This Server",
			"The incus backend \""+cfg.Name+"\" runs on Incus "+info.EngineVersion+", which cannot run virtual machines "+
				"(its instance drivers lack qemu, or the host lacks KVM; sandbox_backend.capabilities has no \"vms\"). "+
				"Use `type = \"container\"`, or a backend on a server with VM support.")
	}
}
