// Command sandbox-agent is the in-sandbox helper (PID 1, services, probes,
// log tails) as a small stand-alone binary. Build it static:
//
//	CGO_ENABLED=0 go build ./cmd/sandbox-agent
//
// The provider binary contains the same agent (`terraform-provider-sandbox
// agent ...`); this one is for tests, benchmarks and SANDBOX_AGENT_BINARY.
package main

import (
	"os"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
)

func main() {
	os.Exit(agent.Main(os.Args))
}
