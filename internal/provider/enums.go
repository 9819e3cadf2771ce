package provider

import (
	"fmt"
	"strings"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// enumValue is one allowed value of a string enum and what it means. Both
// the validator and the description are built from the same slice, so the
// docs cannot disagree with what is accepted.
type enumValue struct {
	value string
	doc   string
}

var portStrategyValues = []enumValue{
	{driver.PortStrategyLoopbackIP, "each sandbox gets its own 127.0.0.x address and keeps its port numbers"},
	{driver.PortStrategyDynamic, "the engine picks free host ports"},
}

var isolationValues = []enumValue{
	{driver.IsolationBwrap, "each sandbox runs in its own bubblewrap namespaces"},
	{driver.IsolationNone, "plain processes of the provider's user, not isolated; planning it warns"},
}

func enumStrings(vs []enumValue) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.value
	}
	return out
}

// enumDoc renders "`a` (what a means), `b` (what b means)".
func enumDoc(vs []enumValue) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprintf("`%s` (%s)", v.value, v.doc)
	}
	return strings.Join(parts, ", ")
}
