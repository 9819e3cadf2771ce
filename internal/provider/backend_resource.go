package provider

import (
	"context"
	"fmt"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/resourcevalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

var (
	_ resource.ResourceWithConfigure        = (*backendResource)(nil)
	_ resource.ResourceWithModifyPlan       = (*backendResource)(nil)
	_ resource.ResourceWithImportState      = (*backendResource)(nil)
	_ resource.ResourceWithConfigValidators = (*backendResource)(nil)
)

// NewBackendResource is the sandbox_backend resource.
func NewBackendResource() resource.Resource { return &backendResource{} }

type backendResource struct {
	configured
}

func (r *backendResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_backend"
}

func (r *backendResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = backendSchema()
}

func (r *backendResource) ConfigValidators(context.Context) []resource.ConfigValidator {
	return []resource.ConfigValidator{resourcevalidator.Conflicting(
		path.MatchRoot(driver.Docker), path.MatchRoot(driver.Incus), path.MatchRoot(driver.Kubernetes), path.MatchRoot(driver.Local))}
}

// ModifyPlan resolves the configuration into the handle, so the handle is
// known at plan time and every mistake is reported before anything is made.
func (r *backendResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return // destroy
	}
	var plan backendModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	cfg, known, err := plan.unresolvedConfig(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Invalid Sandbox Backend Configuration", err.Error())
		return
	}
	if !known { // the handle stays unknown until the values it derives from are known
		if !req.State.Raw.IsNull() {
			plan.ID = types.StringUnknown()
			plan.unknownEngineAttributes()
			resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		}
		return
	}
	resolved, ok := resolveInto(ctx, cfg, r.data.secrets(), &resp.Diagnostics)
	if !ok {
		return
	}
	if !slices.Contains(driver.Registered(), resolved.Driver) {
		resp.Diagnostics.AddAttributeError(path.Root(resolved.Driver), "Driver Not Available", driverUnavailableDetail(resolved.Driver, runtime.GOOS))
		return
	}
	handle, diags := HandleFromConfig(resolved)
	resp.Diagnostics.Append(diags...)
	plan.Handle, plan.Driver, plan.ID = handle, types.StringValue(resolved.Driver), types.StringValue(backendID(resolved))
	if req.State.Raw.IsNull() {
		warnSharedIncusNetwork(resolved, &resp.Diagnostics)
	}
	if !req.State.Raw.IsNull() {
		var state backendModel
		resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
		if before, d := ConfigFromHandle(ctx, state.Handle); !d.HasError() && backendIdentity(before) != backendIdentity(resolved) {
			resp.RequiresReplace = append(resp.RequiresReplace, path.Root("handle"))
		}
		if !plan.Handle.Equal(state.Handle) {
			plan.unknownEngineAttributes() // a new setting may change what the engine reports
		}
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

// warnSharedIncusNetwork says, when an Incus backend is created, that its
// `isolated` sandboxes join a managed network the whole server may share:
// unlike Docker, the driver makes no network per backend.
func warnSharedIncusNetwork(cfg driver.Config, diags *diag.Diagnostics) {
	if cfg.Driver != driver.Incus || cfg.Incus == nil || (cfg.Incus.Network != "" && cfg.Incus.Network != driver.IncusDefaultNetwork) {
		return
	}
	diags.AddAttributeWarning(path.Root("incus").AtName("network"), "Shared Incus Network",
		"Sandboxes of this backend with `network = \"isolated\"` join the managed network "+driver.IncusDefaultNetwork+", which every "+
			"instance on the Incus server attached to it shares: they can reach those instances and be reached by them. "+
			"For a network of this backend's sandboxes alone, create one (`incus network create NAME ipv4.address=10.X.Y.1/24 "+
			"ipv4.nat=true`) and set `incus.network = \"NAME\"`; `network = \"none\"` gives a sandbox no network at all.")
}

// resolveInto resolves cfg, reports its problems at their attributes and
// records the SSH host key the backend is verified against (pinHostKey).
func resolveInto(ctx context.Context, cfg driver.Config, secrets driver.Secrets, diags *diag.Diagnostics) (driver.Config, bool) {
	resolved, problems := resolveBackend(cfg, osResolveEnv())
	for _, p := range problems {
		at := path.Root(resolved.Driver)
		if p.field != "" {
			at = at.AtName(p.field)
		}
		if p.warning {
			diags.AddAttributeWarning(at, p.summary, p.detail)
		} else {
			diags.AddAttributeError(at, p.summary, p.detail)
		}
	}
	if diags.HasError() {
		return resolved, false
	}
	return resolved, pinHostKey(ctx, &resolved, secrets, diags)
}

func (r *backendResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan backendModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(r.apply(ctx, &plan, "Create")...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

// apply makes sure the scope exists and records what the engine reports;
// Create and Update both end here.
func (r *backendResource) apply(ctx context.Context, m *backendModel, action string) diag.Diagnostics {
	cfg, diags := ConfigFromHandle(ctx, m.Handle)
	if diags.HasError() {
		return diags
	}
	sum := summary(action, "Sandbox Backend")
	d, err := r.data.DriverFor(ctx, &cfg)
	if err != nil {
		diags.Append(driverError(sum, cfg, "opening the driver", err))
		return diags
	}
	tflog.Debug(ctx, "ensuring backend scope", map[string]any{"driver": cfg.Driver, "backend": cfg.Name})
	if err := d.EnsureScope(ctx); err != nil {
		diags.Append(driverError(sum, cfg, "creating the backend's scope", err))
		return diags
	}
	diags.Append(r.observe(ctx, d, cfg, m, sum)...)
	return diags
}

// observe fills the computed engine attributes from Info.
func (r *backendResource) observe(ctx context.Context, d driver.Driver, cfg driver.Config, m *backendModel, sum string) diag.Diagnostics {
	var diags diag.Diagnostics
	info, err := d.Info(ctx)
	if err != nil {
		diags.Append(driverError(sum, cfg, "asking the engine for its version and capabilities", err))
		return diags
	}
	caps := info.Capabilities
	if len(caps) == 0 {
		caps = driver.StaticCapabilities(cfg.Driver, cfg)
	}
	set, d2 := types.SetValueFrom(ctx, types.StringType, caps)
	diags.Append(d2...)
	m.Capabilities = set
	m.Driver = types.StringValue(cfg.Driver)
	m.ID = types.StringValue(backendID(cfg))
	m.EngineVersion, m.OS, m.Arch = types.StringValue(info.EngineVersion), types.StringValue(info.OS), types.StringValue(info.Arch)
	m.CPUs, m.MemoryBytes = types.Int64Value(info.CPUs), types.Int64Value(info.MemoryBytes)
	return diags
}

func (r *backendResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state backendModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if state.Handle.IsNull() { // just imported: resolve as a plan would
		cfg, _, err := state.unresolvedConfig(ctx)
		if err != nil {
			resp.Diagnostics.AddError("Unable to Import Sandbox Backend", err.Error())
			return
		}
		resolved, ok := resolveInto(ctx, cfg, r.data.secrets(), &resp.Diagnostics)
		if !ok {
			return
		}
		h, diags := HandleFromConfig(resolved)
		resp.Diagnostics.Append(diags...)
		state.Handle = h
	}
	cfg, diags := ConfigFromHandle(ctx, state.Handle)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	sum := summary("Read", "Sandbox Backend")
	d, err := r.data.DriverFor(ctx, &cfg)
	if err != nil {
		resp.Diagnostics.Append(driverError(sum, cfg, "opening the driver", err))
		return
	}
	if sc, ok := unwrap(d).(driver.ScopeChecker); ok {
		exists, err := sc.ScopeExists(ctx)
		if err != nil {
			resp.Diagnostics.Append(driverError(sum, cfg, "looking up the backend's scope", err))
			return
		}
		if !exists {
			tflog.Info(ctx, "backend scope is gone; removing from state", map[string]any{"backend": cfg.Name})
			resp.State.RemoveResource(ctx)
			return
		}
	}
	resp.Diagnostics.Append(r.observe(ctx, d, cfg, &state, sum)...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
	}
}

func (r *backendResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan backendModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(r.apply(ctx, &plan, "Update")...)
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
	}
}

func (r *backendResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state backendModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	cfg, diags := ConfigFromHandle(ctx, state.Handle)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	sum := summary("Delete", "Sandbox Backend")
	d, err := r.data.DriverFor(ctx, &cfg)
	if err != nil {
		resp.Diagnostics.Append(driverError(sum, cfg, "opening the driver", err))
		return
	}
	if err := d.DeleteScope(ctx); err != nil && !driver.IsNotFound(err) {
		resp.Diagnostics.Append(driverError(sum, cfg, "deleting the backend's scope", err))
	}
}

// ImportState accepts `<driver>:<name>[:<endpoint>][?<field>=<value>&...]`.
func (r *backendResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	drv, name, block, err := parseBackendImportID(req.ID)
	if err != nil {
		resp.Diagnostics.AddError("Invalid Sandbox Backend Import ID", err.Error()+
			"\n\nUse `<driver>:<name>[:<endpoint>][?<field>=<value>&...]`, e.g. `docker:gpu:unix:///var/run/docker.sock` or `local:dev`.")
		return
	}
	m := backendModel{ID: types.StringUnknown(), Name: types.StringValue(name), Handle: types.ObjectNull(handleAttrTypes())}
	for d, o := range m.blocks() {
		*o = types.ObjectNull(handleBlockAttrTypes(d))
	}
	obj, diags := types.ObjectValue(handleBlockAttrTypes(drv), block)
	resp.Diagnostics.Append(diags...)
	*m.blocks()[drv] = obj
	m.Driver, m.EngineVersion, m.OS, m.Arch = types.StringValue(drv), types.StringNull(), types.StringNull(), types.StringNull()
	m.CPUs, m.MemoryBytes, m.Capabilities = types.Int64Null(), types.Int64Null(), types.SetNull(types.StringType)
	m.ID = types.StringValue(req.ID)
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// endpointField is the handle field an import ID's endpoint sets.
var endpointField = map[string]string{driver.Docker: "host", driver.Incus: "address", driver.Kubernetes: "kubeconfig", driver.Local: "root"}

// parseBackendImportID splits an import ID into the driver, the name and the
// driver block's attribute values (all fields present, unset ones null).
func parseBackendImportID(id string) (string, string, map[string]attr.Value, error) {
	main, query, _ := strings.Cut(id, "?")
	parts := strings.SplitN(main, ":", 3)
	if len(parts) < 2 || parts[1] == "" {
		return "", "", nil, fmt.Errorf("the import ID %q has no name", id)
	}
	drv := parts[0]
	if _, ok := handleFields[drv]; !ok {
		return "", "", nil, fmt.Errorf("the import ID %q starts with %q, which is not one of %s", id, drv, strings.Join(handleDrivers, ", "))
	}
	set := url.Values{}
	if len(parts) == 3 && parts[2] != "" {
		set.Set(endpointField[drv], parts[2])
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return "", "", nil, fmt.Errorf("the import ID %q has an invalid query: %v", id, err)
	}
	for k, v := range q {
		set[k] = v
	}
	block := map[string]attr.Value{}
	for _, f := range handleFields[drv] {
		v, ok := set[f.name]
		delete(set, f.name)
		switch {
		case f.isBool && ok:
			b, err := strconv.ParseBool(v[0])
			if err != nil {
				return "", "", nil, fmt.Errorf("the import ID %q sets %s to %q, which is not a boolean", id, f.name, v[0])
			}
			block[f.name] = types.BoolValue(b)
		case f.isBool:
			block[f.name] = types.BoolNull()
		case ok:
			block[f.name] = types.StringValue(v[0])
		default:
			block[f.name] = types.StringNull()
		}
	}
	if len(set) > 0 {
		return "", "", nil, fmt.Errorf("the import ID %q sets %s, which the %s block does not have", id, strings.Join(sortedKeys(set), ", "), drv)
	}
	return drv, parts[1], block, nil
}

// backendFromImportID resolves a backend import ID into the config its
// handle records, exactly as a plan of that configuration would.
func backendFromImportID(ctx context.Context, id string, secrets driver.Secrets) (driver.Config, diag.Diagnostics) {
	var diags diag.Diagnostics
	drv, name, block, err := parseBackendImportID(id)
	if err != nil {
		diags.AddError("Invalid Import ID", err.Error()+
			". The backend part is `<driver>:<name>[:<endpoint>][?<field>=<value>&...]`, e.g. `docker:gpu` or `local:dev`.")
		return driver.Config{}, diags
	}
	obj, d := types.ObjectValue(handleBlockAttrTypes(drv), block)
	diags.Append(d...)
	raw, err := objectToRaw(obj)
	if err != nil {
		diags.AddError("Invalid Import ID", err.Error())
		return driver.Config{}, diags
	}
	var cfg driver.Config
	if err := jsonRoundTrip(map[string]any{"driver": drv, "name": name, drv: raw}, &cfg); err != nil {
		diags.AddError("Invalid Import ID", err.Error())
		return cfg, diags
	}
	resolved, _ := resolveInto(ctx, cfg, secrets, &diags)
	return resolved, diags
}

// backendID is `<driver>:<name>:<endpoint>`, itself a valid import ID.
func backendID(cfg driver.Config) string {
	id := cfg.Driver + ":" + cfg.Name
	if ep, _ := blockRaw(cfg)[endpointField[cfg.Driver]].(string); ep != "" {
		id += ":" + ep
	}
	return id
}

// unresolvedConfig builds the driver.Config the user wrote (no defaults).
// known is false while any value it depends on is unknown.
func (m *backendModel) unresolvedConfig(ctx context.Context) (cfg driver.Config, known bool, err error) {
	if m.Name.IsUnknown() {
		return cfg, false, nil
	}
	raw := map[string]any{"name": m.Name.ValueString()}
	for d, o := range m.blocks() {
		if o.IsUnknown() {
			return cfg, false, nil
		}
		if o.IsNull() {
			continue
		}
		if !isFullyKnown(ctx, *o) {
			return cfg, false, nil
		}
		inner, err := objectToRaw(*o)
		if err != nil {
			return cfg, false, err
		}
		raw["driver"], raw[d] = d, inner
	}
	if err := jsonRoundTrip(raw, &cfg); err != nil {
		return cfg, false, fmt.Errorf("the backend configuration could not be read: %w", err)
	}
	return cfg, true, nil
}

// isFullyKnown reports whether v holds no unknown value at any depth.
func isFullyKnown(ctx context.Context, v attr.Value) bool {
	tv, err := v.ToTerraformValue(ctx)
	return err == nil && tv.IsFullyKnown()
}

// unknownEngineAttributes marks what observe fills as unknown in a plan.
func (m *backendModel) unknownEngineAttributes() {
	m.EngineVersion, m.OS, m.Arch = types.StringUnknown(), types.StringUnknown(), types.StringUnknown()
	m.CPUs, m.MemoryBytes = types.Int64Unknown(), types.Int64Unknown()
	m.Capabilities = types.SetUnknown(types.StringType)
}

// unwrap returns the engine driver behind the provider's wrapper.
func unwrap(d driver.Driver) driver.Driver {
	if w, ok := d.(*invalidating); ok {
		return w.Driver
	}
	return d
}
