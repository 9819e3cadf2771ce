package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/names"
)

// imageNameValidator checks an image name (a Docker tag or an Incus alias).
// The shared stringCheck, nameValidator and labelsValidator are in
// instance_validators.go.
type imageNameValidator struct{}

var _ validator.String = imageNameValidator{}

func (imageNameValidator) check() stringCheck {
	return stringCheck{"an image name: " + names.ImageRule, "Invalid Image Name", names.ValidateImageName}
}
func (v imageNameValidator) Description(context.Context) string         { return v.check().desc }
func (v imageNameValidator) MarkdownDescription(context.Context) string { return v.check().desc }
func (v imageNameValidator) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	v.check().ValidateString(ctx, req, resp)
}
