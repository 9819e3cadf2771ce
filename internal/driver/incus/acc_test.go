package incus_test

// Acceptance tests against a real incusd (scripts/setup-incus.sh), gated by
// SANDBOX_ACC_INCUS: unset skips, set with no answering server fails.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/drivertest"
	_ "github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/incus"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testgate"
)

// fixtureImage is imported by scripts/setup-incus.sh into the default project.
const fixtureImage = "sandbox-fixture/busybox"

// TestMain removes the agent binary the tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if agentPath != "" {
		_ = os.RemoveAll(filepath.Dir(agentPath))
	}
	os.Exit(code)
}

func preCheck(t *testing.T) {
	t.Helper()
	testgate.Skip(t, "SANDBOX_ACC_INCUS")
	ensureAgentBinary(t)
}

var (
	agentOnce sync.Once
	agentPath string
	agentErr  error
)

// ensureAgentBinary points SANDBOX_AGENT_BINARY at a static agent: the test
// binary itself is neither static-for-sure nor the agent.
func ensureAgentBinary(t *testing.T) {
	t.Helper()
	if p := os.Getenv(agent.EnvBinary); p != "" {
		return
	}
	agentOnce.Do(func() {
		dir, err := os.MkdirTemp("", "incus-agent-")
		if err != nil {
			agentErr = err
			return
		}
		agentPath = filepath.Join(dir, agent.BinaryName)
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..", "..")
		cmd := exec.Command("go", "build", "-o", agentPath, "./cmd/sandbox-agent")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			agentErr = err
			t.Logf("%s", out)
		}
	})
	if agentErr != nil {
		t.Fatalf("build the sandbox agent: %v", agentErr)
	}
	t.Setenv(agent.EnvBinary, agentPath)
}

func uniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// openBackend opens a driver on a fresh backend (project tf-acc-XXXX) and
// fails when the server does not answer.
func openBackend(t *testing.T, mutate func(*driver.IncusConfig)) driver.Driver {
	t.Helper()
	return openNamed(t, uniqueName("tf-acc"), mutate)
}

// openNamed opens a driver on backend name (also its project, unless mutate
// names one).
func openNamed(t *testing.T, name string, mutate func(*driver.IncusConfig)) driver.Driver {
	t.Helper()
	ic := &driver.IncusConfig{}
	if mutate != nil {
		mutate(ic)
	}
	cfg := driver.Config{Driver: driver.Incus, Name: name, Incus: ic}
	d, err := driver.Open(testCtx(t), cfg)
	if err != nil {
		t.Fatalf("open incus driver: %v", err)
	}
	if _, err := d.Info(testCtx(t)); err != nil {
		t.Fatalf("SANDBOX_ACC_INCUS is set but incusd does not answer: %v", err)
	}
	return d
}

func TestConformance(t *testing.T) {
	preCheck(t)
	drivertest.Run(t, drivertest.Harness{
		Open:  func(t *testing.T) driver.Driver { return openBackend(t, nil) },
		Image: fixtureImage,
	})
}
