package driver

import "strings"

// AgentNeed says what a sandbox loses when the sandbox agent cannot be
// given to it (a cgo build of the provider, a binary for another
// architecture). The provider asks at plan time, so that a sandbox that
// cannot be made without the agent fails before anything is created.
type AgentNeed struct {
	// Required: the create fails without the agent, for Reason.
	Required bool
	Reason   string
}

// AgentNeeds is the rule per driver. Elsewhere the sandbox is made without
// the agent: Docker's own init stands in for security.init, and no
// initializer can start a service in it.
func AgentNeeds(cfg Config, spec InstanceSpec) AgentNeed {
	switch {
	case cfg.Driver == Local:
		return AgentNeed{true, "the local backend runs every sandbox under the agent"}
	case spec.Lifetime > 0:
		return AgentNeed{true, "a `lifetime` is enforced by the agent inside the sandbox"}
	case cfg.Driver == Incus && spec.Type != TypeVM && len(spec.Command) > 0 && (spec.Security.Init || hasBlank(spec.Command)):
		// The Incus driver's agentInit: LXC has no init of its own for a
		// command, and splits lxc.init.cmd at spaces.
		return AgentNeed{true, "Incus runs the agent as the container's init in front of a `command` (with `security.init`, or an argument holding a space)"}
	}
	return AgentNeed{}
}

func hasBlank(argv []string) bool {
	for _, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n") {
			return true
		}
	}
	return false
}
