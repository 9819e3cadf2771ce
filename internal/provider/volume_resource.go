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
	configured
}

type volumeModel struct {
	objectFields
	Source types.String `tfsdk:"source"`
}

const volumeKind = "Sandbox Volume"

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
				Description: "Name of the volume, unique within the backend: " + names.NameRule + ". On the engine: the Docker " +
					"volume `<backend>-<name>`, the Incus custom volume `<name>` in the backend's project, the local directory " +
					"`<root>/<backend>/volumes/<name>`."},
			"source": schema.StringAttribute{Optional: true, Validators: []validator.String{stringvalidator.LengthAtLeast(1)},
				PlanModifiers: []planmodifier.String{replaceStringUnlessImported()},
				Description:   "Local directory whose contents seed the volume when it is created. A symlink to a directory is followed; symlinks inside it are copied as links."},
			"labels": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.Map{labelsValidator{}},
				PlanModifiers: []planmodifier.Map{mapplanmodifier.RequiresReplace()},
				Description:   "Labels of the volume, besides the provider's `labels`. Keys: " + names.LabelKeyRule + "."},
			"source_hash": schema.StringAttribute{Computed: true,
				Description: "SHA-256 of the `source` directory's paths, modes and contents; null without `source`."},
		},
	}
}

// ModifyPlan checks the backend has volumes and fingerprints the source.
func (r *volumeResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	planObject(ctx, req, resp, volumeSep,
		func(cfg driver.Config, _ *volumeModel) {
			caps := driver.Info{Capabilities: driver.StaticCapabilities(cfg.Driver, cfg)}
			if caps.Capabilities != nil && !caps.Has(driver.CapVolumes) {
				resp.Diagnostics.AddAttributeError(path.Root("backend"), "Volumes Not Supported",
					fmt.Sprintf("The %s cannot hold volumes. Use a docker, incus or local backend for `sandbox_volume`.", backendLabel(cfg)))
			}
		},
		func(plan *volumeModel) types.String { return volumeSourceHash(plan.Source, &resp.Diagnostics) })
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
	labels := plan.engineLabels(ctx, r.data, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	spec := driver.VolumeSpec{Name: plan.Name.ValueString(), SourceDir: plan.Source.ValueString(), Labels: labels}
	tflog.Debug(ctx, "creating volume", map[string]any{"backend": cfg.Name, "driver": cfg.Driver, "volume": spec.Name, "source": spec.SourceDir})
	if _, err := d.CreateVolume(ctx, spec); err != nil {
		resp.Diagnostics.Append(driverError(summary("Create", volumeKind), cfg, fmt.Sprintf("creating volume %q", spec.Name), err))
		return
	}
	plan.ID = types.StringValue(objectID(cfg, volumeSep, spec.Name))
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

func (r *volumeResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	state, d, cfg, ok := stateObject[volumeModel](ctx, r.data, req.State, &resp.Diagnostics)
	if !ok {
		return
	}
	// Nothing of a volume changes on the engine but its existence.
	_, err := d.InspectVolume(ctx, state.Name.ValueString())
	if !foundForRead(ctx, resp, volumeKind, cfg, fmt.Sprintf("inspecting volume %q", state.Name.ValueString()), err) {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// Update only records new backend connection settings: everything else
// about a volume replaces it.
func (r *volumeResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	updateFromPlan[volumeModel](ctx, req, resp)
}

func (r *volumeResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	state, d, cfg, ok := stateObject[volumeModel](ctx, r.data, req.State, &resp.Diagnostics)
	if !ok {
		return
	}
	tflog.Debug(ctx, "deleting volume", map[string]any{"backend": cfg.Name, "volume": state.Name.ValueString()})
	err := d.DeleteVolume(ctx, state.Name.ValueString())
	deleteFailed(&resp.Diagnostics, volumeKind, cfg, fmt.Sprintf("deleting volume %q (is a sandbox still using it?)", state.Name.ValueString()), err)
}

// ImportState finds the volume and records what the engine knows of it.
func (r *volumeResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	o, ok := r.data.importObject(ctx, req.ID, volumeSep, &resp.Diagnostics)
	if !ok {
		return
	}
	v, err := o.drv.InspectVolume(ctx, o.name)
	if err != nil {
		resp.Diagnostics.Append(driverError(summary("Import", volumeKind), o.cfg, fmt.Sprintf("inspecting volume %q", o.name), err))
		return
	}
	state := volumeModel{objectFields: o.fields(volumeSep, importedLabels(v.Labels, r.data.Labels), v.Labels), Source: types.StringNull()}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}
