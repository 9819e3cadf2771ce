package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
)

// backendAttribute is the `backend = sandbox_backend.X.handle` input shared
// by every resource that lives on a backend.
func backendAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Required: true,
		Description: "The backend this object lives on: write `sandbox_backend.NAME.handle`. Moving to another " +
			"engine or scope (driver, name, host, address, project, namespace, root) replaces the object; " +
			"a change of connection settings such as key files only updates it.",
		Attributes:    handleAttributes(false),
		PlanModifiers: []planmodifier.Object{backendRequiresReplace()},
	}
}

const backendReplaceDoc = "Replaces the object when the backend's identity (engine and scope) changes."

// backendRequiresReplace replaces the object when the handle's identity
// changes, and leaves it in place when only connection settings change.
func backendRequiresReplace() planmodifier.Object {
	return objectplanmodifier.RequiresReplaceIf(func(ctx context.Context, req planmodifier.ObjectRequest, resp *objectplanmodifier.RequiresReplaceIfFuncResponse) {
		if req.PlanValue.IsUnknown() {
			resp.RequiresReplace = true
			return
		}
		before, d1 := ConfigFromHandle(ctx, req.StateValue)
		after, d2 := ConfigFromHandle(ctx, req.PlanValue)
		if d1.HasError() || d2.HasError() {
			resp.RequiresReplace = true
			return
		}
		resp.RequiresReplace = backendIdentity(before) != backendIdentity(after)
	}, backendReplaceDoc, backendReplaceDoc)
}
