package provider

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// Without a usable agent, a sandbox that cannot be made without one is
// refused at the attribute that needs it; others are warned about; with the
// agent nothing is said.
func TestCheckInstanceAgent(t *testing.T) {
	defer func(f func() error) { agentCheck = f }(agentCheck)
	docker := driver.Config{Driver: driver.Docker, Name: "b"}
	incus := driver.Config{Driver: driver.Incus, Name: "b"}
	local := driver.Config{Driver: driver.Local, Name: "b"}
	withInit := driver.Security{Init: true}
	for _, c := range []struct {
		name    string
		cfg     driver.Config
		spec    driver.InstanceSpec
		err     bool
		at      path.Path
		mention string
	}{
		{"docker", docker, driver.InstanceSpec{Security: withInit}, false, path.Root("security"), "Docker's own init"},
		{"docker without init", docker, driver.InstanceSpec{}, false, path.Root("security"), "made without it"},
		{"docker lifetime", docker, driver.InstanceSpec{Lifetime: time.Hour}, true, path.Root("lifetime"), "lifetime"},
		{"local", local, driver.InstanceSpec{}, true, path.Root("backend"), "local backend"},
		{"incus system container", incus, driver.InstanceSpec{Security: withInit}, false, path.Root("security"), "initializer"},
		{"incus command", incus, driver.InstanceSpec{Command: []string{"sleep", "1"}, Security: withInit}, true, path.Root("command"), "Incus runs the agent"},
		{"incus vm", incus, driver.InstanceSpec{Type: driver.TypeVM, Command: []string{"x"}, Security: withInit}, false, path.Root("security"), "initializer"},
	} {
		agentCheck = func() error { return errors.New("sandbox agent /x is dynamically linked") }
		var diags diag.Diagnostics
		checkInstanceAgent(c.spec, c.cfg, &diags)
		if len(diags) != 1 || diags.HasError() != c.err {
			t.Errorf("%s: want one diagnostic (error %v), got %v", c.name, c.err, diags)
			continue
		}
		d := diags[0]
		if p := d.(diag.DiagnosticWithPath).Path(); !p.Equal(c.at) {
			t.Errorf("%s: diagnostic at %s, want %s", c.name, p, c.at)
		}
		for _, want := range []string{"dynamically linked", c.mention, "CGO_ENABLED=0"} {
			if !strings.Contains(d.Detail(), want) {
				t.Errorf("%s: the detail does not say %q: %s", c.name, want, d.Detail())
			}
		}
		agentCheck = func() error { return nil }
		diags = nil
		checkInstanceAgent(c.spec, c.cfg, &diags)
		if len(diags) != 0 {
			t.Errorf("%s: with the agent: %v", c.name, diags)
		}
	}
}

func TestCheckInitializerAgent(t *testing.T) {
	defer func(f func() error) { agentCheck = f }(agentCheck)
	agentCheck = func() error { return errors.New("no agent") }
	for _, c := range []struct {
		needs, service bool
		at             path.Path
	}{{true, true, path.Root("service")}, {true, false, path.Root("kind")}, {false, false, path.Empty()}} {
		var diags diag.Diagnostics
		checkInitializerAgent(c.needs, c.service, &diags)
		if !c.needs {
			if len(diags) != 0 {
				t.Errorf("an initializer without a service is refused: %v", diags)
			}
			continue
		}
		if !diags.HasError() || !diags[0].(diag.DiagnosticWithPath).Path().Equal(c.at) {
			t.Errorf("service=%v: want an error at %s, got %v", c.service, c.at, diags)
		}
	}
}
