package provider

// The `files` attribute of sandbox_instance and sandbox_initializer: one
// schema, one model, one conversion to driver.File, and the plan-time content
// hash of `files[*].source`.

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/sourcehash"
)

type fileModel struct {
	Path       types.String `tfsdk:"path"`
	Content    types.String `tfsdk:"content"`
	Source     types.String `tfsdk:"source"`
	SourceHash types.String `tfsdk:"source_hash"`
	Mode       types.String `tfsdk:"mode"`
}

// filesDoc is what the `files` attribute says of itself and of the fields
// whose meaning depends on the resource.
type filesDoc struct {
	list, content, source, mode string
}

func filesAttribute(doc filesDoc) schema.ListNestedAttribute {
	return schema.ListNestedAttribute{
		Optional:      true,
		Description:   doc.list,
		PlanModifiers: replaceList,
		NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
			"path": schema.StringAttribute{Required: true, Description: "Absolute path inside the sandbox.",
				Validators: []validator.String{absPathCheck}},
			"content": schema.StringAttribute{Optional: true, Sensitive: true,
				Description: doc.content,
				Validators: []validator.String{stringvalidator.ExactlyOneOf(
					path.MatchRelative().AtParent().AtName("content"), path.MatchRelative().AtParent().AtName("source"))}},
			"source": schema.StringAttribute{Optional: true,
				Description: doc.source,
				Validators:  []validator.String{fileExistsCheck}},
			"source_hash": schema.StringAttribute{Computed: true,
				Description:   "SHA-256 of the `source` file when planned; null for `content`.",
				PlanModifiers: []planmodifier.String{sourceHashModifier{}}},
			"mode": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultFileMode),
				Description: doc.mode,
				Validators:  []validator.String{fileModeCheck}},
		}},
	}
}

// driverFiles converts a `files` list; a bad mode is reported at its
// attribute and the file left out.
func driverFiles(ctx context.Context, l types.List, diags *diag.Diagnostics) []driver.File {
	var files []fileModel
	diags.Append(elementsAs(ctx, l, &files)...)
	var out []driver.File
	for i, f := range files {
		mode, err := parseFileMode(orDefault(f.Mode.ValueString(), defaultFileMode))
		if err != nil {
			diags.AddAttributeError(path.Root("files").AtListIndex(i).AtName("mode"), "Invalid File Mode", err.Error())
			continue
		}
		file := driver.File{Path: f.Path.ValueString(), Source: f.Source.ValueString(), Mode: mode}
		if !f.Content.IsNull() {
			file.Content = []byte(f.Content.ValueString())
		}
		out = append(out, file)
	}
	return out
}

// sourceHashModifier plans files[*].source_hash: the SHA-256 of the local
// `source` file, read at plan time, so editing the file plans a replacement
// even though the configuration did not change.
type sourceHashModifier struct{}

func (sourceHashModifier) Description(context.Context) string {
	return "hashes the local source file; a change requires replacement"
}
func (m sourceHashModifier) MarkdownDescription(ctx context.Context) string {
	return m.Description(ctx)
}

func (sourceHashModifier) PlanModifyString(ctx context.Context, req planmodifier.StringRequest, resp *planmodifier.StringResponse) {
	var src types.String
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, req.Path.ParentPath().AtName("source"), &src)...)
	switch {
	case src.IsUnknown():
		resp.PlanValue = types.StringUnknown()
		return
	case src.IsNull():
		resp.PlanValue = types.StringNull()
		return
	}
	sum, err := sourcehash.File(src.ValueString())
	if err != nil {
		resp.PlanValue = types.StringUnknown() // the validator on `source` reports it
		return
	}
	resp.PlanValue = types.StringValue(sum)
	if known(req.StateValue) && req.StateValue.ValueString() != sum {
		resp.RequiresReplace = true
	}
}
