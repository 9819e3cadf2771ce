package initplan

import "github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"

// NeedsAgent reports whether running p needs the sandbox agent inside the
// instance: to start a service or to probe its readiness.
func (p Plan) NeedsAgent() bool {
	for _, s := range p.Steps {
		if len(s.Command) > 0 && s.Command[0] == agent.PathInInstance {
			return true
		}
	}
	return false
}
