package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// scopeFake answers Info and ScopeExists; anything else panics.
type scopeFake struct {
	driver.Driver
	exists bool
}

func (f *scopeFake) ScopeExists(context.Context) (bool, error) { return f.exists, nil }
func (f *scopeFake) Info(context.Context) (driver.Info, error) {
	return driver.Info{EngineVersion: "fake 1", OS: "linux", Arch: "amd64", CPUs: 2, MemoryBytes: 1 << 30, Capabilities: []string{driver.CapContainers}}, nil
}
func (f *scopeFake) Close() error { return nil }

// readBackend runs backendResource.Read on a state whose handle names a
// fake driver.
func readBackend(t *testing.T, f *scopeFake) *resource.ReadResponse {
	t.Helper()
	ctx := context.Background()
	name := "fake-scope-" + t.Name()
	driver.Register(name, func(context.Context, driver.Config) (driver.Driver, error) { return f, nil })
	handle, diags := HandleFromConfig(driver.Config{Driver: name, Name: "b"})
	if diags.HasError() {
		t.Fatal(diags)
	}
	s := backendSchema()
	m := backendModel{ID: types.StringValue("x"), Name: types.StringValue("b"), Handle: handle, Driver: types.StringValue(name),
		EngineVersion: types.StringNull(), OS: types.StringNull(), Arch: types.StringNull(), CPUs: types.Int64Null(),
		MemoryBytes: types.Int64Null(), Capabilities: types.SetNull(types.StringType)}
	for d, o := range m.blocks() {
		*o = types.ObjectNull(handleBlockAttrTypes(d))
	}
	state := tfsdk.State{Schema: s, Raw: tftypes.NewValue(s.Type().TerraformType(ctx), nil)}
	if diags := state.Set(ctx, &m); diags.HasError() {
		t.Fatal(diags)
	}
	r := &backendResource{configured{data: NewProviderData(driver.NewPool(), nil, driver.Secrets{})}}
	resp := &resource.ReadResponse{State: state}
	r.Read(ctx, resource.ReadRequest{State: state}, resp)
	if resp.Diagnostics.HasError() {
		t.Fatal(resp.Diagnostics)
	}
	return resp
}

func TestBackendReadRemovesWhenScopeIsGone(t *testing.T) {
	if resp := readBackend(t, &scopeFake{exists: false}); !resp.State.Raw.IsNull() {
		t.Fatal("a backend whose scope is gone must leave the state")
	}
}

func TestBackendReadObservesEngine(t *testing.T) {
	resp := readBackend(t, &scopeFake{exists: true})
	var got types.String
	resp.State.GetAttribute(context.Background(), path.Root("engine_version"), &got)
	if got.ValueString() != "fake 1" {
		t.Fatalf("engine_version = %v", got)
	}
	var caps types.Set
	resp.State.GetAttribute(context.Background(), path.Root("capabilities"), &caps)
	if !caps.Equal(types.SetValueMust(types.StringType, []attr.Value{types.StringValue(driver.CapContainers)})) {
		t.Fatalf("capabilities = %v", caps)
	}
}

// An Incus backend on the server-wide default network is warned about at
// its creation; one on a network of its own, or another driver, is not.
func TestWarnSharedIncusNetwork(t *testing.T) {
	for _, c := range []struct {
		cfg  driver.Config
		warn bool
	}{
		{driver.Config{Driver: driver.Incus, Incus: &driver.IncusConfig{}}, true},
		{driver.Config{Driver: driver.Incus, Incus: &driver.IncusConfig{Network: driver.IncusDefaultNetwork}}, true},
		{driver.Config{Driver: driver.Incus, Incus: &driver.IncusConfig{Network: "sandbox-net"}}, false},
		{driver.Config{Driver: driver.Docker, Docker: &driver.DockerConfig{}}, false},
	} {
		var diags diag.Diagnostics
		warnSharedIncusNetwork(c.cfg, &diags)
		if got := len(diags) == 1 && !diags.HasError(); got != c.warn || (!c.warn && len(diags) > 0) {
			t.Errorf("%+v: warnings %v, want a warning %v", c.cfg.Incus, diags, c.warn)
		}
	}
}
