package provider

// Where a schema declares defaults, for the server's unchanged-plan fast
// path (server.go). Terraform proposes the prior value for an Optional and
// Computed attribute that the configuration leaves out, so removing
// `running = false` from a configuration sends a proposed state equal to the
// prior one; the framework then plans the schema's default. The fast path
// may answer only when that default step would change nothing: wherever the
// configuration is null, the prior value must already be the default.

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/defaults"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
)

// defaultsTree mirrors the parts of a schema that hold a default somewhere
// below them.
type defaultsTree struct {
	value *tftypes.Value           // the attribute's own default; nil without one
	attrs map[string]*defaultsTree // an object's attributes (root, single nested, list element)
	elems *defaultsTree            // a list nested attribute's element object
}

// schemaDefaults builds the tree of attrs, or nil when none has a default.
// It panics on a default it cannot evaluate without a request (a dynamic
// default, or one inside a set or map of objects): the fast path would
// otherwise silently miss it, and the schema is fixed at build time.
func schemaDefaults(ctx context.Context, attrs map[string]schema.Attribute, at path.Path) *defaultsTree {
	var tree *defaultsTree
	for name, a := range attrs {
		p := at.AtName(name)
		child := &defaultsTree{}
		if v, ok := defaultValue(ctx, a, p); ok {
			child.value = &v
		}
		switch n := a.(type) {
		case schema.SingleNestedAttribute:
			if sub := schemaDefaults(ctx, n.Attributes, p); sub != nil {
				child.attrs = sub.attrs
			}
		case schema.ListNestedAttribute:
			child.elems = schemaDefaults(ctx, n.NestedObject.Attributes, p.AtListIndex(0))
		case schema.SetNestedAttribute:
			mustHaveNoDefaults(ctx, n.NestedObject.Attributes, p)
		case schema.MapNestedAttribute:
			mustHaveNoDefaults(ctx, n.NestedObject.Attributes, p)
		}
		if child.value == nil && child.attrs == nil && child.elems == nil {
			continue
		}
		if tree == nil {
			tree = &defaultsTree{attrs: map[string]*defaultsTree{}}
		}
		tree.attrs[name] = child
	}
	return tree
}

func mustHaveNoDefaults(ctx context.Context, attrs map[string]schema.Attribute, at path.Path) {
	if schemaDefaults(ctx, attrs, at) != nil {
		panic(fmt.Sprintf("schema defaults: %s holds a default inside a set or map of objects, which the fast plan does not follow", at))
	}
}

// defaultValue evaluates a's default, as the framework does when it plans.
func defaultValue(ctx context.Context, a schema.Attribute, p path.Path) (tftypes.Value, bool) {
	var v attr.Value
	var diags diag.Diagnostics
	switch d := a.(type) {
	case interface{ StringDefaultValue() defaults.String }:
		if def := d.StringDefaultValue(); def != nil {
			var resp defaults.StringResponse
			def.DefaultString(ctx, defaults.StringRequest{Path: p}, &resp)
			v, diags = resp.PlanValue, resp.Diagnostics
		}
	case interface{ BoolDefaultValue() defaults.Bool }:
		if def := d.BoolDefaultValue(); def != nil {
			var resp defaults.BoolResponse
			def.DefaultBool(ctx, defaults.BoolRequest{Path: p}, &resp)
			v, diags = resp.PlanValue, resp.Diagnostics
		}
	case interface{ Int64DefaultValue() defaults.Int64 }:
		if def := d.Int64DefaultValue(); def != nil {
			var resp defaults.Int64Response
			def.DefaultInt64(ctx, defaults.Int64Request{Path: p}, &resp)
			v, diags = resp.PlanValue, resp.Diagnostics
		}
	case interface{ Float64DefaultValue() defaults.Float64 }:
		if def := d.Float64DefaultValue(); def != nil {
			var resp defaults.Float64Response
			def.DefaultFloat64(ctx, defaults.Float64Request{Path: p}, &resp)
			v, diags = resp.PlanValue, resp.Diagnostics
		}
	case interface{ ListDefaultValue() defaults.List }:
		if def := d.ListDefaultValue(); def != nil {
			var resp defaults.ListResponse
			def.DefaultList(ctx, defaults.ListRequest{Path: p}, &resp)
			v, diags = resp.PlanValue, resp.Diagnostics
		}
	case interface{ MapDefaultValue() defaults.Map }:
		if def := d.MapDefaultValue(); def != nil {
			var resp defaults.MapResponse
			def.DefaultMap(ctx, defaults.MapRequest{Path: p}, &resp)
			v, diags = resp.PlanValue, resp.Diagnostics
		}
	case interface{ ObjectDefaultValue() defaults.Object }:
		if def := d.ObjectDefaultValue(); def != nil {
			var resp defaults.ObjectResponse
			def.DefaultObject(ctx, defaults.ObjectRequest{Path: p}, &resp)
			v, diags = resp.PlanValue, resp.Diagnostics
		}
	default:
		if hasUnfollowedDefault(a) {
			panic(fmt.Sprintf("schema defaults: %s has a kind of default the fast plan does not evaluate", p))
		}
	}
	if v == nil {
		return tftypes.Value{}, false
	}
	if diags.HasError() {
		panic(fmt.Sprintf("schema defaults: %s: %v", p, diags))
	}
	tv, err := v.ToTerraformValue(ctx)
	if err != nil {
		panic(fmt.Sprintf("schema defaults: %s: %v", p, err))
	}
	return tv, true
}

// hasUnfollowedDefault reports a default of a kind defaultValue leaves out.
func hasUnfollowedDefault(a schema.Attribute) bool {
	switch d := a.(type) {
	case interface{ SetDefaultValue() defaults.Set }:
		return d.SetDefaultValue() != nil
	case interface{ NumberDefaultValue() defaults.Number }:
		return d.NumberDefaultValue() != nil
	case interface{ Int32DefaultValue() defaults.Int32 }:
		return d.Int32DefaultValue() != nil
	case interface{ Float32DefaultValue() defaults.Float32 }:
		return d.Float32DefaultValue() != nil
	case interface{ DynamicDefaultValue() defaults.Dynamic }:
		return d.DynamicDefaultValue() != nil
	}
	return false
}

// holds reports whether the framework's default step leaves plan as it is
// for this configuration: every value the configuration leaves null, at an
// attribute with a default, already equals that default. The walk follows
// the framework's: it visits the plan's values, and a null in the
// configuration makes every configuration value below it null.
func (t *defaultsTree) holds(config, plan tftypes.Value) bool {
	if t == nil || plan.IsNull() || !plan.IsKnown() {
		return true
	}
	var planAttrs, configAttrs map[string]tftypes.Value
	if plan.As(&planAttrs) != nil {
		return false
	}
	if !config.IsNull() && (!config.IsKnown() || config.As(&configAttrs) != nil) {
		return false
	}
	for name, child := range t.attrs {
		pv := planAttrs[name]
		cv, ok := configAttrs[name]
		if !ok {
			cv = tftypes.NewValue(pv.Type(), nil)
		}
		if !cv.IsKnown() {
			return false
		}
		if cv.IsNull() && child.value != nil {
			if !pv.Equal(*child.value) {
				return false
			}
			continue
		}
		if child.attrs != nil && !child.holds(cv, pv) {
			return false
		}
		if child.elems != nil && !child.elems.holdsInEach(cv, pv) {
			return false
		}
	}
	return true
}

// holdsInEach is holds for each element of a list of objects, the
// configuration's element taken at the plan element's index.
func (t *defaultsTree) holdsInEach(config, plan tftypes.Value) bool {
	if plan.IsNull() || !plan.IsKnown() {
		return true
	}
	var planElems, configElems []tftypes.Value
	if plan.As(&planElems) != nil {
		return false
	}
	if !config.IsNull() && (!config.IsKnown() || config.As(&configElems) != nil) {
		return false
	}
	for i, pe := range planElems {
		ce := tftypes.NewValue(pe.Type(), nil)
		if i < len(configElems) {
			ce = configElems[i]
		}
		if !t.holds(ce, pe) {
			return false
		}
	}
	return true
}
