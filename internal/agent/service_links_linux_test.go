package agent_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
)

// victim is a file outside the state directory that a planted link points
// at; the test checks it is untouched (content, owner, mode).
type victim struct {
	path string
	st   syscall.Stat_t
}

func newVictim(t *testing.T) victim {
	t.Helper()
	v := victim{path: filepath.Join(t.TempDir(), "shadow")}
	if err := os.WriteFile(v.path, []byte("root:secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(v.path, &v.st); err != nil {
		t.Fatal(err)
	}
	return v
}

func (v victim) check(t *testing.T, how string) {
	t.Helper()
	var st syscall.Stat_t
	b, err := os.ReadFile(v.path)
	if err != nil || syscall.Stat(v.path, &st) != nil {
		t.Fatalf("%s: victim %s: %v", how, v.path, err)
	}
	if string(b) != "root:secret\n" || st.Uid != v.st.Uid || st.Gid != v.st.Gid || st.Mode != v.st.Mode {
		t.Errorf("%s: the file behind the link changed: %q uid %d gid %d mode %o", how, b, st.Uid, st.Gid, st.Mode)
	}
}

// serviceArgs starts `sh -c 'echo started'` with the log and pid file given,
// as an unprivileged user when the test runs as root (as initplan does).
func serviceArgs(logPath, pidPath string) []string {
	args := []string{"service", "--log", logPath, "--pidfile", pidPath}
	if os.Geteuid() == 0 {
		args = append(args, "--user", "65534:65534")
	}
	return append(args, "--", "sh", "-c", "echo started")
}

// TestServiceRefusesPlantedLinks is the attack of a sandbox user on the
// world-writable state directory: a symlink, a hard link or a FIFO where
// the agent (root) will open the service's log or pid file.
func TestServiceRefusesPlantedLinks(t *testing.T) {
	for _, plant := range []struct {
		name  string
		place func(v victim, at string) error
	}{
		{"symlink", func(v victim, at string) error { return os.Symlink(v.path, at) }},
		{"hard link", func(v victim, at string) error { return os.Link(v.path, at) }},
	} {
		t.Run(plant.name+" at the log", func(t *testing.T) {
			dir, v := t.TempDir(), newVictim(t)
			logPath, pidPath := filepath.Join(dir, "svc.log"), filepath.Join(dir, "svc.pid")
			if err := plant.place(v, logPath); err != nil {
				t.Skipf("cannot plant a %s across these directories: %v", plant.name, err)
			}
			code, _, errOut := runAgent(t, 10*time.Second, serviceArgs(logPath, pidPath)...)
			if code != agent.ExitNotStarted || !strings.Contains(errOut, "refusing") {
				t.Errorf("service with a %s at its log: exit %d stderr %q, want %d and a refusal", plant.name, code, errOut, agent.ExitNotStarted)
			}
			v.check(t, plant.name+" at the log")
			if _, err := os.Lstat(pidPath); err == nil {
				t.Errorf("a pid file was written although nothing was started")
			}
		})
	}
	t.Run("symlink at the pid file", func(t *testing.T) {
		dir, v, old := t.TempDir(), newVictim(t), newVictim(t)
		logPath, pidPath := filepath.Join(dir, "svc.log"), filepath.Join(dir, "svc.pid")
		if err := os.Symlink(v.path, pidPath); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(old.path, pidPath+".tmp"); err != nil { // the temporary name of earlier agents
			t.Fatal(err)
		}
		if code, _, errOut := runAgent(t, 10*time.Second, serviceArgs(logPath, pidPath)...); code != 0 {
			t.Fatalf("service: exit %d stderr %q", code, errOut)
		}
		v.check(t, "symlink at the pid file")
		old.check(t, "symlink at the old temporary pid file")
		fi, err := os.Lstat(pidPath)
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("pid file %s: %v %v, want a regular file in place of the link", pidPath, fi, err)
		}
		b, _ := os.ReadFile(pidPath)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || pid <= 0 {
			t.Errorf("pid file holds %q", b)
		}
		waitFor(t, func() bool { b, _ := os.ReadFile(logPath); return string(b) == "started\n" }, "the service's log")
	})
	t.Run("FIFO at the log", func(t *testing.T) {
		dir := t.TempDir()
		logPath, pidPath := filepath.Join(dir, "svc.log"), filepath.Join(dir, "svc.pid")
		if err := syscall.Mkfifo(logPath, 0o666); err != nil {
			t.Fatal(err)
		}
		// No reader: an open that blocks would never return (runAgent fails).
		code, _, errOut := runAgent(t, 10*time.Second, serviceArgs(logPath, pidPath)...)
		if code != agent.ExitNotStarted || errOut == "" {
			t.Errorf("service with a FIFO at its log: exit %d stderr %q", code, errOut)
		}
	})
}
