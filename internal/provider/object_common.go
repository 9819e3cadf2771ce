package provider

// Helpers shared by the resources that live on a backend (images, volumes):
// import IDs that carry the backend, and labels read back from the engine.

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

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
