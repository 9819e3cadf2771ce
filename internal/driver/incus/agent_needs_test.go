package incus

import (
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// The provider's plan-time rule (driver.AgentNeeds) refuses exactly the
// sandboxes this driver cannot create without the agent.
func TestAgentNeedsAgreesWithTheDriver(t *testing.T) {
	cfg := driver.Config{Driver: driver.Incus, Name: "b"}
	for _, typ := range []string{driver.TypeContainer, driver.TypeVM} {
		for _, cmd := range [][]string{nil, {"sleep", "60"}, {"sh", "-c", "echo a b"}} {
			for _, init := range []bool{false, true} {
				for _, lifetime := range []time.Duration{0, time.Hour} {
					spec := driver.InstanceSpec{Type: typ, Command: cmd, Lifetime: lifetime, Security: driver.Security{Init: init}}
					needs := (typ != driver.TypeVM && agentInit(spec)) || needsWatcher(spec) || lifetime > 0
					if got := driver.AgentNeeds(cfg, spec).Required; got != needs {
						t.Errorf("%s command=%q init=%v lifetime=%s: AgentNeeds says required=%v, the driver %v", typ, cmd, init, lifetime, got, needs)
					}
				}
			}
		}
	}
}
