//go:build linux

package incus_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// cpuLoad runs n busy loops (as `stress --cpu n` would) until the test ends
// or the bound passes, whichever comes first. Each loop is its own process,
// stopped by its pid.
func cpuLoad(t *testing.T, n int, bound time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	var cmds []*exec.Cmd
	for i := 0; i < n; i++ {
		cmd := exec.CommandContext(ctx, "sh", "-c", "while :; do :; done")
		// The loops die with the test process, even when it is killed.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			cancel()
			t.Fatalf("start a busy loop: %v", err)
		}
		cmds = append(cmds, cmd)
	}
	t.Cleanup(func() {
		cancel() // kills each loop by its pid
		for _, c := range cmds {
			_ = c.Wait()
		}
	})
}

// stressExec runs total execs, par at a time, each checking its own output
// on both streams and its exit code, in one running instance.
func stressExec(t *testing.T, d driver.Driver, id string, total, par int) {
	t.Helper()
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := 0
	for i := 0; i < total; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			spec := driver.ExecSpec{Command: []string{"sh", "-c", `echo "out-$N"; echo "err-$N" >&2; exit $((N % 3))`},
				Env: map[string]string{"N": strconv.Itoa(i)}}
			wantOut, wantErr := fmt.Sprintf("out-%d\n", i), fmt.Sprintf("err-%d\n", i)
			if i%2 == 1 { // the ExecEnv shape: user, workdir and env all given
				spec.User, spec.Workdir = "0", "/tmp"
				spec.Command[2] = `echo "out-$N|$PWD"; echo "err-$N" >&2; exit $((N % 3))`
				wantOut = fmt.Sprintf("out-%d|/tmp\n", i)
			}
			res, err := d.Exec(ctx, id, spec)
			if err != nil || res.ExitCode != i%3 || string(res.Stdout) != wantOut || string(res.Stderr) != wantErr {
				mu.Lock()
				failures++
				mu.Unlock()
				t.Errorf("exec %d: exit %d stdout %q stderr %q err %v; want exit %d %q %q", i, res.ExitCode, res.Stdout, res.Stderr, err, i%3, wantOut, wantErr)
			}
		}(i)
	}
	wg.Wait()
	if failures > 0 {
		t.Errorf("%d of %d execs lost output or status", failures, total)
	}
}

// Many short execs at once, under CPU load: every one returns its complete
// output and its exit status (a race between the operation's end and the
// output streams would return exit 0 with empty output).
func TestExecStress(t *testing.T) {
	requireStress(t)
	preCheck(t)
	d := scoped(t, nil)
	in, err := d.CreateInstance(testCtx(t), driver.InstanceSpec{
		Name: "stress", Image: fixtureImage, Running: true, Command: []string{"sleep", "3600"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cpuLoad(t, 2, 5*time.Minute)
	stressExec(t, d, in.ID, stressTotal(), 8)
}

// stressTotal is 200 execs, or $SANDBOX_STRESS_EXECS.
func stressTotal() int {
	if n, err := strconv.Atoi(os.Getenv("SANDBOX_STRESS_EXECS")); err == nil && n > 0 {
		return n
	}
	return 200
}

// The same over SSH: every websocket is a channel of the pooled SSH
// connection.
func TestExecStressSSH(t *testing.T) {
	requireStress(t)
	mutate := sshIncus(t)
	d := scoped(t, mutate)
	in, err := d.CreateInstance(testCtx(t), driver.InstanceSpec{
		Name: "stress", Image: fixtureImage, Running: true, Command: []string{"sleep", "3600"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cpuLoad(t, 2, 5*time.Minute)
	stressExec(t, d, in.ID, stressTotal(), 8)
}

// requireStress: the stress tests load the machine for minutes, so they run
// only when asked for (SANDBOX_STRESS=1), like the docker perf test; the
// conformance suite checks exec output on every run.
func requireStress(t *testing.T) {
	t.Helper()
	if os.Getenv("SANDBOX_STRESS") == "" {
		t.Skip("SANDBOX_STRESS is not set: stress tests are opt-in")
	}
}
