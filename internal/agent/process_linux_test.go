//go:build linux

package agent_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
)

func TestInitExitStatus(t *testing.T) {
	code, out, _ := runAgent(t, 10*time.Second, "init", "--", "sh", "-c", "echo hello; exit 3")
	if code != 3 || out != "hello\n" {
		t.Fatalf("init exit %d out %q, want 3 %q", code, out, "hello\n")
	}
	code, _, errOut := runAgent(t, 10*time.Second, "init", "--", "/no/such/command")
	if code != agent.ExitNotStarted || errOut == "" {
		t.Fatalf("init of missing command: exit %d stderr %q", code, errOut)
	}
}

// startAgent starts the agent in the background and kills it at cleanup.
func startAgent(t *testing.T, args ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(agentBin, args...)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, bufio.NewReader(pipe)
}

// waitExit waits for cmd and returns its exit status, failing after timeout.
func waitExit(t *testing.T, cmd *exec.Cmd, timeout time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	if !waitOrKill(cmd, timeout) {
		t.Fatalf("agent did not exit within %s", timeout)
	}
	return cmd.ProcessState.ExitCode(), time.Since(start)
}

func TestInitForwardsSignal(t *testing.T) {
	cmd, out := startAgent(t, "init", "--", "sh", "-c", `trap 'echo got-term; exit 7' TERM; echo up; while :; do sleep 0.1; done`)
	if line, _ := out.ReadString('\n'); line != "up\n" {
		t.Fatalf("child did not start: %q", line)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	rest := make(chan string, 1)
	go func() { b, _ := out.ReadString('\n'); rest <- b }()
	code, _ := waitExit(t, cmd, 10*time.Second)
	if code != 7 {
		t.Fatalf("exit %d, want the child's 7", code)
	}
	if got := <-rest; got != "got-term\n" {
		t.Fatalf("child output %q, want got-term", got)
	}
}

func TestInitWithoutCommandWaitsForSignal(t *testing.T) {
	cmd, _ := startAgent(t, "init")
	time.Sleep(300 * time.Millisecond)
	if cmd.ProcessState != nil {
		t.Fatal("init without command exited on its own")
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if code, _ := waitExit(t, cmd, 10*time.Second); code != 0 {
		t.Fatalf("exit %d, want 0 after SIGTERM", code)
	}
}

func TestInitDeadline(t *testing.T) {
	deadline := time.Now().Add(time.Second)
	// The child ignores TERM, so only the KILL after the grace ends it.
	argv := agent.InitCommandGrace(deadline, 500*time.Millisecond, []string{"sh", "-c", `trap "" TERM; echo up; sleep 30`})
	cmd, out := startAgent(t, argv[1:]...)
	if line, _ := out.ReadString('\n'); line != "up\n" {
		t.Fatalf("child did not start: %q", line)
	}
	code, took := waitExit(t, cmd, 10*time.Second)
	if code != agent.ExitExpired {
		t.Fatalf("exit %d, want %d", code, agent.ExitExpired)
	}
	if took > 5*time.Second {
		t.Fatalf("took %s to expire", took)
	}
}

func TestInitDeadlinePassed(t *testing.T) {
	argv := agent.InitCommand(time.Now().Add(-time.Minute), []string{"sh", "-c", "echo ran"})
	code, out, _ := runAgent(t, 5*time.Second, argv[1:]...)
	if code != agent.ExitExpired || out != "" {
		t.Fatalf("exit %d out %q, want %d and nothing run", code, out, agent.ExitExpired)
	}
}

// TestInitReapsOrphans checks that a grandchild orphaned by its parent is
// reaped by init (as a subreaper here, as PID 1 in a sandbox).
func TestInitReapsOrphans(t *testing.T) {
	cmd, out := startAgent(t, "init", "--", "sh", "-c", `(sleep 0.2 & echo $!); sleep 30`)
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("bad pid line %q", line)
	}
	statPath := fmt.Sprintf("/proc/%d/stat", orphan)
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(statPath)
		if os.IsNotExist(err) {
			break // reaped
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan %d not reaped: %s", orphan, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	waitExit(t, cmd, 10*time.Second)
}

// TestInitAsPID1 runs init as PID 1 of a new PID namespace, the way it runs
// in a container, where the deadline stops everything with kill(-1).
func TestInitAsPID1(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and unshare(1) to create a PID namespace")
	}
	deadline := time.Now().Add(time.Second).UTC().Format(agent.DeadlineLayout)
	cmd := exec.Command(unshare, "--fork", "--pid", "--mount-proc", agentBin, "init", "--deadline", deadline, "--grace", "500ms",
		"--", "sh", "-c", `sh -c 'trap "" TERM; sleep 30' & trap "" TERM; echo $PPID; sleep 30`)
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	code, took := waitExit(t, cmd, 15*time.Second)
	if code != agent.ExitExpired || took > 6*time.Second {
		t.Fatalf("exit %d after %s, want %d; out %q", code, took, agent.ExitExpired, stdout.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != "1" {
		t.Errorf("parent of the command %q, want 1 (init is PID 1)", got)
	}
}

func TestService(t *testing.T) {
	dir := t.TempDir()
	logPath, pidPath := filepath.Join(dir, "logs", "svc.log"), filepath.Join(dir, "svc.pid")
	argv := agent.ServiceCommand(logPath, pidPath, dir, []string{"sh", "-c", "pwd; echo $SVC_TEST; exec sleep 30"})
	cmd := exec.Command(agentBin, argv[1:]...)
	cmd.Env = append(os.Environ(), "SVC_TEST=inherited")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("service: %v: %s", err, out)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("service took %s to return", took)
	}
	b, err := os.ReadFile(pidPath)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if sid := sessionOf(t, pid); sid != pid {
		t.Errorf("service pid %d: session %d, want its own session", pid, sid)
	}
	waitFor(t, func() bool { b, _ := os.ReadFile(logPath); return string(b) == dir+"\ninherited\n" }, "log with workdir and env")
	if code, _, errOut := runAgent(t, 5*time.Second, "probe", "pid", pidPath); code != 0 {
		t.Errorf("probe pid of running service: %d %s", code, errOut)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	waitFor(t, func() bool { code, _, _ := runAgent(t, 5*time.Second, "probe", "pid", pidPath); return code == 1 }, "probe pid to fail after kill")

	code, _, errOut := runAgent(t, 5*time.Second, "service", "--log", logPath, "--pidfile", pidPath, "--", "/no/such/cmd")
	if code != agent.ExitNotStarted || errOut == "" {
		t.Errorf("service of missing command: exit %d stderr %q", code, errOut)
	}
}

// sessionOf reads the session id from /proc/PID/stat (after the ')': state,
// ppid, pgrp, session).
func sessionOf(t *testing.T, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	sid, _ := strconv.Atoi(f[3])
	return sid
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestProbeTCP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	if code, _, errOut := runAgent(t, 10*time.Second, "probe", "tcp", port); code != 0 {
		t.Errorf("probe tcp open port: %d %s", code, errOut)
	}
	ln.Close()
	code, _, errOut := runAgent(t, 10*time.Second, "probe", "tcp", port)
	if code != agent.ExitNotReady || !strings.Contains(errOut, "not ready") {
		t.Errorf("probe tcp closed port: %d %q", code, errOut)
	}
}

func TestProbeHTTP(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok":
			w.WriteHeader(200)
		case "/moved":
			http.Redirect(w, r, "/ok", http.StatusFound)
		default:
			w.WriteHeader(404)
		}
	}))
	defer srv.Close()
	port := strconv.Itoa(srv.Listener.Addr().(*net.TCPAddr).Port)
	cases := []struct {
		args []string
		want int
	}{
		{[]string{"/ok"}, 0},
		{[]string{"/moved"}, 0},
		{[]string{"/moved", "302"}, 0},
		{[]string{"/ok", "204"}, 1},
		{[]string{"/missing"}, 1},
		{[]string{"/missing", "404"}, 0},
	}
	for _, c := range cases {
		args := append([]string{"probe", "http", port}, c.args...)
		if code, _, errOut := runAgent(t, 10*time.Second, args...); code != c.want {
			t.Errorf("probe http %v: %d (%s), want %d", c.args, code, errOut, c.want)
		}
	}
}

func TestProbePIDMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.pid")
	if code, _, _ := runAgent(t, 5*time.Second, "probe", "pid", path); code != 1 {
		t.Errorf("probe pid of missing file: %d, want 1", code)
	}
	if err := os.WriteFile(path, []byte("nonsense"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runAgent(t, 5*time.Second, "probe", "pid", path); code != 1 {
		t.Errorf("probe pid of garbage: %d, want 1", code)
	}
}

// TestInitUser: --user drops the command (not init) to uid:gid.
func TestInitUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch users")
	}
	argv := agent.InitAsUser(agent.InitCommand(time.Time{}, []string{"sh", "-c", "id -u; id -g"}), 65534, 65533)
	if want := []string{agent.PathInInstance, "init", "--user", "65534:65533", "--", "sh", "-c", "id -u; id -g"}; strings.Join(argv, " ") != strings.Join(want, " ") {
		t.Fatalf("InitAsUser argv %q, want %q", argv, want)
	}
	code, out, errOut := runAgent(t, 10*time.Second, argv[1:]...)
	if code != 0 || out != "65534\n65533\n" {
		t.Fatalf("exit %d out %q stderr %q, want 0 and 65534/65533", code, out, errOut)
	}
	if code, _, _ := runAgent(t, 10*time.Second, "init", "--user", "nobody", "--", "true"); code != agent.ExitUsage {
		t.Errorf("--user with a name: exit %d, want %d", code, agent.ExitUsage)
	}
}

// TestExecHardening: `exec` gives the command no_new_privs, the bounding set
// and the user it is told, and what it holds never exceeds that set.
func TestExecHardening(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to change capabilities and users")
	}
	status := "grep -E '^(NoNewPrivs|CapEff|CapBnd|CapInh|CapAmb):' /proc/self/status; id -u; id -G"
	cases := []struct {
		h    agent.Hardening
		want string
	}{
		{agent.Hardening{NoNewPrivs: true, Caps: "400"},
			"CapInh:\t0000000000000000\nCapEff:\t0000000000000400\nCapBnd:\t0000000000000400\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n0\n0\n"},
		{agent.Hardening{NoNewPrivs: true, Caps: "400", User: "1000:1001"},
			"CapInh:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000400\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\n1000\n1001\n"},
		{agent.Hardening{Caps: "0"},
			"CapInh:\t0000000000000000\nCapEff:\t0000000000000000\nCapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t0\n0\n0\n"},
	}
	for _, c := range cases {
		argv := agent.ExecCommand(c.h, []string{"sh", "-c", status})
		code, out, errOut := runAgent(t, 10*time.Second, argv[1:]...)
		if code != 0 || out != c.want {
			t.Errorf("%v: exit %d\n%s\nwant\n%s\nstderr: %s", argv[1:len(argv)-3], code, out, c.want, errOut)
		}
	}
	if code, _, errOut := runAgent(t, 10*time.Second, "exec", "--", "/no/such/command"); code != agent.ExitNotStarted || errOut == "" {
		t.Errorf("exec of a missing command: exit %d stderr %q", code, errOut)
	}
	if code, out, _ := runAgent(t, 10*time.Second, "exec", "--", "sh", "-c", "exit 7"); code != 7 || out != "" {
		t.Errorf("exec exit status: %d %q, want the command's 7", code, out)
	}
	// uid 4294967295 is (uid_t)-1, "no change" to setuid: the command would stay root.
	if code, _, _ := runAgent(t, 10*time.Second, "exec", "--user", "4294967295", "--", "id", "-u"); code != agent.ExitUsage {
		t.Errorf("exec --user 4294967295: exit %d, want %d", code, agent.ExitUsage)
	}
}

// TestExecSeccomp: `exec --seccomp` runs the command under the sandbox's
// default filter, which refuses keyctl (a call root may otherwise make).
func TestExecSeccomp(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the default seccomp filter exists for amd64 only")
	}
	script := "grep '^Seccomp:' /proc/self/status; keyctl show @s >/dev/null 2>&1 && echo keyctl ok || echo keyctl refused"
	if _, err := exec.LookPath("keyctl"); err != nil {
		script = "grep '^Seccomp:' /proc/self/status"
	}
	argv := agent.ExecCommand(agent.Hardening{NoNewPrivs: true, Caps: "0", Seccomp: true}, []string{"sh", "-c", script})
	code, out, errOut := runAgent(t, 10*time.Second, argv[1:]...)
	if code != 0 || !strings.HasPrefix(out, "Seccomp:\t2\n") || strings.Contains(out, "keyctl ok") {
		t.Errorf("exec --seccomp: exit %d, out %q, stderr %q; want the command under a filter", code, out, errOut)
	}
	code, out, _ = runAgent(t, 10*time.Second, "exec", "--", "grep", "^Seccomp:", "/proc/self/status")
	if code != 0 || out != "Seccomp:\t0\n" {
		t.Errorf("exec without --seccomp: exit %d, out %q; want no filter", code, out)
	}
}
