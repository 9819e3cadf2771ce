package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
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

// instanceState is an instance value with every attribute null except
// those given.
func instanceState(t *testing.T, typ tftypes.Type, set map[string]tftypes.Value) *tfprotov6.DynamicValue {
	t.Helper()
	attrs := map[string]tftypes.Value{}
	for name, at := range typ.(tftypes.Object).AttributeTypes {
		attrs[name] = tftypes.NewValue(at, nil)
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
	s := &server{ProviderServer: inner, instanceType: instanceSchema(ctx).Type().TerraformType(ctx)}
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
			TypeName: instanceTypeName, PriorState: state, ProposedNewState: state, PriorPrivate: []byte("p"),
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
	s := &server{ProviderServer: inner, instanceType: instanceSchema(ctx).Type().TerraformType(ctx)}
	running := map[string]tftypes.Value{
		"running": tftypes.NewValue(tftypes.Bool, true), "status": tftypes.NewValue(tftypes.String, driver.StatusRunning),
	}
	prior := instanceState(t, s.instanceType, running)
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
	for name, req := range map[string]*tfprotov6.PlanResourceChangeRequest{
		"create":       {TypeName: instanceTypeName, ProposedNewState: prior},
		"destroy":      {TypeName: instanceTypeName, PriorState: prior},
		"change":       {TypeName: instanceTypeName, PriorState: prior, ProposedNewState: instanceState(t, s.instanceType, changed)},
		"another type": {TypeName: "sandbox_volume", PriorState: prior, ProposedNewState: prior},
		"file source":  {TypeName: instanceTypeName, PriorState: withSource, ProposedNewState: withSource},
		"unchanged":    {TypeName: instanceTypeName, PriorState: prior, ProposedNewState: prior},
	} {
		before := inner.planned
		if _, err := s.PlanResourceChange(ctx, req); err != nil {
			t.Fatal(err)
		}
		if want := name != "unchanged"; (inner.planned > before) != want {
			t.Errorf("%s: reached the framework = %v, want %v", name, inner.planned > before, want)
		}
	}
}
