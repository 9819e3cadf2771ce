package agent_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
)

// agentBin is the sandbox-agent built once for all tests.
var agentBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sandbox-agent-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentBin = filepath.Join(dir, "sandbox-agent")
	build := exec.Command("go", "build", "-o", agentBin, "github.com/sandboxfleet/terraform-provider-sandbox/cmd/sandbox-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build sandbox-agent: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runAgent runs the agent to completion and returns its exit status and output.
func runAgent(t *testing.T, timeout time.Duration, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(agentBin, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitOrKill(cmd, timeout) {
		t.Fatalf("agent %v did not exit within %s; stderr: %s", args, timeout, stderr.String())
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// waitOrKill waits for a started cmd; after timeout it kills it and
// reports false.
func waitOrKill(cmd *exec.Cmd, timeout time.Duration) bool {
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return false
	}
}

func TestInvoked(t *testing.T) {
	cases := []struct {
		args []string
		want bool
	}{
		{[]string{"/usr/bin/terraform-provider-sandbox", "agent", "init"}, true},
		{[]string{"/.sandbox/sandbox-agent", "probe", "tcp", "80"}, true},
		{[]string{"sandbox-agent"}, true},
		{[]string{"terraform-provider-sandbox"}, false},
		{[]string{"terraform-provider-sandbox", "-debug"}, false},
		{nil, false},
	}
	for _, c := range cases {
		if got := agent.Invoked(c.args); got != c.want {
			t.Errorf("Invoked(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

func TestCommands(t *testing.T) {
	deadline := time.Date(2030, 1, 2, 3, 4, 5, 600_000_000, time.FixedZone("x", 3600))
	check := func(got, want []string) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got %q\nwant %q", got, want)
		}
	}
	p := agent.PathInInstance
	check(agent.InitCommand(time.Time{}, nil), []string{p, "init"})
	check(agent.InitCommand(deadline, []string{"sleep", "9"}),
		[]string{p, "init", "--deadline", "2030-01-02T02:04:05.600Z", "--", "sleep", "9"})
	check(agent.InitCommandGrace(time.Time{}, 3*time.Second, []string{"x"}), []string{p, "init", "--grace", "3s", "--", "x"})
	check(agent.ServiceCommand("/l", "/p", "", []string{"httpd", "-f"}),
		[]string{p, "service", "--log", "/l", "--pidfile", "/p", "--", "httpd", "-f"})
	check(agent.ServiceCommand("/l", "/p", "/w", []string{"x"}),
		[]string{p, "service", "--log", "/l", "--pidfile", "/p", "--workdir", "/w", "--", "x"})
	check(agent.ProbeCommand(agent.Probe{Kind: agent.ProbeTCP, Port: 80}), []string{p, "probe", "tcp", "80"})
	check(agent.ProbeCommand(agent.Probe{Kind: agent.ProbeHTTP, Port: 80}), []string{p, "probe", "http", "80", "/"})
	check(agent.ProbeCommand(agent.Probe{Kind: agent.ProbeHTTP, Port: 80, Path: "/h", Status: 204}),
		[]string{p, "probe", "http", "80", "/h", "204"})
	check(agent.ProbeCommand(agent.Probe{Kind: agent.ProbePID, PIDFile: "/run/x.pid"}), []string{p, "probe", "pid", "/run/x.pid"})
	check(agent.TailCommand(4096, "/var/log/x"), []string{p, "tail", "--bytes", "4096", "/var/log/x"})
}

func TestBinaryPath(t *testing.T) {
	t.Setenv(agent.EnvBinary, agentBin)
	got, err := agent.BinaryPath()
	if err != nil || got != agentBin {
		t.Fatalf("BinaryPath() = %q, %v; want %q", got, err, agentBin)
	}

	notELF := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(agent.EnvBinary, notELF)
	if _, err := agent.BinaryPath(); err == nil || !strings.Contains(err.Error(), agent.EnvBinary) {
		t.Errorf("non-ELF accepted or error does not say what to do: %v", err)
	}

	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	if err := agent.CheckBinary(agentBin, other); err == nil {
		t.Errorf("CheckBinary accepted a %s binary for %s", runtime.GOARCH, other)
	}

	// This test binary is not the agent: as PID 1 of a sandbox it would run
	// its tests. It is refused without being run: as a Go test binary when it
	// is static (CGO_ENABLED=0), or earlier as a dynamically linked one.
	t.Setenv(agent.EnvBinary, "")
	if _, err := agent.BinaryPath(); err == nil ||
		!strings.Contains(err.Error(), "Go test binary") && !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("BinaryPath() with the test binary as executable = %v, want a Go test binary or dynamic linking error", err)
	}
	// Any other static binary does not answer `version` with the magic.
	if _, err := os.Stat("/bin/busybox"); err == nil {
		if err := agent.CheckBinary("/bin/busybox", runtime.GOARCH); err == nil || !strings.Contains(err.Error(), "does not answer as the agent") {
			t.Errorf("CheckBinary(busybox) = %v, want a refusal", err)
		}
	}
	if code, out, _ := runAgent(t, 5*time.Second, "version"); code != 0 || !strings.HasPrefix(out, agent.VersionMagic) {
		t.Errorf("version: %d %q", code, out)
	}

	// A dynamically linked system binary must be refused.
	if err := agent.CheckBinary("/bin/ls", runtime.GOARCH); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("CheckBinary(/bin/ls) = %v, want dynamically linked error", err)
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"bogus"}, {"probe", "tcp", "x"}, {"probe", "udp", "1"}, {"service", "--", "true"}, {"tail", "x", "y"}} {
		if code, _, _ := runAgent(t, 5*time.Second, args...); code != agent.ExitUsage {
			t.Errorf("agent %q: exit %d, want %d", args, code, agent.ExitUsage)
		}
	}
}

func TestTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	if err := os.WriteFile(path, []byte("0123456789abcdef"), 0o644); err != nil {
		t.Fatal(err)
	}
	for n, want := range map[string]string{"4": "cdef", "100": "0123456789abcdef", "0": ""} {
		code, out, errOut := runAgent(t, 5*time.Second, "tail", "--bytes", n, path)
		if code != 0 || out != want {
			t.Errorf("tail --bytes %s = %d %q (%s), want 0 %q", n, code, out, errOut, want)
		}
	}
	if code, _, errOut := runAgent(t, 5*time.Second, "tail", "--bytes", "4", path+".missing"); code != 1 || errOut == "" {
		t.Errorf("tail of missing file: exit %d, stderr %q", code, errOut)
	}
}

// Check refuses what cannot serve in a sandbox (a dynamically linked
// binary: a cgo build of the provider is one) and accepts the static agent
// built for another architecture (for a remote engine).
func TestCheck(t *testing.T) {
	t.Setenv(agent.EnvBinary, agentBin)
	if err := agent.Check(); err != nil {
		t.Fatalf("Check() refused the static agent: %v", err)
	}
	t.Setenv(agent.EnvBinary, "/bin/ls")
	if err := agent.Check(); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
		t.Errorf("Check() with /bin/ls = %v, want a dynamic linking error", err)
	}
	dir := t.TempDir()
	other := map[string]string{"amd64": "arm64"}[runtime.GOARCH]
	if other == "" {
		other = "amd64"
	}
	cross := filepath.Join(dir, "agent-"+other)
	build := exec.Command("go", "build", "-o", cross, "github.com/sandboxfleet/terraform-provider-sandbox/cmd/sandbox-agent")
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH="+other)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the agent for %s: %v\n%s", other, err, out)
	}
	t.Setenv(agent.EnvBinary, cross)
	if err := agent.Check(); err != nil {
		t.Errorf("Check() refused the static agent for %s: %v", other, err)
	}
	if _, err := agent.BinaryPath(); err == nil {
		t.Errorf("BinaryPath() accepted an agent for %s on %s", other, runtime.GOARCH)
	}
	// A cgo build, where a C compiler is there to make one (go install on
	// a machine with gcc does the same to the provider).
	if _, err := exec.LookPath("gcc"); err == nil {
		cgo := filepath.Join(dir, "agent-cgo")
		build := exec.Command("go", "build", "-o", cgo, "github.com/sandboxfleet/terraform-provider-sandbox/cmd/sandbox-agent")
		build.Env = append(os.Environ(), "CGO_ENABLED=1")
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("cgo build of the agent: %v\n%s", err, out)
		}
		t.Setenv(agent.EnvBinary, cgo)
		if err := agent.Check(); err == nil || !strings.Contains(err.Error(), "dynamically linked") {
			t.Errorf("Check() of a cgo build = %v, want a dynamic linking error", err)
		}
	}
}
