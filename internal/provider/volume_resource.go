package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/mapplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/names"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/sourcehash"
)

var (
	_ resource.ResourceWithConfigure   = (*volumeResource)(nil)
	_ resource.ResourceWithModifyPlan  = (*volumeResource)(nil)
	_ resource.ResourceWithImportState = (*volumeResource)(nil)
)

// NewVolumeResource is the sandbox_volume resource.
func NewVolumeResource() resource.Resource { return &volumeResource{} }

type volumeResource struct {
	data *ProviderData
}

type volumeModel struct {
	ID         types.String `tfsdk:"id"`
	Backend    types.Object `tfsdk:"backend"`
	Name       types.String `tfsdk:"name"`
	Source     types.String `tfsdk:"source"`
	Labels     types.Map    `tfsdk:"labels"`
	SourceHash types.String `tfsdk:"source_hash"`
}

// volumeSep separates the backend from the name in a volume's ID, as for
// instances: volume names never contain '/'.
const volumeSep = "/"

func (r *volumeResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_volume"
}

func (r *volumeResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "A named volume on a backend, optionally seeded from a local directory. `source_hash` " +
			"fingerprints that directory at plan time, so a change to any file in it plans a replacement " +
			"(the volume is re-seeded; data written into it by sandboxes is lost).\n\n" + objectImportDoc(volumeSep) +
			" After import, `source` is adopted from configuration without re-seeding.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, Description: "`<backend id>/<name>`, also a valid import ID.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"backend": backendAttribute(),
			"name": schema.StringAttribute{Required: true, Validators: []validator.String{nameValidator{}},
				PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
				Description:   "Name of the volume, unique within the backend: " + names.NameRule + "."},
			"source": schema.StringAttribute{Optional: true, Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
				PlanModifiers: []planmodifier.String{replaceStringUnlessImported()},
				Description:   "Local directory whose contents seed the volume when it is created."},
			"labels": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.Map{labelsValidator{}},
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()},
				Description:   "Labels of the volume, besides the provider's `labels`. Keys: " + names.LabelKeyRule + "."},
			"source_hash": schema.StringAttribute{Computed: true,
				Description: "SHA-256 of the `source` directory's paths, modes and contents; null without `source`."},
		},
	}
}

func (r *volumeResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// ModifyPlan checks the backend has volumes and fingerprints the source.
func (r *volumeResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan volumeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if cfg, ok := knownBackend(ctx, plan.Backend, &resp.Diagnostics); ok {
		caps := driver.Info{Capabilities: driver.StaticCapabilities(cfg.Driver, cfg)}
		if caps.Capabilities != nil && !caps.Has(driver.CapVolumes) {
			resp.Diagnostics.AddAttributeError(path.Root("backend"), "Volumes Not Supported",
				fmt.Sprintf("The %s cannot hold volumes. Use a docker, incus or local backend for `sandbox_volume`.", backendLabel(cfg)))
		}
		if !plan.Name.IsUnknown() {
			plan.ID = types.StringValue(objectID(cfg, volumeSep, plan.Name.ValueString()))
		}
	}
	plan.SourceHash = volumeSourceHash(plan.Source, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	if !req.State.Raw.IsNull() {
		var state volumeModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if !state.SourceHash.IsNull() && !plan.SourceHash.Equal(state.SourceHash) {
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root("source_hash"))
		}
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func volumeSourceHash(source types.String, diags *diag.Diagnostics) types.String {
	switch {
	case source.IsUnknown():
		return types.StringUnknown()
	case source.IsNull():
		return types.StringNull()
	}
	return hashOrError(diags, path.Root("source"), "source", func() (string, error) {
		return sourcehash.Dir(source.ValueString(), false)
	})
}

func (r *volumeResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan volumeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	d, cfg, diags := r.data.Driver(ctx, plan.Backend)
	resp.Diagnostics.Append(diags...)
	labels := r.data.ObjectLabels(stringMap(ctx, plan.Labels, &resp.Diagnostics))
	if resp.Diagnostics.HasError() {
		return
	}
	if h := plan.SourceHash.ValueString(); h != "" {
		labels[driver.LabelSourceHash] = h
	}
	spec := driver.VolumeSpec{Name: plan.Name.ValueString(), SourceDir: plan.Source.ValueString(), Labels: labels}
	tflog.Debug(ctx, "creating volume", map[string]any{"backend": cfg.Name, "driver": cfg.Driver, "volume": spec.Name, "source": spec.SourceDir})
	if _, err := d.CreateVolume(ctx, spec); err != nil {
		resp.Diagnostics.Append(driverError(summary("Create", "Sandbox Volume"), cfg, fmt.Sprintf("creating volume %q", spec.Name), err))
		return
	}
	plan.ID = types.StringValue(objectID(cfg, volumeSep, spec.Name))
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *volumeResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state volumeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	d, cfg, diags := r.data.Driver(ctx, state.Backend)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Nothing of a volume changes on the engine but its existence.
	_, err := d.InspectVolume(ctx, state.Name.ValueString())
	if driver.IsNotFound(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.Append(driverError(summary("Read", "Sandbox Volume"), cfg, fmt.Sprintf("inspecting volume %q", state.Name.ValueString()), err))
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update only records new backend connection settings: everything else
// about a volume replaces it.
func (r *volumeResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan volumeModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

func (r *volumeResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state volumeModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	d, cfg, diags := r.data.Driver(ctx, state.Backend)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	tflog.Debug(ctx, "deleting volume", map[string]any{"backend": cfg.Name, "volume": state.Name.ValueString()})
	if err := d.DeleteVolume(ctx, state.Name.ValueString()); err != nil && !driver.IsNotFound(err) {
		resp.Diagnostics.Append(driverError(summary("Delete", "Sandbox Volume"), cfg, fmt.Sprintf("deleting volume %q (is a sandbox still using it?)", state.Name.ValueString()), err))
	}
}

// ImportState finds the volume and records what the engine knows of it.
func (r *volumeResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	handle, name, diags := parseObjectImportID(ctx, req.ID, volumeSep, r.data.secrets())
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	d, cfg, diags := r.data.Driver(ctx, handle)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	v, err := d.InspectVolume(ctx, name)
	if err != nil {
		resp.Diagnostics.Append(driverError(summary("Import", "Sandbox Volume"), cfg, fmt.Sprintf("inspecting volume %q", name), err))
		return
	}
	state := volumeModel{ID: types.StringValue(objectID(cfg, volumeSep, name)), Backend: handle, Name: types.StringValue(name),
		Source: types.StringNull(), Labels: importedLabels(v.Labels, r.data.Labels), SourceHash: sourceHashOrNull(v.Labels)}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}
