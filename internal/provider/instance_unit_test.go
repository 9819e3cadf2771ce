package provider

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/names"
)

func TestInstanceSchemaIsValid(t *testing.T) {
	ctx := context.Background()
	if diags := instanceSchema(ctx).ValidateImplementation(ctx); diags.HasError() {
		t.Fatalf("schema: %v", diags)
	}
}

func TestGeneratedNameIsValid(t *testing.T) {
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		n := generatedName()
		if err := names.ValidateName(n); err != nil {
			t.Fatal(err)
		}
		seen[n] = true
	}
	if len(seen) < 100 {
		t.Errorf("generated names repeat: %d distinct of 100", len(seen))
	}
}

func TestPortsFromLabel(t *testing.T) {
	// The label is engine input: items no configuration could hold (port 0,
	// -5 or 65536, "80x", sctp, a bad name) are left out, not imported.
	got := portsFromLabel("http=8080/tcp,dns=53/udp,bad,x=y/tcp,plain=22," +
		"zero=0/tcp,neg=-5/tcp,big=65536/tcp,trail=80x/tcp,plus=+80/tcp,s=80/sctp,Upper=80/tcp,=80/tcp,sub=80/tcp/x")
	want := []driver.PortSpec{{Name: "http", Port: 8080, Protocol: "tcp"}, {Name: "dns", Port: 53, Protocol: "udp"}, {Name: "plain", Port: 22, Protocol: "tcp"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("portsFromLabel = %v, want %v", got, want)
	}
}

func TestUserLabels(t *testing.T) {
	engine := map[string]string{driver.LabelManagedBy: "x", driver.LabelName: "n", "team": "a", "env": "prod", "owner": "me"}
	got := userLabels(engine, map[string]string{"env": "prod", "owner": "you"})
	want := map[string]string{"team": "a", "owner": "me"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("userLabels = %v, want %v", got, want)
	}
}

func TestPlanRunState(t *testing.T) {
	eps := types.MapValueMust(types.StringType, nil)
	cases := []struct {
		running bool
		status  string
		change  bool
	}{
		{true, driver.StatusRunning, false},
		{true, driver.StatusStopped, true},
		{true, driver.StatusCreated, true},
		{true, driver.StatusExpired, false},
		{false, driver.StatusRunning, true},
		{false, driver.StatusStopped, false},
		{false, driver.StatusExpired, false},
	}
	for _, c := range cases {
		state := instanceModel{Status: types.StringValue(c.status), IPAddress: types.StringValue("10.0.0.2"), Endpoints: eps}
		plan := instanceModel{Running: types.BoolValue(c.running), Status: types.StringUnknown(), IPAddress: types.StringUnknown(), Endpoints: types.MapUnknown(types.StringType)}
		var diags diag.Diagnostics
		planRunState(&plan, state, &diags)
		if got := plan.Status.IsUnknown(); got != c.change {
			t.Errorf("running=%v status=%s: status unknown = %v, want %v", c.running, c.status, got, c.change)
		}
		if !c.change && (!plan.IPAddress.Equal(state.IPAddress) || !plan.Endpoints.Equal(eps)) {
			t.Errorf("running=%v status=%s: observed values not kept", c.running, c.status)
		}
	}
}

func TestInstanceHandleRoundTrip(t *testing.T) {
	ctx := context.Background()
	cfg := driver.Config{Driver: driver.Docker, Name: "gpu", Docker: &driver.DockerConfig{Host: "unix:///var/run/docker.sock", Internal: true}}
	backend, diags := HandleFromConfig(cfg)
	if diags.HasError() {
		t.Fatal(diags)
	}
	h, diags := instanceHandleValue(backend, "abc123", "worker-0", driver.TypeContainer)
	if diags.HasError() {
		t.Fatal(diags)
	}
	ref, diags := InstanceFromHandle(ctx, h)
	if diags.HasError() {
		t.Fatal(diags)
	}
	if ref.ID != "abc123" || ref.Name != "worker-0" || ref.Type != driver.TypeContainer || ref.Config.Key() != cfg.Key() {
		t.Errorf("round trip: %+v", ref)
	}
	if _, diags := InstanceFromHandle(ctx, types.ObjectUnknown(instanceHandleAttrTypes())); !diags.HasError() {
		t.Error("an unknown handle must be an error")
	}
}

func TestImportedRunning(t *testing.T) {
	for status, want := range map[string]bool{
		driver.StatusRunning: true,
		driver.StatusUnknown: true,
		driver.StatusStopped: false,
		driver.StatusCreated: false,
		driver.StatusExpired: false, // its lifetime ended: it does not run, and cannot again
	} {
		if got := importedRunning(status); got != want {
			t.Errorf("importedRunning(%q) = %v, want %v", status, got, want)
		}
	}
}

// A command that ended by itself is not started again by every apply: the
// plan keeps it stopped and warns once per plan.
func TestPlanRunStateCommandExited(t *testing.T) {
	state := instanceModel{Name: types.StringValue("job"), Status: types.StringValue(driver.StatusStopped), ExitCode: types.Int64Value(0),
		Endpoints: types.MapNull(types.StringType)}
	plan := instanceModel{Running: types.BoolValue(true), Status: types.StringUnknown(), ExitCode: types.Int64Unknown()}
	var diags diag.Diagnostics
	planRunState(&plan, state, &diags)
	if plan.Status.IsUnknown() || !plan.ExitCode.Equal(types.Int64Value(0)) {
		t.Errorf("an exited command must not plan a start: status %v, exit_code %v", plan.Status, plan.ExitCode)
	}
	if diags.WarningsCount() != 1 || !strings.Contains(diags[0].Detail(), "exited with code 0") {
		t.Errorf("want one warning naming the exit code, got %v", diags)
	}
}

func TestExitedByItself(t *testing.T) {
	for code, want := range map[int]bool{0: true, 1: true, 127: true, 124: false, 130: false, 137: false, 143: false, -1: false} {
		if got := driver.ExitedByItself(code); got != want {
			t.Errorf("ExitedByItself(%d) = %v, want %v", code, got, want)
		}
	}
}

// A privileged sandbox and added capabilities are named in the plan, at the
// attribute that asks for them; the hardened default warns of nothing.
func TestWarnRelaxedSecurity(t *testing.T) {
	var quiet diag.Diagnostics
	warnRelaxedSecurity(driver.Security{NoNewPrivileges: true, Init: true}, &quiet)
	if len(quiet) != 0 {
		t.Errorf("the default security warns: %v", quiet)
	}
	var diags diag.Diagnostics
	warnRelaxedSecurity(driver.Security{Privileged: true, CapAdd: []string{"NET_ADMIN", "SYS_PTRACE"}}, &diags)
	if len(diags) != 2 || diags.HasError() {
		t.Fatalf("want two warnings, got %v", diags)
	}
	for i, want := range []string{"privileged", "NET_ADMIN, SYS_PTRACE"} {
		if !strings.Contains(diags[i].Detail(), want) {
			t.Errorf("warning %d does not name %q: %s", i, want, diags[i].Detail())
		}
	}
	if p := diags[1].(diag.DiagnosticWithPath).Path(); !p.Equal(path.Root("security").AtName("capabilities").AtName("add")) {
		t.Errorf("the capabilities warning is at %s", p)
	}
}
