package provider

// Plan modifiers for replace-only collections whose spelling can change
// without changing what the engine runs: a map written as {} or left out,
// a list of named ports in another order. Such a change is an in-place
// update (state follows the configuration), never a replacement.

import (
	"context"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/listplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

const (
	replaceMapDoc       = "A change replaces the resource; an empty map and no map are the same."
	replaceUnorderedDoc = "A change replaces the resource; the order of the elements does not matter."
)

// replaceBoolUnlessDefault is RequiresReplace, except between null and def:
// `internal = false` written out or left out (as after an import) is the
// same network.
func replaceBoolUnlessDefault(def bool) planmodifier.Bool {
	doc := "A change replaces the resource; leaving it out is the same as its default."
	return boolplanmodifier.RequiresReplaceIf(func(_ context.Context, req planmodifier.BoolRequest, resp *boolplanmodifier.RequiresReplaceIfFuncResponse) {
		eff := func(v types.Bool) bool {
			if v.IsNull() {
				return def
			}
			return v.ValueBool()
		}
		resp.RequiresReplace = req.PlanValue.IsUnknown() || eff(req.StateValue) != eff(req.PlanValue)
	}, doc, doc)
}

// replaceMapUnlessEmpty is RequiresReplace, except between null and {}.
func replaceMapUnlessEmpty() planmodifier.Map {
	return mapplanmodifier.RequiresReplaceIf(func(_ context.Context, req planmodifier.MapRequest, resp *mapplanmodifier.RequiresReplaceIfFuncResponse) {
		resp.RequiresReplace = !emptyMap(req.StateValue) || !emptyMap(req.PlanValue)
	}, replaceMapDoc, replaceMapDoc)
}

func emptyMap(v types.Map) bool {
	return v.IsNull() || (!v.IsUnknown() && len(v.Elements()) == 0)
}

// replaceListUnlessReordered is RequiresReplace, except when the list holds
// the same elements in another order (or is null instead of empty).
func replaceListUnlessReordered() planmodifier.List {
	return listplanmodifier.RequiresReplaceIf(func(ctx context.Context, req planmodifier.ListRequest, resp *listplanmodifier.RequiresReplaceIfFuncResponse) {
		resp.RequiresReplace = !sameElements(ctx, req.StateValue, req.PlanValue)
	}, replaceUnorderedDoc, replaceUnorderedDoc)
}

// sameElements compares two fully known lists as multisets.
func sameElements(ctx context.Context, a, b types.List) bool {
	ka, okA := elementKeys(ctx, a)
	kb, okB := elementKeys(ctx, b)
	return okA && okB && slices.Equal(ka, kb)
}

// elementKeys returns the sorted string forms of l's elements, and false when
// any part of l is unknown.
func elementKeys(ctx context.Context, l types.List) ([]string, bool) {
	if l.IsUnknown() {
		return nil, false
	}
	out := []string{}
	for _, e := range l.Elements() {
		if !fullyKnown(ctx, e) {
			return nil, false
		}
		out = append(out, e.String())
	}
	slices.Sort(out)
	return out, true
}

func fullyKnown(ctx context.Context, v attr.Value) bool {
	tv, err := v.ToTerraformValue(ctx)
	return err == nil && tv.IsFullyKnown()
}
