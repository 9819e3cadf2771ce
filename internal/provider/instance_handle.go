package provider

// The instance handle: sandbox_instance.X.handle, the backend handle plus
// the instance's identity. sandbox_initializer takes it as `instance`, so
// these functions are the single source of its type, its schema (read-only
// on sandbox_instance, input elsewhere) and its conversions.

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// instanceHandleAttrTypes is the object type of an instance handle.
func instanceHandleAttrTypes() map[string]attr.Type {
	return map[string]attr.Type{
		"backend": types.ObjectType{AttrTypes: handleAttrTypes()},
		"id":      types.StringType,
		"name":    types.StringType,
		"type":    types.StringType,
	}
}

// instanceHandleAttributes builds the nested attributes of an instance
// handle: computed=true for sandbox_instance.handle, false for an input
// (`instance = sandbox_instance.X.handle`) where every field is required.
func instanceHandleAttributes(computed bool) map[string]schema.Attribute {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: computed, Required: !computed, Description: desc}
	}
	return map[string]schema.Attribute{
		"backend": schema.SingleNestedAttribute{
			Computed: computed, Required: !computed,
			Description: "The backend's handle.",
			Attributes:  handleAttributes(computed),
		},
		"id":   str("Engine ID of the sandbox."),
		"name": str("Name of the sandbox."),
		"type": str("`container` or `vm`."),
	}
}

// instanceHandleValue builds the handle of an instance of backend.
func instanceHandleValue(backend types.Object, id, name, typ string) (types.Object, diag.Diagnostics) {
	return types.ObjectValue(instanceHandleAttrTypes(), map[string]attr.Value{
		"backend": backend,
		"id":      types.StringValue(id),
		"name":    types.StringValue(name),
		"type":    types.StringValue(typ),
	})
}

// InstanceRef is a decoded instance handle.
type InstanceRef struct {
	Backend types.Object // the backend handle, for ProviderData.Driver
	Config  driver.Config
	ID      string
	Name    string
	Type    string
}

// InstanceFromHandle decodes an instance handle; unknown or malformed
// handles give an error diagnostic.
func InstanceFromHandle(ctx context.Context, h types.Object) (InstanceRef, diag.Diagnostics) {
	var ref InstanceRef
	var diags diag.Diagnostics
	if h.IsNull() || h.IsUnknown() {
		diags.AddError("Instance Handle Not Known", "The instance handle is not known yet; it is known once its sandbox_instance is created.")
		return ref, diags
	}
	var m struct {
		Backend types.Object `tfsdk:"backend"`
		ID      types.String `tfsdk:"id"`
		Name    types.String `tfsdk:"name"`
		Type    types.String `tfsdk:"type"`
	}
	if diags.Append(h.As(ctx, &m, basetypes.ObjectAsOptions{})...); diags.HasError() {
		return ref, diags
	}
	cfg, d := ConfigFromHandle(ctx, m.Backend)
	diags.Append(d...)
	ref = InstanceRef{Backend: m.Backend, Config: cfg, ID: m.ID.ValueString(), Name: m.Name.ValueString(), Type: m.Type.ValueString()}
	return ref, diags
}
