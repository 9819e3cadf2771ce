//go:build linux

package agent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
)

// TestInitArgvFile: a command with spaces in its arguments runs from an
// argv file, without a shell splitting it.
func TestInitArgvFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "argv")
	argv := []string{"sh", "-c", `test "$1" = "a  b" && exit 7`, "sh", "a  b"}
	if err := os.WriteFile(file, agent.ArgvFileContent(argv), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runAgent(t, 10*time.Second, "init", "--argv-file", file); code != 7 {
		t.Errorf("init --argv-file: exit %d, want 7; stderr: %s", code, stderr)
	}
	if code, _, _ := runAgent(t, 10*time.Second, "init", "--argv-file", file, "--", "true"); code != agent.ExitUsage {
		t.Errorf("--argv-file with a command: exit %d, want %d", code, agent.ExitUsage)
	}
	if code, _, _ := runAgent(t, 10*time.Second, "init", "--argv-file", filepath.Join(t.TempDir(), "missing")); code != agent.ExitUsage {
		t.Errorf("missing argv file: exit %d, want %d", code, agent.ExitUsage)
	}
}

// TestPoweroffWaits: poweroff sleeps until its deadline (--dry-run stands
// in for the power-off, which would need a PID namespace of its own).
func TestPoweroffWaits(t *testing.T) {
	at := time.Now().Add(700 * time.Millisecond)
	start := time.Now()
	code, stdout, stderr := runAgent(t, 10*time.Second, "poweroff", "--dry-run", "--at", at.UTC().Format(time.RFC3339Nano))
	if code != 0 || !strings.HasPrefix(stdout, "poweroff at ") {
		t.Fatalf("poweroff: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if elapsed := time.Since(start); elapsed < 600*time.Millisecond {
		t.Errorf("poweroff returned after %s, before its deadline", elapsed)
	}
	// Past its deadline it still lets the instance finish starting.
	start = time.Now()
	if code, _, _ := runAgent(t, 10*time.Second, "poweroff", "--dry-run", "--at", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)); code != 0 {
		t.Fatalf("poweroff past its deadline: exit %d", code)
	}
	if elapsed := time.Since(start); elapsed < 1900*time.Millisecond {
		t.Errorf("poweroff past its deadline returned after %s, before the start could settle", elapsed)
	}
	if code, _, _ := runAgent(t, 10*time.Second, "poweroff"); code != agent.ExitUsage {
		t.Errorf("poweroff without --at: exit %d, want %d", code, agent.ExitUsage)
	}
}
