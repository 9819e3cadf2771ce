package initplan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// fakeDriver answers Exec with a handler and records every call. Methods
// the executor never uses are left to the embedded nil interface.
type fakeDriver struct {
	driver.Driver
	mu     sync.Mutex
	calls  []string // "exec ARGV" or "copy PATHS"
	copied []driver.File
	exec   func(spec driver.ExecSpec) (driver.ExecResult, error)
}

func (f *fakeDriver) Exec(_ context.Context, id string, spec driver.ExecSpec) (driver.ExecResult, error) {
	f.mu.Lock()
	f.calls = append(f.calls, "exec "+strings.Join(spec.Command, " "))
	f.mu.Unlock()
	if id != "inst-1" {
		return driver.ExecResult{}, fmt.Errorf("instance %q: %w", id, driver.ErrNotFound)
	}
	res, err := f.exec(spec)
	if err != nil {
		return res, err
	}
	// Collected as a driver does: bounded and masked as spec asks.
	stdout, stderr := spec.Output(), spec.Output()
	_, _ = stdout.Write(res.Stdout)
	_, _ = stderr.Write(res.Stderr)
	return driver.Collected(res.ExitCode, stdout, stderr), nil
}

func (f *fakeDriver) CopyFiles(_ context.Context, _ string, files []driver.File) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "copy")
	f.copied = append(f.copied, files...)
	return nil
}

func fastPolling(t *testing.T) {
	first, most := pollFirst, pollMax
	pollFirst, pollMax = 5*time.Millisecond, 20*time.Millisecond
	t.Cleanup(func() { pollFirst, pollMax = first, most })
}

func ok(stdout string) (driver.ExecResult, error) {
	return driver.ExecResult{Stdout: []byte(stdout)}, nil
}

func isProbe(spec driver.ExecSpec, kind string) bool {
	return len(spec.Command) > 2 && spec.Command[1] == "probe" && spec.Command[2] == kind
}

func webPlan(t *testing.T, timeout time.Duration) Plan {
	return mustExpand(t, Input{
		Files:    []driver.File{{Path: "/srv/index.html", Content: []byte("ok")}},
		Commands: [][]string{{"sh", "-c", "echo prepared"}},
		Service:  &Service{Command: []string{"httpd", "-f"}, Ready: Ready{TCPPort: 8080}, Timeout: timeout},
	})
}

func TestRunHappyPath(t *testing.T) {
	fastPolling(t)
	probes := 0
	f := &fakeDriver{exec: func(spec driver.ExecSpec) (driver.ExecResult, error) {
		switch {
		case isProbe(spec, "tcp"):
			if probes++; probes < 3 {
				return driver.ExecResult{ExitCode: 1, Stderr: []byte("not ready: connection refused\n")}, nil
			}
			return ok("")
		case spec.Command[0] == "sh":
			return ok("prepared\n")
		}
		return ok("")
	}}
	before := time.Now()
	res, err := Run(context.Background(), f, "inst-1", webPlan(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(f.copied) != 1 || f.copied[0].Path != "/srv/index.html" {
		t.Errorf("copied %v", f.copied)
	}
	if f.calls[0] != "copy" || len(f.calls) != 7 { // copy, command, id, service, 3 probes
		t.Errorf("calls %q", f.calls)
	}
	if len(res.Steps) != 2 || res.Steps[0].Stdout != "prepared\n" || res.Steps[1].Command[1] != "service" {
		t.Errorf("results %#v", res.Steps)
	}
	if res.ReadyAt.Before(before) {
		t.Errorf("ReadyAt %v not set", res.ReadyAt)
	}
}

func TestRunCommandFailureStops(t *testing.T) {
	f := &fakeDriver{exec: func(spec driver.ExecSpec) (driver.ExecResult, error) {
		return driver.ExecResult{ExitCode: 2, Stderr: []byte("warning\nsh: boom: not found\n")}, nil
	}}
	res, err := Run(context.Background(), f, "inst-1", webPlan(t, time.Second))
	if err == nil || !strings.Contains(err.Error(), "step 2 of 4 (command)") ||
		!strings.Contains(err.Error(), "exited with status 2: sh: boom: not found") {
		t.Fatalf("error %v", err)
	}
	if len(res.Steps) != 1 || res.Steps[0].ExitCode != 2 || len(f.calls) != 2 {
		t.Errorf("results %#v calls %q", res.Steps, f.calls)
	}
}

func TestRunServiceNotStarted(t *testing.T) {
	f := &fakeDriver{exec: func(spec driver.ExecSpec) (driver.ExecResult, error) {
		if spec.Command[1] == "service" {
			return driver.ExecResult{ExitCode: 127, Stderr: []byte(`sandbox-agent: service: cannot start "httpd": not found`)}, nil
		}
		return ok("")
	}}
	_, err := Run(context.Background(), f, "inst-1", webPlan(t, time.Second))
	if err == nil || !strings.Contains(err.Error(), `service ["httpd" "-f"] could not be started`) {
		t.Fatalf("error %v", err)
	}
}

func TestRunTimeoutExplains(t *testing.T) {
	fastPolling(t)
	f := &fakeDriver{exec: func(spec driver.ExecSpec) (driver.ExecResult, error) {
		switch {
		case isProbe(spec, "tcp"):
			return driver.ExecResult{ExitCode: 1, Stderr: []byte("not ready: dial tcp 127.0.0.1:8080: connection refused\n")}, nil
		case isProbe(spec, "pid"):
			return driver.ExecResult{ExitCode: 1, Stderr: []byte("not ready: process 7 is not running\n")}, nil
		case spec.Command[1] == "tail":
			if !reflect.DeepEqual(spec.Command[2:], []string{"--bytes", "4096", "/.sandbox/run/init.log"}) {
				t.Errorf("tail argv %q", spec.Command)
			}
			return ok("starting\npanic: boom\n")
		}
		return ok("")
	}}
	start := time.Now()
	_, err := Run(context.Background(), f, "inst-1", webPlan(t, 200*time.Millisecond))
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("took %s for a 200ms timeout", took)
	}
	for _, want := range []string{
		"service not ready after 200ms",
		"last probe: exit 1: not ready: dial tcp 127.0.0.1:8080: connection refused",
		"the service process has exited",
		"end of service log /.sandbox/run/init.log:\nstarting\npanic: boom",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v\nlacks %q", err, want)
		}
	}
}

func TestRunProbeNotFoundAborts(t *testing.T) {
	f := &fakeDriver{exec: func(driver.ExecSpec) (driver.ExecResult, error) { return ok("") }}
	plan := Plan{Steps: []Step{{Kind: StepWait, Description: "wait", Command: []string{"true"}, Timeout: time.Hour}}}
	_, err := Run(context.Background(), f, "gone", plan)
	if !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("error %v, want ErrNotFound", err)
	}
}

func TestRunContextCancelled(t *testing.T) {
	fastPolling(t)
	f := &fakeDriver{exec: func(driver.ExecSpec) (driver.ExecResult, error) {
		return driver.ExecResult{ExitCode: 1}, nil
	}}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	plan := Plan{Steps: []Step{{Kind: StepWait, Description: "wait", Command: []string{"false"}, Timeout: time.Hour}}}
	_, err := Run(ctx, f, "inst-1", plan)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the context's deadline", err)
	}
}

func TestRunTruncatesAndMasks(t *testing.T) {
	big := strings.Repeat("a", 5000) + "hunter2-end"
	f := &fakeDriver{exec: func(driver.ExecSpec) (driver.ExecResult, error) {
		return driver.ExecResult{ExitCode: 3, Stdout: []byte(big), Stderr: []byte("bad password hunter2\n")}, nil
	}}
	plan := Plan{Secrets: []string{"hunter2"}, Steps: []Step{{Kind: StepRun, Description: "login", Command: []string{"login", "--password", "hunter2"}}}}
	res, err := Run(context.Background(), f, "inst-1", plan)
	if err == nil || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "bad password (sensitive)") {
		t.Errorf("error %v", err)
	}
	r := res.Steps[0]
	if !reflect.DeepEqual(r.Command, []string{"login", "--password", "(sensitive)"}) || strings.Contains(r.Stderr, "hunter2") {
		t.Errorf("not masked: %#v", r)
	}
	// 5000 + len("(sensitive)-end") bytes once masked, of which 4096 are kept.
	if !strings.HasPrefix(r.Stdout, "[... 919 bytes truncated]\n") || !strings.HasSuffix(r.Stdout, "(sensitive)-end") {
		t.Errorf("stdout head %q tail %q", r.Stdout[:40], r.Stdout[len(r.Stdout)-20:])
	}
}

// TestRunMasksSecretAtTheCut: the secret's start falls just before the
// 4 KiB kept; cut first and masked after, its end would be stored.
func TestRunMasksSecretAtTheCut(t *testing.T) {
	const secret = "hunter2-long-password"
	out := strings.Repeat("a", 5000) + secret + strings.Repeat("b", MaxOutput-10)
	f := &fakeDriver{exec: func(driver.ExecSpec) (driver.ExecResult, error) { return ok(out) }}
	plan := Plan{Secrets: []string{secret}, Steps: []Step{{Kind: StepRun, Description: "print", Command: []string{"print"}}}}
	res, err := Run(context.Background(), f, "inst-1", plan)
	if err != nil {
		t.Fatal(err)
	}
	got := res.Steps[0].Stdout
	if strings.Contains(got, "password") || !strings.Contains(got, "sitive)bbb") {
		t.Errorf("stdout keeps part of the secret or lost the mask: %q", got[:60])
	}
}

// TestRunMasksFileContents: a command that prints a file the initializer
// copied (inline or from a source file) shows it masked; short contents,
// which would mask ordinary words, are not.
func TestRunMasksFileContents(t *testing.T) {
	src := t.TempDir() + "/token"
	if err := os.WriteFile(src, []byte("tok-from-source-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fakeDriver{exec: func(driver.ExecSpec) (driver.ExecResult, error) {
		return driver.ExecResult{ExitCode: 1, Stdout: []byte("db-password-1234\nok\n"), Stderr: []byte("bad token tok-from-source-file")}, nil
	}}
	plan := mustExpand(t, Input{
		Files: []driver.File{
			{Path: "/etc/app/password", Content: []byte("  db-password-1234\n")},
			{Path: "/etc/app/token", Source: src},
			{Path: "/etc/app/flag", Content: []byte("ok")},
		},
		Commands: [][]string{{"cat", "/etc/app/password"}},
	})
	res, err := Run(context.Background(), f, "inst-1", plan)
	if err == nil || strings.Contains(err.Error(), "tok-from") || !strings.Contains(err.Error(), "bad token (sensitive)") {
		t.Errorf("error %v", err)
	}
	r := res.Steps[len(res.Steps)-1]
	if r.Stdout != "(sensitive)\nok\n" || r.Stderr != "bad token (sensitive)" {
		t.Errorf("stdout %q stderr %q", r.Stdout, r.Stderr)
	}
}

func TestTruncateUTF8(t *testing.T) {
	s := strings.Repeat("é", 3000) // 6000 bytes, 2 per rune
	got := Truncate([]byte(s), 0)
	body := got[strings.IndexByte(got, '\n')+1:]
	if len(body) > MaxOutput || !strings.HasPrefix(body, "é") {
		t.Errorf("truncated body of %d bytes starts %q", len(body), body[:4])
	}
	if Truncate([]byte("short"), 0) != "short" {
		t.Error("short output changed")
	}
	if got := Truncate([]byte("end"), 7); got != "[... 7 bytes truncated]\nend" {
		t.Errorf("kept end of a longer stream: %q", got)
	}
}

func TestRunDestroyRunsAll(t *testing.T) {
	f := &fakeDriver{exec: func(spec driver.ExecSpec) (driver.ExecResult, error) {
		if spec.Command[0] == "fail" {
			return driver.ExecResult{ExitCode: 1, Stderr: []byte("nope")}, nil
		}
		return ok("bye\n")
	}}
	plan := mustExpand(t, Input{OnDestroy: [][]string{{"fail"}, {"echo", "bye"}}})
	res, err := RunDestroy(context.Background(), f, "inst-1", plan)
	if err == nil || !strings.Contains(err.Error(), "on_destroy[0]") || strings.Contains(err.Error(), "on_destroy[1]") {
		t.Errorf("error %v", err)
	}
	if len(res.Steps) != 2 || res.Steps[1].Stdout != "bye\n" {
		t.Errorf("results %#v", res.Steps)
	}
}

// A service for a non-root user is started by the agent as root with
// --user (it keeps its log and pid file in the root-owned StateDir); where
// the engine cannot exec as root, it is started as the user, as before.
func TestRunServiceAsRootWithUser(t *testing.T) {
	fastPolling(t)
	for _, rootRefused := range []bool{false, true} {
		var service []driver.ExecSpec
		f := &fakeDriver{exec: func(spec driver.ExecSpec) (driver.ExecResult, error) {
			switch {
			case len(spec.Command) > 1 && spec.Command[1] == "id":
				if spec.User != "web" {
					t.Errorf("id ran as %q, want the service's user", spec.User)
				}
				return ok("1000:1000\n")
			case len(spec.Command) > 1 && spec.Command[1] == "service":
				service = append(service, spec)
				if rootRefused && spec.User == RootUser {
					return driver.ExecResult{}, fmt.Errorf("user %q: %w", spec.User, driver.ErrUnsupported)
				}
			}
			return ok("")
		}}
		p, err := Expand(Input{Kind: "custom", Service: &Service{Command: []string{"httpd"}, User: "web", Ready: Ready{TCPPort: 80}, Timeout: time.Second}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Run(context.Background(), f, "inst-1", p); err != nil {
			t.Fatalf("rootRefused=%v: Run: %v", rootRefused, err)
		}
		first := strings.Join(service[0].Command, " ")
		if service[0].User != RootUser || !strings.Contains(first, "--user 1000:1000 -- httpd") {
			t.Errorf("service started as %q: %s", service[0].User, first)
		}
		if rootRefused && (len(service) != 2 || service[1].User != "web" || strings.Contains(strings.Join(service[1].Command, " "), "--user")) {
			t.Errorf("no fallback to the user: %#v", service)
		}
	}
}
