package provider

// The sandbox_initializer model and its conversions: Terraform values ->
// initplan.Input (toInput), initplan errors -> attribute paths, and
// initplan.Results -> the computed `results`.

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/initplan"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/units"
)

type initializerModel struct {
	ID                types.String `tfsdk:"id"`
	Instance          types.Object `tfsdk:"instance"`
	Kind              types.String `tfsdk:"kind"`
	Settings          types.Map    `tfsdk:"settings"`
	SensitiveSettings types.Map    `tfsdk:"sensitive_settings"`
	Files             types.List   `tfsdk:"files"`
	Commands          types.List   `tfsdk:"commands"`
	Env               types.Map    `tfsdk:"env"`
	Service           types.Object `tfsdk:"service"`
	OnDestroy         types.List   `tfsdk:"on_destroy"`
	Triggers          types.Map    `tfsdk:"triggers"`

	Results        types.List   `tfsdk:"results"`
	ReadyAt        types.String `tfsdk:"ready_at"`
	ServiceLog     types.String `tfsdk:"service_log"`
	ServiceRunning types.Bool   `tfsdk:"service_running"`

	Timeouts timeouts.Value `tfsdk:"timeouts"`
}

type serviceModel struct {
	Command types.List   `tfsdk:"command"`
	Workdir types.String `tfsdk:"workdir"`
	User    types.String `tfsdk:"user"`
	Ready   types.Object `tfsdk:"ready"`
	Timeout types.String `tfsdk:"timeout"`
}

type readyModel struct {
	TCPPort types.Int64  `tfsdk:"tcp_port"`
	HTTP    types.Object `tfsdk:"http"`
	Command types.List   `tfsdk:"command"`
}

type httpReadyModel struct {
	Port   types.Int64  `tfsdk:"port"`
	Path   types.String `tfsdk:"path"`
	Status types.Int64  `tfsdk:"status"`
}

var resultAttrTypes = map[string]attr.Type{
	"description": types.StringType,
	"command":     types.ListType{ElemType: types.StringType},
	"exit_code":   types.Int64Type,
	"stdout":      types.StringType,
	"stderr":      types.StringType,
}

// inputs are the attributes that decide what runs; all must be known
// before the initializer can be expanded.
func (m initializerModel) inputs() []attr.Value {
	return []attr.Value{m.Kind, m.Settings, m.SensitiveSettings, m.Files, m.Commands, m.Env, m.Service, m.OnDestroy}
}

// valuesKnown reports whether every value, however deeply nested, is known.
func valuesKnown(ctx context.Context, vs ...attr.Value) bool {
	for _, v := range vs {
		tv, err := v.ToTerraformValue(ctx)
		if err != nil || !tv.IsFullyKnown() {
			return false
		}
	}
	return true
}

// toInput converts the model into an initplan.Input named name. It also
// returns the values of sensitive_settings, which the plan masks.
func (m initializerModel) toInput(ctx context.Context, name string) (initplan.Input, []string, diag.Diagnostics) {
	var diags diag.Diagnostics
	in := initplan.Input{Name: name, Kind: m.Kind.ValueString()}
	var plain, secret map[string]string
	diags.Append(mapAs(ctx, m.Settings, &plain)...)
	diags.Append(mapAs(ctx, m.SensitiveSettings, &secret)...)
	in.Settings, diags = mergeSettings(plain, secret, diags)
	diags.Append(mapAs(ctx, m.Env, &in.Env)...)
	in.Files = driverFiles(ctx, m.Files, &diags)
	diags.Append(elementsAs(ctx, m.Commands, &in.Commands)...)
	diags.Append(elementsAs(ctx, m.OnDestroy, &in.OnDestroy)...)
	in.Service = serviceInput(ctx, m.Service, &diags)
	var secrets []string
	for _, v := range secret {
		secrets = append(secrets, v)
	}
	return in, secrets, diags
}

// mergeSettings joins settings and sensitive_settings; a key in both is an
// error, since it is not clear which one the user meant.
func mergeSettings(plain, secret map[string]string, diags diag.Diagnostics) (map[string]string, diag.Diagnostics) {
	out := make(map[string]string, len(plain)+len(secret))
	for k, v := range plain {
		out[k] = v
	}
	for k, v := range secret {
		if _, dup := plain[k]; dup {
			diags.AddAttributeError(path.Root("sensitive_settings").AtMapKey(k), "Setting Given Twice",
				fmt.Sprintf("The setting %q is in both settings and sensitive_settings; keep it in one of them.", k))
		}
		out[k] = v
	}
	return out, diags
}

func serviceInput(ctx context.Context, o types.Object, diags *diag.Diagnostics) *initplan.Service {
	if o.IsNull() || o.IsUnknown() {
		return nil
	}
	var sm serviceModel
	if diags.Append(o.As(ctx, &sm, asOptions)...); diags.HasError() {
		return nil
	}
	svc := &initplan.Service{Workdir: sm.Workdir.ValueString(), User: sm.User.ValueString()}
	diags.Append(elementsAs(ctx, sm.Command, &svc.Command)...)
	if t := sm.Timeout.ValueString(); t != "" {
		d, err := units.ParseDuration(t)
		if err != nil {
			diags.AddAttributeError(path.Root("service").AtName("timeout"), "Invalid Duration", err.Error())
		}
		svc.Timeout = d
	}
	svc.Ready = readyInput(ctx, sm.Ready, diags)
	return svc
}

func readyInput(ctx context.Context, o types.Object, diags *diag.Diagnostics) initplan.Ready {
	var r initplan.Ready
	if o.IsNull() || o.IsUnknown() {
		return r
	}
	var rm readyModel
	if diags.Append(o.As(ctx, &rm, asOptions)...); diags.HasError() {
		return r
	}
	r.TCPPort = int(rm.TCPPort.ValueInt64())
	diags.Append(elementsAs(ctx, rm.Command, &r.Command)...)
	if !rm.HTTP.IsNull() && !rm.HTTP.IsUnknown() {
		var hm httpReadyModel
		diags.Append(rm.HTTP.As(ctx, &hm, asOptions)...)
		r.HTTP = &initplan.HTTPReady{Port: int(hm.Port.ValueInt64()), Path: hm.Path.ValueString(), Status: int(hm.Status.ValueInt64())}
	}
	return r
}

// expand converts the model and expands it; the plan masks the values of
// sensitive_settings as well as the kind's own secrets.
func (m initializerModel) expand(ctx context.Context, name string) (initplan.Plan, diag.Diagnostics) {
	in, secrets, diags := m.toInput(ctx, name)
	if diags.HasError() {
		return initplan.Plan{}, diags
	}
	p, err := initplan.Expand(in)
	if err != nil {
		diags.Append(expandDiagnostic(err, m.SensitiveSettings))
		return p, diags
	}
	p.Secrets = append(p.Secrets, nonEmptyStrings(secrets)...)
	return p, diags
}

func nonEmptyStrings(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// expandDiagnostic attaches an initplan validation error ("files[0].path:
// ...") to the attribute it names.
// Values of sensitive_settings are masked in the message.
func expandDiagnostic(err error, sensitive types.Map) diag.Diagnostic {
	const sum = "Invalid Sandbox Initializer"
	msg := err.Error()
	at, ok := initplanErrorPath(msg, sensitive)
	for k, v := range sensitive.Elements() {
		if s, isStr := v.(types.String); isStr && s.ValueString() != "" {
			msg = strings.ReplaceAll(msg, s.ValueString(), "(sensitive)")
		}
		msg = strings.ReplaceAll(msg, "settings."+k+":", "sensitive_settings."+k+":")
	}
	if !ok {
		return diag.NewErrorDiagnostic(sum, msg)
	}
	return diag.NewAttributeErrorDiagnostic(at, sum, msg)
}

// errPathSegment is one step of an initplan error path: a name and an
// optional [index].
var errPathSegment = regexp.MustCompile(`^([a-z_]+)(?:\[(\d+)\])?$`)

// initplanErrorPath parses the path prefix of an initplan error. Settings
// keys found in sensitive_settings are reported there.
func initplanErrorPath(msg string, sensitive types.Map) (path.Path, bool) {
	prefix, _, found := strings.Cut(msg, ": ")
	if !found {
		return path.Empty(), false
	}
	prefix, _, _ = strings.Cut(prefix, " ") // "settings.a and settings.b"
	if key, isSetting := strings.CutPrefix(prefix, "settings."); isSetting {
		root := "settings"
		if _, ok := sensitive.Elements()[key]; ok {
			root = "sensitive_settings"
		}
		return path.Root(root).AtMapKey(key), true
	}
	if key, isEnv := strings.CutPrefix(prefix, "env."); isEnv {
		return path.Root("env").AtMapKey(key), true
	}
	var p path.Path
	for i, seg := range strings.Split(prefix, ".") {
		m := errPathSegment.FindStringSubmatch(seg)
		if m == nil {
			return path.Empty(), false
		}
		if i == 0 {
			if _, ok := initializerInputAttributes()[m[1]]; !ok {
				return path.Empty(), false
			}
			p = path.Root(m[1])
		} else {
			p = p.AtName(m[1])
		}
		if m[2] != "" {
			n, _ := strconv.Atoi(m[2])
			p = p.AtListIndex(n)
		}
	}
	return p, true
}

// resultsValue converts initplan results into the `results` list.
func resultsValue(rs []initplan.Result) (types.List, diag.Diagnostics) {
	var diags diag.Diagnostics
	elems := make([]attr.Value, 0, len(rs))
	for _, r := range rs {
		cmd, d := types.ListValueFrom(context.Background(), types.StringType, r.Command)
		diags.Append(d...)
		obj, d := types.ObjectValue(resultAttrTypes, map[string]attr.Value{
			"description": types.StringValue(r.Description),
			"command":     cmd,
			"exit_code":   types.Int64Value(int64(r.ExitCode)),
			"stdout":      types.StringValue(r.Stdout),
			"stderr":      types.StringValue(r.Stderr),
		})
		diags.Append(d...)
		elems = append(elems, obj)
	}
	l, d := types.ListValue(types.ObjectType{AttrTypes: resultAttrTypes}, elems)
	diags.Append(d...)
	return l, diags
}
