package provider

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// recordingServer stands in for the framework: it records whether the
// plan reached it.
type recordingServer struct {
	tfprotov6.ProviderServer
	planned int
}

func (r *recordingServer) PlanResourceChange(context.Context, *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	r.planned++
	return &tfprotov6.PlanResourceChangeResponse{}, nil
}

// instanceState is an instance value as apply stores it: the schema's
// defaults, every other attribute null, and those given.
func instanceState(t *testing.T, typ tftypes.Type, set map[string]tftypes.Value) *tfprotov6.DynamicValue {
	t.Helper()
	ctx := context.Background()
	attrs := map[string]tftypes.Value{}
	for name, a := range instanceSchema(ctx).Attributes {
		attrs[name] = tftypes.NewValue(a.GetType().TerraformType(ctx), nil)
		if def, ok := defaultValue(ctx, a, path.Root(name)); ok {
			attrs[name] = def
		}
	}
	for name, v := range set {
		attrs[name] = v
	}
	dv, err := tfprotov6.NewDynamicValue(typ, tftypes.NewValue(typ, attrs))
	if err != nil {
		t.Fatal(err)
	}
	return &dv
}

// The fast path answers exactly when the framework's ModifyPlan would
// change nothing and warn of nothing (planRunState is the reference).
func TestFastPlanAgreesWithPlanRunState(t *testing.T) {
	ctx := context.Background()
	inner := &recordingServer{}
	s := newServer(inner, nil)
	exit := func(code int64) tftypes.Value { return tftypes.NewValue(tftypes.Number, code) }
	for _, c := range []struct {
		running bool
		status  string
		exit    tftypes.Value
	}{
		{true, driver.StatusRunning, tftypes.NewValue(tftypes.Number, nil)},
		{true, driver.StatusStopped, tftypes.NewValue(tftypes.Number, nil)},
		{true, driver.StatusStopped, exit(0)},
		{true, driver.StatusCreated, tftypes.NewValue(tftypes.Number, nil)},
		{true, driver.StatusExpired, tftypes.NewValue(tftypes.Number, nil)},
		{false, driver.StatusRunning, tftypes.NewValue(tftypes.Number, nil)},
		{false, driver.StatusStopped, exit(3)},
		{false, driver.StatusExpired, tftypes.NewValue(tftypes.Number, nil)},
	} {
		state := instanceState(t, s.instanceType, map[string]tftypes.Value{
			"running":   tftypes.NewValue(tftypes.Bool, c.running),
			"status":    tftypes.NewValue(tftypes.String, c.status),
			"exit_code": c.exit,
		})
		before := inner.planned
		resp, err := s.PlanResourceChange(ctx, &tfprotov6.PlanResourceChangeRequest{
			TypeName: instanceTypeName, PriorState: state, ProposedNewState: state, Config: state, PriorPrivate: []byte("p"),
		})
		if err != nil {
			t.Fatal(err)
		}
		fast := inner.planned == before

		var diags diag.Diagnostics
		ref := instanceModel{Running: types.BoolValue(c.running), Status: types.StringValue(c.status), ExitCode: types.Int64Null()}
		if !c.exit.IsNull() {
			var code int64
			_ = c.exit.As(&code)
			ref.ExitCode = types.Int64Value(code)
		}
		plan := ref
		planRunState(&plan, ref, &diags)
		quiet := !plan.Status.IsUnknown() && len(diags) == 0
		if fast != quiet {
			t.Errorf("running=%v status=%s exit=%v: fast path %v, but ModifyPlan changes or warns: %v", c.running, c.status, c.exit, fast, !quiet)
		}
		if fast && (resp.PlannedState != state || string(resp.PlannedPrivate) != "p") {
			t.Errorf("running=%v status=%s: the fast plan is not the prior state", c.running, c.status)
		}
	}
}

func TestFastPlanOnlyForUnchangedInstances(t *testing.T) {
	ctx := context.Background()
	inner := &recordingServer{}
	s := newServer(inner, nil)
	running := map[string]tftypes.Value{
		"running": tftypes.NewValue(tftypes.Bool, true), "status": tftypes.NewValue(tftypes.String, driver.StatusRunning),
	}
	prior := instanceState(t, s.instanceType, running)
	// `running = false` applied, then left out: the default (true) is planned.
	stopped := instanceState(t, s.instanceType, map[string]tftypes.Value{
		"running": tftypes.NewValue(tftypes.Bool, false), "status": tftypes.NewValue(tftypes.String, driver.StatusStopped),
	})
	runningLeftOut := instanceState(t, s.instanceType, map[string]tftypes.Value{"running": tftypes.NewValue(tftypes.Bool, nil)})
	changed := map[string]tftypes.Value{"memory": tftypes.NewValue(tftypes.String, "256MiB")}
	for k, v := range running {
		changed[k] = v
	}
	fileType := s.instanceType.(tftypes.Object).AttributeTypes["files"].(tftypes.List).ElementType.(tftypes.Object)
	file := map[string]tftypes.Value{}
	for name, at := range fileType.AttributeTypes {
		file[name] = tftypes.NewValue(at, nil)
	}
	file["path"] = tftypes.NewValue(tftypes.String, "/x")
	file["source"] = tftypes.NewValue(tftypes.String, "/tmp/x")
	sourced := map[string]tftypes.Value{"files": tftypes.NewValue(tftypes.List{ElementType: fileType},
		[]tftypes.Value{tftypes.NewValue(fileType, file)})}
	for k, v := range running {
		sourced[k] = v
	}
	withSource := instanceState(t, s.instanceType, sourced)
	nullValue, err := tfprotov6.NewDynamicValue(s.instanceType, tftypes.NewValue(s.instanceType, nil))
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		req  *tfprotov6.PlanResourceChangeRequest
		fast bool
	}{
		"create":              {&tfprotov6.PlanResourceChangeRequest{TypeName: instanceTypeName, ProposedNewState: prior}, false},
		"destroy":             {&tfprotov6.PlanResourceChangeRequest{TypeName: instanceTypeName, PriorState: prior, ProposedNewState: &nullValue}, true},
		"destroy, no value":   {&tfprotov6.PlanResourceChangeRequest{TypeName: instanceTypeName, PriorState: prior}, false},
		"destroy of nothing":  {&tfprotov6.PlanResourceChangeRequest{TypeName: instanceTypeName, PriorState: &nullValue, ProposedNewState: &nullValue}, false},
		"change":              {&tfprotov6.PlanResourceChangeRequest{TypeName: instanceTypeName, PriorState: prior, ProposedNewState: instanceState(t, s.instanceType, changed)}, false},
		"another type":        {&tfprotov6.PlanResourceChangeRequest{TypeName: "sandbox_volume", PriorState: prior, ProposedNewState: prior}, false},
		"another type's drop": {&tfprotov6.PlanResourceChangeRequest{TypeName: "sandbox_volume", PriorState: prior, ProposedNewState: &nullValue}, false},
		"file source":         {&tfprotov6.PlanResourceChangeRequest{TypeName: instanceTypeName, PriorState: withSource, ProposedNewState: withSource}, false},
		"unchanged":           {&tfprotov6.PlanResourceChangeRequest{TypeName: instanceTypeName, PriorState: prior, ProposedNewState: prior, Config: prior}, true},
		"no configuration":    {&tfprotov6.PlanResourceChangeRequest{TypeName: instanceTypeName, PriorState: prior, ProposedNewState: prior}, false},
		"default removed":     {&tfprotov6.PlanResourceChangeRequest{TypeName: instanceTypeName, PriorState: stopped, ProposedNewState: stopped, Config: runningLeftOut}, false},
	} {
		before := inner.planned
		resp, err := s.PlanResourceChange(ctx, c.req)
		if err != nil {
			t.Fatal(err)
		}
		if fast := inner.planned == before; fast != c.fast {
			t.Errorf("%s: answered by the fast path = %v, want %v", name, fast, c.fast)
		}
		if name == "destroy" && resp.PlannedState != c.req.ProposedNewState {
			t.Errorf("destroy: the fast plan is not the null proposed state")
		}
	}
}

// The fast Read decodes only refreshFields; observed from the same sandbox,
// that partial model must agree with the framework's full decoding on every
// value Read compares or writes, in whatever state the instance is.
func TestRefreshFieldsCoverObserve(t *testing.T) {
	ctx := context.Background()
	s := newServer(&recordingServer{}, nil)
	cfg, err := ConfigFromSettings("docker", "fleet", map[string]string{"host": "unix:///var/run/docker.sock"})
	if err != nil {
		t.Fatal(err)
	}
	backend, diags := HandleFromConfig(cfg)
	if diags.HasError() {
		t.Fatal(diags)
	}
	handle, diags := instanceHandleValue(backend, "c1", "w0", "container")
	if diags.HasError() {
		t.Fatal(diags)
	}
	tf := func(v interface {
		ToTerraformValue(context.Context) (tftypes.Value, error)
	}) tftypes.Value {
		out, err := v.ToTerraformValue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	str := func(v string) tftypes.Value { return tftypes.NewValue(tftypes.String, v) }
	state := instanceState(t, s.instanceType, map[string]tftypes.Value{
		"id": str("c1"), "backend": tf(backend), "handle": tf(handle), "name": str("w0"), "type": str("container"),
		"image": str("busybox"), "status": str(driver.StatusRunning), "ip_address": str("10.0.0.2"),
		"loopback_ip": str("127.0.0.7"), "expires_at": str("2026-11-21T15:00:00Z"), "memory": str("64MiB"),
		"endpoints": tf(types.MapValueMust(types.StringType, map[string]attr.Value{"http": types.StringValue("127.0.0.7:80")})),
		"running":   tftypes.NewValue(tftypes.Bool, true),
	})
	raw, err := state.Unmarshal(s.instanceType)
	if err != nil {
		t.Fatal(err)
	}
	var full instanceModel
	if d := (tfsdk.State{Schema: instanceSchema(ctx), Raw: raw}).Get(ctx, &full); d.HasError() {
		t.Fatal(d)
	}
	partial, err := s.refreshModel(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	same := func(when string, a, b *instanceModel) {
		fa, fb := a.refreshFields(), b.refreshFields()
		for name := range fa {
			va, vb := reflect.ValueOf(fa[name]).Elem().Interface().(attr.Value), reflect.ValueOf(fb[name]).Elem().Interface().(attr.Value)
			if !va.Equal(vb) {
				t.Errorf("%s: %s = %v from the full decoding, %v from the fast one", when, name, va, vb)
			}
		}
	}
	same("decoded", &full, &partial)

	exit := 3
	expires := time.Date(2026, 11, 21, 15, 0, 0, 0, time.UTC)
	for name, inst := range map[string]driver.Instance{
		"as in state": {ID: "c1", Type: "container", Status: driver.StatusRunning, IPAddress: "10.0.0.2", LoopbackIP: "127.0.0.7",
			ExpiresAt: expires, Endpoints: map[string]string{"http": "127.0.0.7:80"}},
		"stopped outside": {ID: "c1", Type: "container", Status: driver.StatusStopped, LoopbackIP: "127.0.0.7", ExpiresAt: expires},
		"ended by itself": {ID: "c1", Type: "container", Status: driver.StatusStopped, ExitCode: &exit, LoopbackIP: "127.0.0.7", ExpiresAt: expires},
		"new address": {ID: "c1", Type: "container", Status: driver.StatusRunning, IPAddress: "10.0.0.9", LoopbackIP: "127.0.0.7",
			ExpiresAt: expires, Endpoints: map[string]string{"http": "127.0.0.7:80"}},
	} {
		f, p := full, partial
		if d := f.observe(inst); d.HasError() {
			t.Fatal(d)
		}
		if d := p.observe(inst); d.HasError() {
			t.Fatal(d)
		}
		same(name, &f, &p)
		if changedFull, changedFast := !sameObserved(&full, &f), !sameObserved(&partial, &p); changedFull != changedFast {
			t.Errorf("%s: changed = %v by the full model, %v by the fast one", name, changedFull, changedFast)
		}
		if name == "as in state" && !sameObserved(&full, &f) {
			t.Errorf("as in state: observe changed the model")
		}
	}
}

// BenchmarkFastPlan is the fast path's decision for one unchanged sandbox,
// the cost a re-plan pays per instance (make bench measures whole fleets).
func BenchmarkFastPlan(b *testing.B) {
	s := newServer(&recordingServer{}, nil)
	state := instanceState(&testing.T{}, s.instanceType, map[string]tftypes.Value{
		"running": tftypes.NewValue(tftypes.Bool, true), "status": tftypes.NewValue(tftypes.String, driver.StatusRunning),
		"image": tftypes.NewValue(tftypes.String, "busybox"), "memory": tftypes.NewValue(tftypes.String, "64MiB"),
	})
	config := instanceState(&testing.T{}, s.instanceType, map[string]tftypes.Value{
		"running": tftypes.NewValue(tftypes.Bool, nil), "type": tftypes.NewValue(tftypes.String, nil),
		"network": tftypes.NewValue(tftypes.String, nil), "security": tftypes.NewValue(s.instanceType.(tftypes.Object).AttributeTypes["security"], nil),
		"image": tftypes.NewValue(tftypes.String, "busybox"), "memory": tftypes.NewValue(tftypes.String, "64MiB"),
	})
	req := &tfprotov6.PlanResourceChangeRequest{TypeName: instanceTypeName, PriorState: state, ProposedNewState: state, Config: config}
	for b.Loop() {
		if !s.instanceUnchanged(req) {
			b.Fatal("not answered by the fast path")
		}
	}
}
