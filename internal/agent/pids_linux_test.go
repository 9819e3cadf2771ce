//go:build linux

package agent_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
)

// pidsCgroup makes a fresh pids cgroup (v1 pids hierarchy, or the v2 root
// with the pids controller) and removes it at cleanup, killing what is left
// in it. It skips when this host gives the test none (not root, no pids).
func pidsCgroup(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a pids cgroup")
	}
	parent := "/sys/fs/cgroup/pids"
	if b, err := os.ReadFile("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		if !strings.Contains(string(b), "pids") {
			t.Skip("cgroup v2 without the pids controller")
		}
		parent = "/sys/fs/cgroup"
		_ = os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+pids"), 0)
	}
	dir := filepath.Join(parent, "sandbox-agent-test-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("no writable pids cgroup here: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "pids.max")); err != nil {
		_ = syscall.Rmdir(dir)
		t.Skip("the cgroup has no pids.max")
	}
	t.Cleanup(func() {
		_ = os.WriteFile(filepath.Join(dir, "pids.max"), []byte("max"), 0)
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			b, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			if len(bytes.TrimSpace(b)) == 0 && syscall.Rmdir(dir) == nil {
				return
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Errorf("cleanup: cannot remove cgroup %s", dir)
	})
	return dir
}

// inCgroup is argv run by a shell that first moves itself into cg.
func inCgroup(cg string, argv ...string) *exec.Cmd {
	script := `echo $$ > "$0/cgroup.procs" || exit 125; exec "$@"`
	return exec.Command("/bin/sh", append([]string{"-c", script, cg}, argv...)...)
}

func readInt(t *testing.T, p string) int {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return n
}

func threadsOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return -1
}

// TestInitSurvivesPidsExhaustion: init is PID 1 of a sandbox whose pids
// limit counts its threads. Once its command runs, init must never need
// another OS thread (the Go runtime dies when it cannot make one), so a
// fork bomb that uses up the limit cannot take the sandbox down: init keeps
// reaping, forwarding signals and exits cleanly when told to stop.
func TestInitSurvivesPidsExhaustion(t *testing.T) {
	cg := pidsCgroup(t)
	// GOGC=1 makes the agent collect garbage all the time: the runtime
	// then wants its GC workers and spare threads while nothing is left.
	// The bomb is the command's child, so its orphans are init's to reap (as
	// in a sandbox, where init is PID 1); it waits on a fifo for the go and
	// stops after a few seconds.
	fifo := filepath.Join(t.TempDir(), "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	script := `(read x < "$0"; end=$(( $(date +%s) + 3 )); while [ "$(date +%s)" -lt "$end" ]; do (sleep 0.3 &); done) 2>/dev/null & echo up; exec sleep 100`
	agentCmd := inCgroup(cg, agentBin, "init", "--", "sh", "-c", script, fifo)
	agentCmd.Env = append(os.Environ(), "GOGC=1")
	var stderr bytes.Buffer
	agentCmd.Stderr = &stderr
	agentCmd.WaitDelay = time.Second // orphans may hold stdout
	pipe, err := agentCmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := agentCmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = agentCmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = agentCmd.Process.Kill(); <-done })
	pid := agentCmd.Process.Pid
	comm := "/proc/" + strconv.Itoa(pid) + "/comm"
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if b, _ := os.ReadFile(comm); strings.TrimSpace(string(b)) == agent.ReadyName {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("init never named itself %q (ready); stderr: %s", agent.ReadyName, firstLines(stderr.String(), 5))
		}
	}
	threads := threadsOf(pid)
	if line, _ := bufio.NewReader(pipe).ReadString('\n'); line != "up\n" {
		t.Fatalf("the command did not start: %q; stderr: %s", line, stderr.String())
	}

	// A tight limit: what runs now plus a few, taken at once by the bomb.
	limit := readInt(t, filepath.Join(cg, "pids.current")) + 4
	if err := os.WriteFile(filepath.Join(cg, "pids.max"), []byte(strconv.Itoa(limit)), 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fifo, []byte("go\n"), 0); err != nil {
		t.Fatal(err)
	}
	// Meanwhile init is kept busy: SIGCHLD makes it reap, SIGWINCH only
	// wakes its signal handling (it is not forwarded).
	stop, peak := time.Now().Add(3*time.Second), 0
	for time.Now().Before(stop) {
		peak = max(peak, readInt(t, filepath.Join(cg, "pids.current")))
		_ = syscall.Kill(pid, syscall.SIGCHLD)
		_ = syscall.Kill(pid, syscall.SIGWINCH)
		select {
		case <-done:
			t.Fatalf("init died under pids exhaustion (exit %d); stderr:\n%s", agentCmd.ProcessState.ExitCode(), firstLines(stderr.String(), 5))
		case <-time.After(5 * time.Millisecond):
		}
	}
	if peak < limit {
		t.Errorf("the fork bomb never used up the limit (at most %d of %d processes)", peak, limit)
	}
	if n := threadsOf(pid); n > threads {
		t.Errorf("init grew from %d to %d threads after its command started", threads, n)
	}
	// Still manageable while the limit is used up: TERM reaches the command
	// and init exits with its status.
	_ = syscall.Kill(pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("init did not stop after SIGTERM under pids exhaustion")
	}
	if code := agentCmd.ProcessState.ExitCode(); code != 128+int(syscall.SIGTERM) {
		t.Errorf("init exit %d, want %d (the command killed by TERM); stderr:\n%s", code, 128+int(syscall.SIGTERM), firstLines(stderr.String(), 5))
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}
