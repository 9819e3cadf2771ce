package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/terraform-plugin-framework-validators/resourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/names"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/sourcehash"
)

var (
	_ resource.ResourceWithConfigure        = (*imageResource)(nil)
	_ resource.ResourceWithModifyPlan       = (*imageResource)(nil)
	_ resource.ResourceWithImportState      = (*imageResource)(nil)
	_ resource.ResourceWithConfigValidators = (*imageResource)(nil)
)

// NewImageResource is the sandbox_image resource.
func NewImageResource() resource.Resource { return &imageResource{} }

type imageResource struct {
	configured
}

type imageModel struct {
	objectFields
	Build   types.Object `tfsdk:"build"`
	Pull    types.Object `tfsdk:"pull"`
	Archive types.Object `tfsdk:"archive"`
	Keep    types.Bool   `tfsdk:"keep"`
	ImageID types.String `tfsdk:"image_id"`
}

type imageBuildModel struct {
	Context    types.String `tfsdk:"context"`
	Dockerfile types.String `tfsdk:"dockerfile"`
	Args       types.Map    `tfsdk:"args"`
	Target     types.String `tfsdk:"target"`
}

type imagePullModel struct {
	Ref types.String `tfsdk:"ref"`
}

type imageArchiveModel struct {
	Path types.String `tfsdk:"path"`
}

var (
	imageBuildAttrTypes   = map[string]attr.Type{"context": types.StringType, "dockerfile": types.StringType, "args": types.MapType{ElemType: types.StringType}, "target": types.StringType}
	imagePullAttrTypes    = map[string]attr.Type{"ref": types.StringType}
	imageArchiveAttrTypes = map[string]attr.Type{"path": types.StringType}
)

const imageKind = "Sandbox Image"

// imageSep separates the backend from the name in an image's ID: image
// names contain '/'.
const imageSep = "#"

// imageSources maps each source attribute to the capability it needs.
var imageSources = []struct{ attr, capability string }{
	{"build", driver.CapBuild}, {"pull", driver.CapPull}, {"archive", driver.CapArchive},
}

func (r *imageResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_image"
}

func (r *imageResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	nonEmpty := []validator.String{stringvalidator.LengthAtLeast(1)}
	replaceSource := []planmodifier.Object{replaceUnlessImported()}
	resp.Schema = schema.Schema{
		Description: "An image on a backend, built from a local context, pulled, or loaded from an archive. " +
			"`source_hash` fingerprints the build context (honouring `.dockerignore`) or the archive at plan time, " +
			"so a change to any file plans a replacement.\n\n" + objectImportDoc(imageSep) +
			" After import, `build`, `pull`, `archive` and `labels` are adopted from configuration without a rebuild.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "`<backend id>#<name>`, also a valid import ID.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"backend": backendAttribute(),
			"name": schema.StringAttribute{Required: true, Validators: []validator.String{imageNameValidator{}},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Description:   "Tag (docker) or alias (incus, local) of the image: " + names.ImageRule + "."},
			"build": schema.SingleNestedAttribute{Optional: true, PlanModifiers: replaceSource,
				Description: "Build from a local context directory (needs the `image_build` capability: docker).",
				Attributes: map[string]schema.Attribute{
					"context":    schema.StringAttribute{Required: true, Validators: nonEmpty, Description: "Local directory sent to the builder (a symlink to a directory is followed)."},
					"dockerfile": schema.StringAttribute{Optional: true, Validators: nonEmpty, Description: "Dockerfile path relative to `context`. Defaults to `Dockerfile`."},
					"args":       schema.MapAttribute{Optional: true, ElementType: types.StringType, Description: "Build arguments."},
					"target":     schema.StringAttribute{Optional: true, Validators: nonEmpty, Description: "Stage of a multi-stage build to stop at."},
				}},
			"pull": schema.SingleNestedAttribute{Optional: true, PlanModifiers: replaceSource,
				Description: "Pull from a registry (needs `image_pull`: docker, incus, kubernetes).",
				Attributes: map[string]schema.Attribute{
					"ref": schema.StringAttribute{Required: true, Validators: nonEmpty, Description: "Reference to pull, e.g. `python:3.12-slim`."},
				}},
			"archive": schema.SingleNestedAttribute{Optional: true, PlanModifiers: replaceSource,
				Description: "Load a local archive (needs `image_archive`): an image tarball (`docker save`), an Incus image, or a plain rootfs tarball.",
				Attributes: map[string]schema.Attribute{
					"path": schema.StringAttribute{Required: true, Validators: nonEmpty, Description: "Local path of the archive."},
				}},
			"keep": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				Description: "Leave the image on the engine when the resource is destroyed. Defaults to `false`."},
			"labels": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.Map{labelsValidator{}},
				PlanModifiers: []planmodifier.Map{replaceMapUnlessImported()},
				Description: "Labels of the image, besides the provider's `labels`; a change rebuilds it. Keys: " + names.LabelKeyRule +
					". An imported image adopts them from configuration (its engine labels mix in those of base images)."},
			"image_id": schema.StringAttribute{Computed: true, Description: "Image ID on the engine: a digest (docker) or fingerprint (incus). It is the image's identity: " +
				"when `name` (a Docker tag is global to the engine) moves to another image, e.g. another backend on the same engine " +
				"builds the same tag, this image is still found by its ID and nothing is planned; destroy removes this image, and " +
				"the tag only where it still points at it.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"source_hash": schema.StringAttribute{Computed: true,
				Description: "SHA-256 of the build context (minus `.dockerignore` matches) or of the archive; null for `pull`."},
		},
	}
}

func (r *imageResource) ConfigValidators(context.Context) []resource.ConfigValidator {
	return []resource.ConfigValidator{resourcevalidator.ExactlyOneOf(
		path.MatchRoot("build"), path.MatchRoot("pull"), path.MatchRoot("archive"))}
}

// ModifyPlan checks the source against the backend's capabilities and
// fingerprints it, so a changed file plans a replacement.
func (r *imageResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	planObject(ctx, req, resp, imageSep,
		func(cfg driver.Config, plan *imageModel) { r.checkCapabilities(cfg, plan, &resp.Diagnostics) },
		func(plan *imageModel) types.String { return r.sourceHash(ctx, plan, &resp.Diagnostics) })
}

// knownBackend decodes a handle that is fully known at plan time and
// reports one that names no driver of this provider.
func knownBackend(ctx context.Context, h types.Object, diags *diag.Diagnostics) (driver.Config, bool) {
	if h.IsNull() || h.IsUnknown() {
		return driver.Config{}, false
	}
	cfg, d := ConfigFromHandle(ctx, h)
	if d.HasError() {
		diags.Append(d...)
		return cfg, false
	}
	if _, ok := handleFields[cfg.Driver]; !ok {
		diags.AddAttributeError(path.Root("backend").AtName("driver"), "Invalid Backend Handle",
			fmt.Sprintf("`backend.driver` is %q, which is not one of %v. Pass `backend = sandbox_backend.NAME.handle`.", cfg.Driver, handleDrivers))
		return cfg, false
	}
	return cfg, true
}

func (r *imageResource) checkCapabilities(cfg driver.Config, plan *imageModel, diags *diag.Diagnostics) {
	caps := driver.Info{Capabilities: driver.StaticCapabilities(cfg.Driver, cfg)}
	if caps.Capabilities == nil {
		return
	}
	set := map[string]bool{"build": !plan.Build.IsNull(), "pull": !plan.Pull.IsNull(), "archive": !plan.Archive.IsNull()}
	var supported []string
	for _, s := range imageSources {
		if caps.Has(s.capability) {
			supported = append(supported, "`"+s.attr+"`")
		}
	}
	for _, s := range imageSources {
		if set[s.attr] && !caps.Has(s.capability) {
			diags.AddAttributeError(path.Root(s.attr), "Image Source Not Supported",
				fmt.Sprintf("The %s cannot make images with `%s`; it supports %v. Use one of those, or a backend that can (docker builds, pulls and loads archives).",
					backendLabel(cfg), s.attr, supported))
		}
	}
}

// sourceHash fingerprints the build context or archive; unknown while the
// path is unknown, null for pull.
func (r *imageResource) sourceHash(ctx context.Context, plan *imageModel, diags *diag.Diagnostics) types.String {
	switch {
	case !plan.Build.IsNull() && !plan.Build.IsUnknown():
		var b imageBuildModel
		diags.Append(plan.Build.As(ctx, &b, basetypes.ObjectAsOptions{})...)
		if b.Context.IsUnknown() || b.Dockerfile.IsUnknown() {
			return types.StringUnknown()
		}
		dockerfile := b.Dockerfile.ValueString()
		if dockerfile == "" {
			dockerfile = "Dockerfile"
		}
		dir := b.Context.ValueString()
		h := hashOrError(diags, path.Root("build").AtName("context"), "build.context", func() (string, error) {
			return sourcehash.Dir(dir, true, dockerfile)
		})
		if _, err := os.Stat(filepath.Join(dir, dockerfile)); err != nil && !h.IsUnknown() {
			diags.AddAttributeError(path.Root("build").AtName("dockerfile"), "Dockerfile Not Found",
				fmt.Sprintf("`build.dockerfile` %q is not in the build context %s: %v. Set `build.dockerfile` to its path relative to `build.context`.", dockerfile, dir, err))
		}
		return h
	case !plan.Archive.IsNull() && !plan.Archive.IsUnknown():
		var a imageArchiveModel
		diags.Append(plan.Archive.As(ctx, &a, basetypes.ObjectAsOptions{})...)
		if a.Path.IsUnknown() {
			return types.StringUnknown()
		}
		return hashOrError(diags, path.Root("archive").AtName("path"), "archive.path", func() (string, error) {
			return sourcehash.File(a.Path.ValueString())
		})
	case plan.Build.IsUnknown() || plan.Archive.IsUnknown():
		return types.StringUnknown()
	}
	return types.StringNull()
}

// hashOrError runs hash and reports a failure at the attribute it reads.
func hashOrError(diags *diag.Diagnostics, at path.Path, attrName string, hash func() (string, error)) types.String {
	h, err := hash()
	if err != nil {
		diags.AddAttributeError(at, "Unable to Read Local Source",
			fmt.Sprintf("`%s` cannot be read: %v. Check that the path exists on this machine and is readable.", attrName, err))
		return types.StringUnknown()
	}
	return types.StringValue(h)
}

func (r *imageResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan imageModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	d, cfg, diags := r.data.Driver(ctx, plan.Backend)
	resp.Diagnostics.Append(diags...)
	spec := r.spec(ctx, &plan, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	tflog.Debug(ctx, "making image", map[string]any{"backend": cfg.Name, "driver": cfg.Driver, "image": spec.Name, "source_hash": plan.SourceHash.ValueString()})
	img, err := d.EnsureImage(ctx, spec)
	if err != nil {
		resp.Diagnostics.Append(driverError(summary("Create", imageKind), cfg, fmt.Sprintf("making image %q", spec.Name), err))
		return
	}
	plan.ImageID = types.StringValue(img.ID)
	plan.ID = types.StringValue(objectID(cfg, imageSep, spec.Name))
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// spec translates the plan into a driver.ImageSpec.
func (r *imageResource) spec(ctx context.Context, plan *imageModel, diags *diag.Diagnostics) driver.ImageSpec {
	spec := driver.ImageSpec{Name: plan.Name.ValueString(), Labels: plan.engineLabels(ctx, r.data, diags)}
	switch {
	case !plan.Build.IsNull():
		var b imageBuildModel
		diags.Append(plan.Build.As(ctx, &b, basetypes.ObjectAsOptions{})...)
		spec.Build = &driver.BuildSource{ContextDir: b.Context.ValueString(), Dockerfile: b.Dockerfile.ValueString(),
			Args: stringMap(ctx, b.Args, diags), Target: b.Target.ValueString()}
	case !plan.Pull.IsNull():
		var p imagePullModel
		diags.Append(plan.Pull.As(ctx, &p, basetypes.ObjectAsOptions{})...)
		spec.Pull = &driver.PullSource{Ref: p.Ref.ValueString()}
	case !plan.Archive.IsNull():
		var a imageArchiveModel
		diags.Append(plan.Archive.As(ctx, &a, basetypes.ObjectAsOptions{})...)
		spec.Archive = &driver.ArchiveSource{Path: a.Path.ValueString()}
	}
	return spec
}

func (r *imageResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	state, d, cfg, ok := stateObject[imageModel](ctx, r.data, req.State, &resp.Diagnostics)
	if !ok {
		return
	}
	name, id := state.Name.ValueString(), state.ImageID.ValueString()
	img, err := d.InspectImage(ctx, name)
	if !foundForRead(ctx, resp, imageKind, cfg, fmt.Sprintf("inspecting image %q", name), err) {
		return
	}
	if id != "" && img.ID != id {
		// The image's identity is its ID. Its name (a Docker tag is global
		// to the engine) may have moved to another image: another backend on
		// the same engine that builds the same tag, or a build outside
		// Terraform. That is not this resource's concern while its own image
		// is still there; Delete then removes only our ID, not the tag.
		own, err := d.InspectImage(ctx, id)
		if !foundForRead(ctx, resp, imageKind, cfg, fmt.Sprintf("inspecting image %q (%s)", name, id), err) {
			return
		}
		tflog.Info(ctx, "image name points at another image now; keeping this resource's image by its ID",
			map[string]any{"backend": cfg.Name, "image": name, "image_id": own.ID, "name_now_points_at": img.ID})
		img = own
	}
	state.ImageID = types.StringValue(img.ID)
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update applies what changes in place: keep, and the backend's connection
// settings; everything else replaces the image.
func (r *imageResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	updateFromPlan[imageModel](ctx, req, resp)
}

func (r *imageResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state imageModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() || state.Keep.ValueBool() {
		return
	}
	d, cfg, ok := r.data.openDriver(ctx, state.Backend, &resp.Diagnostics)
	if !ok {
		return
	}
	tflog.Debug(ctx, "deleting image", map[string]any{"backend": cfg.Name, "image": state.Name.ValueString(), "image_id": state.ImageID.ValueString()})
	err := d.DeleteImage(ctx, state.Name.ValueString(), state.ImageID.ValueString())
	deleteFailed(&resp.Diagnostics, imageKind, cfg, fmt.Sprintf("deleting image %q", state.Name.ValueString()), err)
}

// ImportState finds the image and records what the engine knows of it.
func (r *imageResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	o, ok := r.data.importObject(ctx, req.ID, imageSep, &resp.Diagnostics)
	if !ok {
		return
	}
	img, err := o.drv.InspectImage(ctx, o.name)
	if err != nil {
		resp.Diagnostics.Append(driverError(summary("Import", imageKind), o.cfg, fmt.Sprintf("inspecting image %q", o.name), err))
		return
	}
	state := imageModel{objectFields: o.fields(imageSep, types.MapNull(types.StringType), img.Labels),
		Build: types.ObjectNull(imageBuildAttrTypes), Pull: types.ObjectNull(imagePullAttrTypes), Archive: types.ObjectNull(imageArchiveAttrTypes),
		Keep: types.BoolValue(false), ImageID: types.StringValue(img.ID)}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}
