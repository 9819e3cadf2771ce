package provider

// Helpers shared by the resources that live on a backend (images, volumes):
// the steps of their CRUD, import IDs that carry the backend, and labels read
// back from the engine.

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// objectFields are the attributes every object on a backend has; the models
// of images and volumes embed them.
type objectFields struct {
	ID         types.String `tfsdk:"id"`
	Backend    types.Object `tfsdk:"backend"`
	Name       types.String `tfsdk:"name"`
	Labels     types.Map    `tfsdk:"labels"`
	SourceHash types.String `tfsdk:"source_hash"`
}

func (f *objectFields) fields() *objectFields { return f }

// objectModel is a pointer to a model that embeds objectFields.
type objectModel[M any] interface {
	*M
	fields() *objectFields
}

// planObject is the ModifyPlan of an object on a backend. Once the backend
// is known, check reports what it cannot do and the ID is planned; hash
// fingerprints the local source, and a changed fingerprint plans a
// replacement.
func planObject[M any, P objectModel[M]](ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse,
	sep string, check func(driver.Config, P), hash func(P) types.String) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan M
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	f := P(&plan).fields()
	if cfg, ok := knownBackend(ctx, f.Backend, &resp.Diagnostics); ok {
		check(cfg, &plan)
		if !f.Name.IsUnknown() {
			f.ID = types.StringValue(objectID(cfg, sep, f.Name.ValueString()))
		}
	}
	f.SourceHash = hash(&plan)
	if resp.Diagnostics.HasError() {
		return
	}
	replaceOnSourceHash(ctx, req, resp, f.SourceHash)
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// stateObject reads an object's model from state and opens its backend's
// driver; ok is false once diags hold an error.
func stateObject[M any, P objectModel[M]](ctx context.Context, data *ProviderData, st tfsdk.State, diags *diag.Diagnostics) (m M, d driver.Driver, cfg driver.Config, ok bool) {
	if diags.Append(st.Get(ctx, &m)...); diags.HasError() {
		return m, nil, cfg, false
	}
	d, cfg, ok = data.openDriver(ctx, P(&m).fields().Backend, diags)
	return m, d, cfg, ok
}

// engineLabels are the labels the object is made with: the provider's, the
// user's, and the source hash if there is one.
func (f *objectFields) engineLabels(ctx context.Context, data *ProviderData, diags *diag.Diagnostics) map[string]string {
	labels := data.ObjectLabels(stringMap(ctx, f.Labels, diags))
	if h := f.SourceHash.ValueString(); h != "" {
		labels[driver.LabelSourceHash] = h
	}
	return labels
}

// openDriver is Driver that adds its diagnostics to diags; ok is false once
// diags hold an error.
func (p *ProviderData) openDriver(ctx context.Context, handle types.Object, diags *diag.Diagnostics) (driver.Driver, driver.Config, bool) {
	d, cfg, ds := p.Driver(ctx, handle)
	diags.Append(ds...)
	return d, cfg, !diags.HasError()
}

// foundForRead ends the inspect call of a Read: an object gone from the
// engine leaves state without an error, another failure is reported. It
// returns whether the Read goes on.
func foundForRead(ctx context.Context, resp *resource.ReadResponse, kind string, cfg driver.Config, object string, err error) bool {
	if driver.IsNotFound(err) {
		resp.State.RemoveResource(ctx)
		return false
	}
	if err != nil {
		resp.Diagnostics.Append(driverError(summary("Read", kind), cfg, object, err))
		return false
	}
	return true
}

// deleteFailed reports a failed delete; an object already gone is deleted.
func deleteFailed(diags *diag.Diagnostics, kind string, cfg driver.Config, object string, err error) {
	if err != nil && !driver.IsNotFound(err) {
		diags.Append(driverError(summary("Delete", kind), cfg, object, err))
	}
}

// updateFromPlan is the Update of a resource whose only in-place changes
// are recorded, not applied (the backend's connection settings, keep): the
// plan becomes the state.
func updateFromPlan[M any](ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan M
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

// replaceOnSourceHash plans a replacement when the planned source_hash
// differs from the one in state (none in state: imported, adopted as is).
func replaceOnSourceHash(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse, planned types.String) {
	if req.State.Raw.IsNull() {
		return
	}
	var prior types.String
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("source_hash"), &prior)...)
	if !prior.IsNull() && !planned.Equal(prior) {
		resp.RequiresReplace = append(resp.RequiresReplace, path.Root("source_hash"))
	}
}

// importedObject is an object named by an import ID, with its backend's
// handle and open driver.
type importedObject struct {
	handle types.Object
	name   string
	drv    driver.Driver
	cfg    driver.Config
}

// importObject parses `<backend import ID><sep><name>` and opens the
// backend's driver; ok is false once an error is reported.
func (p *ProviderData) importObject(ctx context.Context, id, sep string, diags *diag.Diagnostics) (importedObject, bool) {
	handle, name, ds := parseObjectImportID(ctx, id, sep, p.secrets())
	diags.Append(ds...)
	if diags.HasError() {
		return importedObject{}, false
	}
	d, cfg, ok := p.openDriver(ctx, handle, diags)
	return importedObject{handle: handle, name: name, drv: d, cfg: cfg}, ok
}

// fields are the state of an imported object: labels as given, the source
// hash as the engine recorded it.
func (o importedObject) fields(sep string, labels types.Map, engineLabels map[string]string) objectFields {
	return objectFields{ID: types.StringValue(objectID(o.cfg, sep, o.name)), Backend: o.handle, Name: types.StringValue(o.name),
		Labels: labels, SourceHash: sourceHashOrNull(engineLabels)}
}

// objectImportDoc documents the import ID of an object on a backend.
func objectImportDoc(sep string) string {
	return "Import ID: `<backend import ID>" + sep + "<name>`, where the backend import ID is the one of " +
		"`sandbox_backend` (e.g. `docker:gpu` or `docker:gpu:ssh://ubuntu@gpu-1:22?ssh_key_file=~/.ssh/id_ed25519`), " +
		"e.g. `local:dev" + sep + "data`."
}

// objectID is the state ID of an object named name on cfg's backend; it is
// also a valid import ID.
func objectID(cfg driver.Config, sep, name string) string {
	return backendID(cfg) + sep + name
}

// parseObjectImportID turns `<backend import ID><sep><name>` into the
// resolved backend handle and the object name. sep is '/' for volumes (as for
// instances) and '#' for images, whose names contain '/'.
func parseObjectImportID(ctx context.Context, id, sep string, secrets driver.Secrets) (types.Object, string, diag.Diagnostics) {
	var diags diag.Diagnostics
	i := strings.LastIndex(id, sep)
	if i <= 0 || i == len(id)-1 {
		diags.AddError("Invalid Import ID", fmt.Sprintf("The import ID %q has no `%s<name>` at its end. %s", id, sep, objectImportDoc(sep)))
		return types.ObjectNull(handleAttrTypes()), "", diags
	}
	cfg, diags := backendFromImportID(ctx, id[:i], secrets)
	if diags.HasError() {
		return types.ObjectNull(handleAttrTypes()), "", diags
	}
	h, d := HandleFromConfig(cfg)
	diags.Append(d...)
	return h, id[i+1:], diags
}

// importedLabels is the labels attribute after import: the engine's labels
// minus the provider's (see userLabels); none is null, like an unset attribute.
func importedLabels(engine, providerLabels map[string]string) types.Map {
	out := map[string]attr.Value{}
	for k, v := range userLabels(engine, providerLabels) {
		out[k] = types.StringValue(v)
	}
	if len(out) == 0 {
		return types.MapNull(types.StringType)
	}
	return types.MapValueMust(types.StringType, out)
}

// stringMap reads a map attribute; null and unknown give nil.
func stringMap(ctx context.Context, m types.Map, diags *diag.Diagnostics) map[string]string {
	if m.IsNull() || m.IsUnknown() {
		return nil
	}
	out := map[string]string{}
	diags.Append(m.ElementsAs(ctx, &out, false)...)
	return out
}

// sourceHashOrNull is the engine's record of a source hash, if any.
func sourceHashOrNull(labels map[string]string) types.String {
	if h := labels[driver.LabelSourceHash]; h != "" {
		return types.StringValue(h)
	}
	return types.StringNull()
}

const replaceUnlessImportedDoc = "Replaces the object when the source changes; an imported object (no source in state) is adopted."

// replaceUnlessImported replaces the object when a source attribute
// changes, except right after import, where state has no source to compare.
func replaceUnlessImported() planmodifier.Object {
	return objectplanmodifier.RequiresReplaceIf(func(_ context.Context, req planmodifier.ObjectRequest, resp *objectplanmodifier.RequiresReplaceIfFuncResponse) {
		resp.RequiresReplace = !req.StateValue.IsNull()
	}, replaceUnlessImportedDoc, replaceUnlessImportedDoc)
}

// replaceStringUnlessImported is replaceUnlessImported for a string source.
func replaceStringUnlessImported() planmodifier.String {
	return stringplanmodifier.RequiresReplaceIf(func(_ context.Context, req planmodifier.StringRequest, resp *stringplanmodifier.RequiresReplaceIfFuncResponse) {
		resp.RequiresReplace = !req.StateValue.IsNull()
	}, replaceUnlessImportedDoc, replaceUnlessImportedDoc)
}

// replaceMapUnlessImported is replaceUnlessImported for labels an import
// could not recover.
func replaceMapUnlessImported() planmodifier.Map {
	return mapplanmodifier.RequiresReplaceIf(func(_ context.Context, req planmodifier.MapRequest, resp *mapplanmodifier.RequiresReplaceIfFuncResponse) {
		resp.RequiresReplace = !req.StateValue.IsNull()
	}, replaceUnlessImportedDoc, replaceUnlessImportedDoc)
}
