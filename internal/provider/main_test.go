package provider_test

import (
	"os"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/acctest"
)

// TestMain points SANDBOX_AGENT_BINARY at a static build of cmd/sandbox-agent
// before any test runs: the in-process provider would otherwise put this
// test binary into its sandboxes as the agent (agent.BinaryPath refuses it).
func TestMain(m *testing.M) {
	os.Exit(acctest.MainWithAgent(m))
}
