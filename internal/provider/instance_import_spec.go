package provider

// What an import reads back of a sandbox's configuration from the engine
// (driver.Instance.Spec, from InspectInstance), so that importing a sandbox
// and applying its configuration plans nothing. File contents cannot be
// read back: `files` stays null (see the resource's description).

import (
	"context"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/units"
)

var mountAttrTypes = map[string]attr.Type{"volume": types.StringType, "target": types.StringType, "read_only": types.BoolType}

// importedSpecValues are the attributes an observed spec gives; values the
// engine applied by default (the pids limit, the image's command) stay null.
func importedSpecValues(ctx context.Context, spec *driver.InstanceSpec, labels map[string]string) (map[string]attr.Value, diag.Diagnostics) {
	var diags diag.Diagnostics
	out := map[string]attr.Value{}
	if spec == nil {
		return out, diags
	}
	if len(spec.Command) > 0 {
		v, d := types.ListValueFrom(ctx, types.StringType, spec.Command)
		diags.Append(d...)
		out["command"] = v
	}
	if len(spec.Env) > 0 {
		v, d := types.MapValueFrom(ctx, types.StringType, spec.Env)
		diags.Append(d...)
		out["env"] = v
	}
	if spec.Workdir != "" {
		out["workdir"] = types.StringValue(spec.Workdir)
	}
	if spec.User != "" {
		out["user"] = types.StringValue(spec.User)
	}
	if spec.Network != "" {
		out["network"] = types.StringValue(spec.Network)
	}
	if len(spec.Ports) > 0 {
		v, d := portsValue(spec.Ports)
		diags.Append(d...)
		out["ports"] = v
	}
	if len(spec.Mounts) > 0 {
		elems := make([]attr.Value, 0, len(spec.Mounts))
		for _, m := range spec.Mounts {
			elems = append(elems, types.ObjectValueMust(mountAttrTypes, map[string]attr.Value{
				"volume": types.StringValue(m.Volume), "target": types.StringValue(m.Target), "read_only": types.BoolValue(m.ReadOnly)}))
		}
		v, d := types.ListValue(types.ObjectType{AttrTypes: mountAttrTypes}, elems)
		diags.Append(d...)
		out["volumes"] = v
	}
	if spec.CPUs > 0 {
		out["cpus"] = types.Float64Value(spec.CPUs)
	}
	if spec.MemoryBytes > 0 {
		// The size as written when it still matches (an in-place change
		// leaves the label behind), else plain bytes.
		mem := strconv.FormatInt(spec.MemoryBytes, 10)
		if lit := labels[driver.LabelMemory]; lit != "" {
			if b, err := units.ParseSize(lit); err == nil && b == spec.MemoryBytes {
				mem = lit
			}
		}
		out["memory"] = types.StringValue(mem)
	}
	if spec.PidsLimit > 0 && spec.PidsLimit != driver.DefaultPidsLimit {
		out["pids_limit"] = types.Int64Value(spec.PidsLimit)
	}
	if lit := labels[driver.LabelLifetime]; lit != "" {
		out["lifetime"] = types.StringValue(lit)
	} else if spec.Lifetime > 0 {
		out["lifetime"] = types.StringValue(spec.Lifetime.String())
	}
	return out, diags
}

// literalLabels records what the user wrote for settings the engine keeps
// only in another form (a duration, a size), so an import reads them back
// as written.
func literalLabels(m instanceModel, labels map[string]string) {
	if known(m.Lifetime) {
		labels[driver.LabelLifetime] = m.Lifetime.ValueString()
	}
	if known(m.Memory) {
		labels[driver.LabelMemory] = m.Memory.ValueString()
	}
}
