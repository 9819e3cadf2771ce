package provider

// The sandbox_instance model and its conversions: plan -> driver.InstanceSpec
// (toSpec) and observed driver.Instance -> computed attributes (observe, the
// one function that ends Create, Read, Update and ImportState).

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/units"
)

type instanceModel struct {
	ID        types.String  `tfsdk:"id"`
	Backend   types.Object  `tfsdk:"backend"`
	Image     types.String  `tfsdk:"image"`
	Name      types.String  `tfsdk:"name"`
	Type      types.String  `tfsdk:"type"`
	Command   types.List    `tfsdk:"command"`
	Env       types.Map     `tfsdk:"env"`
	Workdir   types.String  `tfsdk:"workdir"`
	User      types.String  `tfsdk:"user"`
	Labels    types.Map     `tfsdk:"labels"`
	CPUs      types.Float64 `tfsdk:"cpus"`
	Memory    types.String  `tfsdk:"memory"`
	PidsLimit types.Int64   `tfsdk:"pids_limit"`
	Disk      types.String  `tfsdk:"disk"`
	Network   types.String  `tfsdk:"network"`
	Ports     types.List    `tfsdk:"ports"`
	Files     types.List    `tfsdk:"files"`
	Volumes   types.List    `tfsdk:"volumes"`
	Running   types.Bool    `tfsdk:"running"`
	Lifetime  types.String  `tfsdk:"lifetime"`
	Security  types.Object  `tfsdk:"security"`

	Handle     types.Object `tfsdk:"handle"`
	Status     types.String `tfsdk:"status"`
	IPAddress  types.String `tfsdk:"ip_address"`
	Endpoints  types.Map    `tfsdk:"endpoints"`
	ExpiresAt  types.String `tfsdk:"expires_at"`
	ExitCode   types.Int64  `tfsdk:"exit_code"`
	LoopbackIP types.String `tfsdk:"loopback_ip"`
	EngineName types.String `tfsdk:"engine_name"`

	Timeouts timeouts.Value `tfsdk:"timeouts"`
}

type portModel struct {
	Name     types.String `tfsdk:"name"`
	Port     types.Int64  `tfsdk:"port"`
	Protocol types.String `tfsdk:"protocol"`
}

type mountModel struct {
	Volume   types.String `tfsdk:"volume"`
	Target   types.String `tfsdk:"target"`
	ReadOnly types.Bool   `tfsdk:"read_only"`
}

type securityModel struct {
	NoNewPrivileges types.Bool   `tfsdk:"no_new_privileges"`
	Privileged      types.Bool   `tfsdk:"privileged"`
	ReadOnlyRootfs  types.Bool   `tfsdk:"read_only_rootfs"`
	Init            types.Bool   `tfsdk:"init"`
	Capabilities    types.Object `tfsdk:"capabilities"`
}

type capabilitiesModel struct {
	Add  types.List `tfsdk:"add"`
	Drop types.List `tfsdk:"drop"`
}

// asOptions reads objects whose nested values may be null or unknown.
var asOptions = basetypes.ObjectAsOptions{UnhandledNullAsEmpty: true, UnhandledUnknownAsEmpty: true}

var portAttrTypes = map[string]attr.Type{"name": types.StringType, "port": types.Int64Type, "protocol": types.StringType}

// toSpec converts a plan into an InstanceSpec. Unknown values are left
// zero (ModifyPlan checks what is known; Create sees no unknowns).
func (m instanceModel) toSpec(ctx context.Context) (driver.InstanceSpec, diag.Diagnostics) {
	var diags diag.Diagnostics
	spec := driver.InstanceSpec{
		Name:      m.Name.ValueString(),
		Type:      m.Type.ValueString(),
		Image:     m.Image.ValueString(),
		Workdir:   m.Workdir.ValueString(),
		User:      m.User.ValueString(),
		CPUs:      m.CPUs.ValueFloat64(),
		PidsLimit: m.PidsLimit.ValueInt64(),
		Network:   m.Network.ValueString(),
		Running:   m.Running.IsNull() || m.Running.IsUnknown() || m.Running.ValueBool(),
	}
	if known(m.PidsLimit) && m.PidsLimit.ValueInt64() == 0 {
		spec.PidsLimit = driver.PidsUnlimited // `pids_limit = 0`: no limit, not even the default
	}
	diags.Append(elementsAs(ctx, m.Command, &spec.Command)...)
	diags.Append(mapAs(ctx, m.Env, &spec.Env)...)
	diags.Append(mapAs(ctx, m.Labels, &spec.Labels)...)
	spec.MemoryBytes = parseSizeAt(path.Root("memory"), m.Memory, &diags)
	spec.DiskBytes = parseSizeAt(path.Root("disk"), m.Disk, &diags)
	if known(m.Lifetime) {
		d, err := units.ParseDuration(m.Lifetime.ValueString())
		if err != nil {
			diags.AddAttributeError(path.Root("lifetime"), "Invalid Duration", err.Error())
		}
		spec.Lifetime = d
	}
	var ports []portModel
	diags.Append(elementsAs(ctx, m.Ports, &ports)...)
	for _, p := range ports {
		spec.Ports = append(spec.Ports, driver.PortSpec{Name: p.Name.ValueString(), Port: int(p.Port.ValueInt64()), Protocol: orDefault(p.Protocol.ValueString(), "tcp")})
	}
	spec.Files = driverFiles(ctx, m.Files, &diags)
	var mounts []mountModel
	diags.Append(elementsAs(ctx, m.Volumes, &mounts)...)
	for _, v := range mounts {
		spec.Mounts = append(spec.Mounts, driver.Mount{Volume: v.Volume.ValueString(), Target: v.Target.ValueString(), ReadOnly: v.ReadOnly.ValueBool()})
	}
	spec.Security = m.securitySpec(ctx, &diags)
	return spec, diags
}

// securitySpec reads `security`; a null or unknown object gives the defaults.
func (m instanceModel) securitySpec(ctx context.Context, diags *diag.Diagnostics) driver.Security {
	obj := m.Security
	if !known(obj) {
		obj = defaultSecurity()
	}
	var s securityModel
	diags.Append(obj.As(ctx, &s, asOptions)...)
	caps := s.Capabilities
	if !known(caps) {
		caps = defaultCapabilities()
	}
	var c capabilitiesModel
	diags.Append(caps.As(ctx, &c, asOptions)...)
	out := driver.Security{
		NoNewPrivileges: boolOr(s.NoNewPrivileges, true),
		Privileged:      boolOr(s.Privileged, false),
		ReadOnlyRootfs:  boolOr(s.ReadOnlyRootfs, false),
		Init:            boolOr(s.Init, true),
	}
	diags.Append(elementsAs(ctx, c.Add, &out.CapAdd)...)
	diags.Append(elementsAs(ctx, c.Drop, &out.CapDrop)...)
	return out
}

// observedValues are the values observe and the run-state plan write; when
// none changed, Read and ModifyPlan leave the state or plan as Terraform sent
// it (setting a whole instance costs a full conversion per resource, which
// dominates the re-plan of a fleet).
func (m *instanceModel) observedValues() []attr.Value {
	return []attr.Value{m.ID, m.Name, m.Status, m.IPAddress, m.LoopbackIP, m.ExpiresAt, m.ExitCode, m.Endpoints, m.Handle, m.EngineName}
}

// refreshFields are the attributes refreshInstance reads (backend, name,
// type) or writes (observe), by name: all the server's fast Read decodes
// from a state (server.go). TestRefreshFieldsCoverObserve keeps it whole.
func (m *instanceModel) refreshFields() map[string]any {
	return map[string]any{
		"id": &m.ID, "backend": &m.Backend, "name": &m.Name, "type": &m.Type,
		"status": &m.Status, "ip_address": &m.IPAddress, "loopback_ip": &m.LoopbackIP,
		"expires_at": &m.ExpiresAt, "exit_code": &m.ExitCode, "endpoints": &m.Endpoints, "handle": &m.Handle,
		"engine_name": &m.EngineName,
	}
}

// sameObserved reports whether a and b hold the same observedValues.
func sameObserved(a, b *instanceModel) bool {
	av, bv := a.observedValues(), b.observedValues()
	for i := range av {
		if !av[i].Equal(bv[i]) {
			return false
		}
	}
	return true
}

// observe sets the computed attributes from an observed instance. The
// user's settings (running, labels, image, ...) are kept as they are: only
// what the engine decides is copied.
func (m *instanceModel) observe(inst driver.Instance) diag.Diagnostics {
	var diags diag.Diagnostics
	m.ID = types.StringValue(inst.ID)
	if !known(m.Name) { // import: the user's name comes from the engine
		m.Name = types.StringValue(orDefault(inst.Labels[driver.LabelName], inst.Name))
	}
	m.Status = types.StringValue(orDefault(inst.Status, driver.StatusUnknown))
	m.IPAddress = stringOrNull(inst.IPAddress)
	m.LoopbackIP = stringOrNull(inst.LoopbackIP)
	m.EngineName = stringOrNull(inst.EngineName)
	m.ExpiresAt = timeValue(inst.ExpiresAt)
	m.ExitCode = types.Int64Null()
	if inst.ExitCode != nil {
		m.ExitCode = types.Int64Value(int64(*inst.ExitCode))
	}
	eps := map[string]attr.Value{}
	for k, v := range inst.Endpoints {
		eps[k] = types.StringValue(v)
	}
	var d diag.Diagnostics
	m.Endpoints, d = types.MapValue(types.StringType, eps)
	diags.Append(d...)
	m.Handle, d = instanceHandleValue(m.Backend, inst.ID, m.Name.ValueString(), orDefault(inst.Type, m.Type.ValueString()))
	diags.Append(d...)
	return diags
}

// userLabels strips from engine labels the provider's own (sandbox.*) and
// the provider-level ones, leaving what the user set (import).
func userLabels(engine, providerLabels map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range engine {
		if strings.HasPrefix(k, "sandbox.") {
			continue
		}
		if pv, ok := providerLabels[k]; ok && pv == v {
			continue
		}
		out[k] = v
	}
	return out
}

// portsFromLabel decodes driver.LabelPorts ("name=port/proto,...") for import.
// The label is engine input anyone with access to the engine can edit: an
// item a configuration could not hold (a bad name, a port outside 1-65535,
// another protocol) is left out rather than imported into state.
func portsFromLabel(s string) []driver.PortSpec {
	var out []driver.PortSpec
	for _, item := range strings.Split(s, ",") {
		name, rest, ok := strings.Cut(item, "=")
		if !ok || !portNameRegexp.MatchString(name) {
			continue
		}
		port, proto, _ := strings.Cut(rest, "/")
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strings.TrimLeft(port, "0123456789") != "" {
			continue
		}
		if proto = orDefault(proto, "tcp"); !slices.Contains(enumStrings(protocolValues), proto) {
			continue
		}
		out = append(out, driver.PortSpec{Name: name, Port: n, Protocol: proto})
	}
	return out
}

func portsValue(ports []driver.PortSpec) (types.List, diag.Diagnostics) {
	if len(ports) == 0 {
		return types.ListNull(types.ObjectType{AttrTypes: portAttrTypes}), nil
	}
	var elems []attr.Value
	for _, p := range ports {
		elems = append(elems, types.ObjectValueMust(portAttrTypes, map[string]attr.Value{
			"name": types.StringValue(p.Name), "port": types.Int64Value(int64(p.Port)), "protocol": types.StringValue(p.Protocol),
		}))
	}
	return types.ListValue(types.ObjectType{AttrTypes: portAttrTypes}, elems)
}

// Small value helpers.

func known(v attr.Value) bool { return !v.IsNull() && !v.IsUnknown() }

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func stringOrNull(s string) types.String {
	if s == "" {
		return types.StringNull()
	}
	return types.StringValue(s)
}

// timeValue renders t as RFC 3339, null when zero.
func timeValue(t time.Time) types.String {
	if t.IsZero() {
		return types.StringNull()
	}
	return types.StringValue(t.UTC().Format(time.RFC3339))
}

func boolOr(b types.Bool, def bool) bool {
	if !known(b) {
		return def
	}
	return b.ValueBool()
}

func parseSizeAt(at path.Path, v types.String, diags *diag.Diagnostics) int64 {
	if !known(v) {
		return 0
	}
	n, err := units.ParseSize(v.ValueString())
	if err != nil {
		diags.AddAttributeError(at, "Invalid Size", err.Error())
	}
	return n
}

func elementsAs[T any](ctx context.Context, l types.List, target *[]T) diag.Diagnostics {
	if !known(l) {
		return nil
	}
	return l.ElementsAs(ctx, target, false)
}

func mapAs(ctx context.Context, m types.Map, target *map[string]string) diag.Diagnostics {
	if !known(m) {
		return nil
	}
	return m.ElementsAs(ctx, target, false)
}
