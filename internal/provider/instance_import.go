package provider

// Import of sandbox_instance. The ID is the backend's import ID, a slash and
// the instance name:
//
//	<driver>:<backend-name>[:<endpoint>][?<field>=<value>&...]/<instance-name>
//	docker:gpu:ssh://ubuntu@gpu-1:22?known_hosts_file=/root/.ssh/known_hosts/worker-0
//	local:dev/worker-0
//
// Instance names never contain '/', so the ID splits at its last '/'. The
// backend part is resolved exactly as sandbox_backend resolves its
// configuration, so the imported `backend` equals sandbox_backend.X.handle.

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

const instanceImportHelp = "Use `<backend-import-id>/<instance-name>`, where the backend import ID is " +
	"`<driver>:<backend-name>[:<endpoint>][?<field>=<value>&...]` as for sandbox_backend, e.g. " +
	"`docker:gpu:unix:///var/run/docker.sock/worker-0` or `local:dev/worker-0`."

func (r *instanceResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	i := strings.LastIndex(req.ID, "/")
	if i <= 0 || i == len(req.ID)-1 {
		resp.Diagnostics.AddError("Invalid Sandbox Instance Import ID", fmt.Sprintf("The import ID %q has no instance name after a '/'.\n\n%s", req.ID, instanceImportHelp))
		return
	}
	cfg, diags := backendConfigFromImportID(ctx, req.ID[:i], r.data.secrets())
	if resp.Diagnostics.Append(diags...); resp.Diagnostics.HasError() {
		return
	}
	name := req.ID[i+1:]
	r.data.InvalidateInstances(cfg)
	insts, err := r.data.Instances(ctx, cfg)
	if err != nil {
		resp.Diagnostics.Append(driverError(summary("Import", instanceKind), cfg, fmt.Sprintf("listing instances to find %q", name), err))
		return
	}
	inst, ok := findByName(insts, name)
	if !ok {
		resp.Diagnostics.AddError(summary("Import", instanceKind), fmt.Sprintf("%s has no instance named %q managed by this provider.\n\n%s", backendLabel(cfg), name, instanceImportHelp))
		return
	}
	backend, diags := HandleFromConfig(cfg)
	resp.Diagnostics.Append(diags...)
	// The observed configuration needs an inspect (List does not carry it).
	if drv, _, d := r.data.Driver(ctx, backend); !d.HasError() {
		if full, err := drv.InspectInstance(ctx, inst.ID); err == nil {
			inst.Spec = full.Spec
		}
	}
	resp.Diagnostics.Append(r.importedAttributes(ctx, backend, name, inst, resp)...)
}

// importedAttributes sets what the engine reports: identity, labels, ports,
// and where the driver observes it (docker, local) command, env, workdir,
// user, network, volumes, limits and lifetime. What it cannot report (file
// contents, disk, security) stays null or default; the next plan shows them
// if the configuration sets them.
func (r *instanceResource) importedAttributes(ctx context.Context, backend types.Object, name string, inst driver.Instance, resp *resource.ImportStateResponse) diag.Diagnostics {
	var diags diag.Diagnostics
	labels := userLabels(inst.Labels, r.data.Labels)
	labelsValue := types.MapNull(types.StringType)
	if len(labels) > 0 {
		lv, d := types.MapValueFrom(ctx, types.StringType, labels)
		diags.Append(d...)
		labelsValue = lv
	}
	ports, d := portsValue(portsFromLabel(inst.Labels[driver.LabelPorts]))
	diags.Append(d...)
	values := map[string]attr.Value{
		"id":       types.StringValue(inst.ID),
		"backend":  backend,
		"name":     types.StringValue(name),
		"image":    types.StringValue(inst.Image),
		"type":     types.StringValue(orDefault(inst.Type, driver.TypeContainer)),
		"network":  types.StringValue(driver.NetworkIsolated),
		"running":  types.BoolValue(importedRunning(inst.Status)),
		"labels":   labelsValue,
		"ports":    ports,
		"security": defaultSecurity(),
	}
	observed, d := importedSpecValues(ctx, inst.Spec, inst.Labels)
	diags.Append(d...)
	for k, v := range observed {
		values[k] = v
	}
	for k, v := range values {
		diags.Append(resp.State.SetAttribute(ctx, path.Root(k), v)...)
	}
	return diags
}

// importedRunning is the `running` an import records: whether the sandbox
// runs now. Stopped, never started and expired ones do not (an expired one
// cannot run again); only a status the driver could not classify counts as
// running, so the next apply does not start something that may run.
func importedRunning(status string) bool {
	switch status {
	case driver.StatusStopped, driver.StatusCreated, driver.StatusExpired:
		return false
	}
	return true
}

// backendConfigFromImportID resolves a sandbox_backend import ID into the
// config its handle records.
func backendConfigFromImportID(ctx context.Context, id string, secrets driver.Secrets) (driver.Config, diag.Diagnostics) {
	var diags diag.Diagnostics
	drv, name, block, err := parseBackendImportID(id)
	if err != nil {
		diags.AddError("Invalid Sandbox Instance Import ID", err.Error()+"\n\n"+instanceImportHelp)
		return driver.Config{}, diags
	}
	obj, d := types.ObjectValue(handleBlockAttrTypes(drv), block)
	diags.Append(d...)
	inner, err := objectToRaw(obj)
	var cfg driver.Config
	if err == nil {
		err = jsonRoundTrip(map[string]any{"driver": drv, "name": name, drv: inner}, &cfg)
	}
	if err != nil {
		diags.AddError("Invalid Sandbox Instance Import ID", err.Error()+"\n\n"+instanceImportHelp)
		return cfg, diags
	}
	resolved, ok := resolveInto(ctx, cfg, secrets, &diags)
	if !ok {
		return cfg, diags
	}
	return resolved, diags
}
