package provider

// The fast Read (server.go) against the framework's Read, on generated
// states and observations: whenever the fast Read answers, the framework's
// Read of the same request must return the same state and no diagnostic.
// The engine is an in-memory list (this tests provider glue; the fast
// paths on real engines are TestAccInstance_fastPathsKeepDrift's).

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// listedDriver answers ListInstances with what the test put there.
type listedDriver struct {
	driver.Driver
	mu    sync.Mutex
	insts []driver.Instance
}

func (l *listedDriver) ListInstances(context.Context) ([]driver.Instance, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.insts, nil
}

func (l *listedDriver) set(insts []driver.Instance) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.insts = insts
}

func (l *listedDriver) Close() error { return nil }

// configuredServer is a provider server, configured with an empty provider
// block, and its provider.
func configuredServer(t *testing.T, fast bool) (tfprotov6.ProviderServer, *server) {
	t.Helper()
	ctx := context.Background()
	prov := &sandboxProvider{version: "test"}
	fw, err := providerserver.NewProtocol6WithError(prov)()
	if err != nil {
		t.Fatal(err)
	}
	srv := fw
	var s *server
	if fast {
		s = newServer(fw, prov)
		srv = s
	}
	var ps provider.SchemaResponse
	prov.Schema(ctx, provider.SchemaRequest{}, &ps)
	typ := ps.Schema.Type().TerraformType(ctx)
	resp, err := srv.ConfigureProvider(ctx, &tfprotov6.ConfigureProviderRequest{Config: dynamic(t, typ, tftypes.NewValue(typ, map[string]tftypes.Value{
		"labels": tftypes.NewValue(tftypes.Map{ElementType: tftypes.String}, nil), "ssh_private_key": tftypes.NewValue(tftypes.String, nil),
	}))})
	if err != nil || len(resp.Diagnostics) > 0 {
		t.Fatalf("configure: %v %v", err, protoDiagnostics(resp.Diagnostics))
	}
	return srv, s
}

// observation generates an observed instance of id from the choices.
func observation(c *choices, id string) driver.Instance {
	exit := []int{0, 1, 137}[c.intn(3)]
	inst := driver.Instance{
		ID:         id,
		Name:       "tf-w",
		Type:       []string{driver.TypeContainer, driver.TypeVM, ""}[c.intn(3)],
		Status:     statusPool[c.intn(len(statusPool))],
		IPAddress:  []string{"", "10.0.0.2", "10.0.0.3"}[c.intn(3)],
		LoopbackIP: []string{"", "127.0.0.7"}[c.intn(2)],
		EngineName: []string{"", "b-w", "b-w2"}[c.intn(3)],
	}
	if c.intn(2) == 0 {
		inst.ExpiresAt = time.Date(2026, 11, 24, 6, 0, c.intn(2), 0, time.UTC)
	}
	if c.intn(3) == 0 {
		inst.ExitCode = &exit
	}
	switch c.intn(3) {
	case 1:
		inst.Endpoints = map[string]string{"http": "127.0.0.7:8080"}
	case 2:
		inst.Endpoints = map[string]string{"http": "127.0.0.7:8081", "ssh": "127.0.0.7:2222"}
	}
	return inst
}

func TestFastReadMatchesFramework(t *testing.T) {
	ctx := context.Background()
	engine := &listedDriver{}
	drv := "fake-read-" + t.Name()
	driver.Register(drv, func(context.Context, driver.Config) (driver.Driver, error) { return engine, nil })
	framework, _ := configuredServer(t, false)
	fastServer, s := configuredServer(t, true)
	sch := instanceSchema(ctx)
	typ := sch.Type().TerraformType(ctx)

	fast, same, gone := 0, 0, 0
	for i := range 1000 {
		c := &choices{b: biasedBytes(randFor(i), 300)}
		g := &planGen{ctx: ctx, c: c, removedDefaults: map[string]bool{}}
		prior, _ := g.attrsPair(sch.Attributes, "")
		var m instanceModel
		if d := (tfsdk.State{Schema: sch, Raw: prior}).Get(ctx, &m); d.HasError() {
			t.Fatal(d)
		}
		// Each case its own backend, so neither server's list cache
		// answers from an earlier case.
		backend, d := HandleFromConfig(driver.Config{Driver: drv, Name: fmt.Sprintf("b%d", i)})
		if d.HasError() {
			t.Fatal(d)
		}
		m.Backend, m.Name, m.Type = backend, types.StringValue("w"), types.StringValue(driver.TypeContainer)
		before := observation(c, "c1")
		if d := m.observe(before); d.HasError() {
			t.Fatal(d)
		}
		state := tfsdk.State{Schema: sch, Raw: tftypes.NewValue(typ, nil)}
		if d := state.Set(ctx, &m); d.HasError() {
			t.Fatal(d)
		}

		// What the engine reports now: the same, another observation, or nothing.
		now := []driver.Instance{before}
		switch c.intn(4) {
		case 0:
			now = []driver.Instance{observation(c, "c1")}
		case 1:
			if c.intn(4) == 0 {
				now = nil
				gone++
			}
		}
		engine.set(now)
		req := &tfprotov6.ReadResourceRequest{TypeName: instanceTypeName, CurrentState: dynamic(t, typ, state.Raw), Private: []byte(`{"k":"eyJhIjoxfQ=="}`)}
		answered := s.fastReads.Load()
		fastResp, err := fastServer.ReadResource(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		fwResp, err := framework.ReadResource(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if s.fastReads.Load() == answered {
			continue // read by the framework inside the server
		}
		fast++
		if len(fwResp.Diagnostics) > 0 || len(fastResp.Diagnostics) > 0 {
			t.Fatalf("case %d: the fast Read answered a read on which the framework reports %v", i, protoDiagnostics(fwResp.Diagnostics))
		}
		if fwResp.NewState == nil {
			t.Fatalf("case %d: the fast Read kept a sandbox the framework removes from state (engine: %+v)", i, now)
		}
		got, err := fastResp.NewState.Unmarshal(typ)
		if err != nil {
			t.Fatal(err)
		}
		want, err := fwResp.NewState.Unmarshal(typ)
		if err != nil {
			t.Fatal(err)
		}
		if diffs, _ := got.Diff(want); len(diffs) > 0 {
			t.Fatalf("case %d: the fast Read differs from the framework's at %v\nstate:  %s\nengine: %+v", i, diffs[0].Path, compact(state.Raw), now)
		}
		if string(fastResp.Private) != string(fwResp.Private) {
			t.Fatalf("case %d: private state: fast %q, framework %q", i, fastResp.Private, fwResp.Private)
		}
		if want.Equal(state.Raw) {
			same++
		}
	}
	if fast < 300 || gone == 0 {
		t.Errorf("the fast Read answered %d of 1000 generated reads (%d sandboxes gone): the generator no longer reaches it", fast, gone)
	}
	t.Logf("1000 generated reads: %d answered by the fast Read, %d of them the state as it was; %d sandboxes gone", fast, same, gone)
}

// randFor is the random source of generated case i: a failing case names i.
func randFor(i int) *rand.Rand { return rand.New(rand.NewSource(int64(i))) }
