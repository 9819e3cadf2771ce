package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// Attacks from inside a bwrap sandbox on the host, run with a small static
// helper (testdata/attack) that each test copies into its sandbox.

var (
	attackOnce sync.Once
	attackPath string
	attackErr  error
)

// attackBinary builds testdata/attack statically, in a directory every host
// user can reach (the unprivileged control runs need it).
func attackBinary(t *testing.T) string {
	t.Helper()
	attackOnce.Do(func() {
		dir, err := os.MkdirTemp("", "local-attack-")
		if err != nil {
			attackErr = err
			return
		}
		tempDirs = append(tempDirs, dir)
		if attackErr = os.Chmod(dir, 0o755); attackErr != nil {
			return
		}
		out := filepath.Join(dir, "attack")
		cmd := exec.Command("go", "build", "-o", out, "./testdata/attack")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			attackErr = fmt.Errorf("build testdata/attack: %v: %s", err, b)
			return
		}
		attackPath = out
	})
	if attackErr != nil {
		t.Fatal(attackErr)
	}
	return attackPath
}

// withAttack is a running busybox sandbox holding the helper at /attack.
func withAttack(t *testing.T, name string) driver.InstanceSpec {
	spec := testSpec(name)
	spec.Files = []driver.File{{Path: "/attack", Source: attackBinary(t), Mode: 0o755}}
	return spec
}

// asNobody runs argv on the host as uid and gid 65534, with no groups. A
// shell does the exec: setpriv itself still holds root's capabilities (and
// so reaches any path) when it execs its command.
func asNobody(argv ...string) (string, error) {
	args := append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--", "/bin/sh", "-c", `exec "$@"`, "sh"}, argv...)
	out, err := exec.Command("setpriv", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// TestSandboxWritesStayOffTheHost: root in a sandbox leaves a set-uid root
// copy of a program and a device node in its workspace and its rootfs; no
// unprivileged host user can reach them, and inside they grant nothing.
func TestSandboxWritesStayOffTheHost(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatalf("setpriv (util-linux) is needed to act as an unprivileged host user: %v", err)
	}
	if _, err := d.CreateVolume(context.Background(), driver.VolumeSpec{Name: "shared"}); err != nil {
		t.Fatal(err)
	}
	spec := withAttack(t, "suid")
	spec.Mounts = []driver.Mount{{Volume: "shared", Target: "/data"}}
	mustCreate(t, d, spec)
	sh(t, d, "suid", "cp /attack /workspace/suid && chmod 4755 /workspace/suid && "+
		"cp /attack /suid-root && chmod 6755 /suid-root && mknod /workspace/zero c 1 5 && "+
		"cp /attack /data/suid && chmod 4755 /data/suid")

	dir := d.instanceDir("suid")
	planted := map[string]string{
		"workspace set-uid file":  filepath.Join(dir, workspace, "suid"),
		"rootfs set-uid file":     filepath.Join(dir, upperDir, "suid-root"),
		"workspace device (zero)": filepath.Join(dir, workspace, "zero"),
		"volume set-uid file":     filepath.Join(d.volumeData("shared"), "suid"),
	}
	// The attack got as far as the host file system: root-owned set-uid
	// files and a character device (else this test could not fail).
	for what, p := range planted {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatalf("%s was not planted: %v", what, err)
		}
		isDev := st.Mode&unix.S_IFMT == unix.S_IFCHR
		if st.Uid != 0 || (!isDev && st.Mode&unix.S_ISUID == 0) {
			t.Fatalf("%s: mode %o uid %d, want a root-owned set-uid file or a device", what, st.Mode, st.Uid)
		}
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("instance directory mode %v, want 0700", fi.Mode().Perm())
	}
	// Control: the unprivileged user can run the helper where it may reach it.
	if out, err := asNobody(attackBinary(t), "euid"); err != nil || out != "65534" {
		t.Fatalf("control: the helper as nobody: %q, %v", out, err)
	}
	for what, p := range planted {
		argv := []string{p, "euid"}
		if strings.Contains(what, "device") {
			argv = []string{"/bin/busybox", "head", "-c", "1", p}
		}
		out, err := asNobody(argv...)
		if err == nil || !strings.Contains(out, "ermission denied") {
			t.Errorf("nobody reached the %s at %s: %q, %v", what, p, out, err)
		}
	}
	// Inside, the binds are nosuid and nodev and no_new_privs holds.
	res, err := d.Exec(context.Background(), "suid", driver.ExecSpec{User: "1000", Command: []string{"/workspace/suid", "euid"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "1000" {
		t.Errorf("the set-uid copy as uid 1000 in the sandbox: %q %q, %v; want euid 1000", res.Stdout, res.Stderr, err)
	}
	if got := sh(t, d, "suid", "head -c 1 /workspace/zero >/dev/null 2>&1 && echo usable || echo refused"); got != "refused\n" {
		t.Errorf("the device node in the sandbox: %q", got)
	}
}

// ttyHelperEnv makes the test binary act as ttyHelper: a process with a
// controlling terminal that runs an exec in the named sandbox.
const ttyHelperEnv = "SANDBOX_LOCAL_TTY_HELPER"

// ttyHelper opens the backend named by ttyHelperEnv (root, backend,
// instance), shows that it has a controlling terminal itself and runs the
// helper's tty check through Exec.
func ttyHelper() int {
	parts := strings.Split(os.Getenv(ttyHelperEnv), "\n")
	if len(parts) != 3 {
		return 2
	}
	f, err := os.OpenFile("/dev/tty", os.O_RDWR, 0)
	if err != nil {
		fmt.Println("helper: no controlling terminal:", err)
		return 3
	}
	f.Close()
	sid, _ := unix.Getsid(0)
	fmt.Println("helper: /dev/tty ok, sid", sid)
	dr, err := driver.Open(context.Background(), driver.Config{Driver: driver.Local, Name: parts[1], Local: &driver.LocalConfig{Root: parts[0], Isolation: driver.IsolationBwrap}})
	if err != nil {
		fmt.Println("helper:", err)
		return 4
	}
	res, err := dr.Exec(context.Background(), parts[2], driver.ExecSpec{Command: []string{"/attack", "tty"}})
	if err != nil {
		fmt.Println("helper: exec:", err)
		return 5
	}
	fmt.Printf("%s%s", res.Stdout, res.Stderr)
	return 0
}

// TestExecHasNoControllingTerminal: an exec started by a provider that runs
// in a terminal cannot open that terminal (and so cannot push keystrokes
// into it with TIOCSTI).
func TestExecHasNoControllingTerminal(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	mustCreate(t, d, withAttack(t, "tty"))
	master, slave := openPty(t)
	defer master.Close()
	defer slave.Close()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), ttyHelperEnv+"="+strings.Join([]string{filepath.Dir(d.root), d.backend, "tty"}, "\n"))
	cmd.Stdin = slave // becomes its controlling terminal
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	out, err := cmd.Output()
	got := string(out)
	if err != nil {
		t.Fatalf("helper: %v: %s", err, got)
	}
	if !strings.Contains(got, "helper: /dev/tty ok") {
		t.Fatalf("the helper had no controlling terminal, the test proves nothing: %q", got)
	}
	if !strings.Contains(got, "open /dev/tty ENXIO") || strings.Contains(got, "TIOCSTI") {
		t.Errorf("the exec reached the provider's terminal: %q", got)
	}
}

// openPty opens a new pseudo-terminal pair.
func openPty(t *testing.T) (*os.File, *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, s
}

// attackResults runs the helper's system call attempts and parses
// "<call> <errno or ok>" lines.
func attackResults(t *testing.T, out string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("unexpected helper output %q", out)
		}
		got[line[:i]] = line[i+1:]
	}
	return got
}

// refusedByFilter are the calls of testdata/attack; the filter answers EPERM
// to all but clone3 (ENOSYS, so that libc falls back to clone).
func wantFiltered(call string) string {
	if call == "clone3" {
		return "ENOSYS"
	}
	return "EPERM"
}

// TestSeccompFilter: every system call of Docker's deny-list the helper
// tries is refused by the filter, in the sandbox's command (installed by
// bwrap) and in an exec (installed by the agent). A privileged sandbox has
// no filter: there the same calls get the kernel's own answers, which shows
// the EPERMs come from the filter.
func TestSeccompFilter(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	spec := withAttack(t, "filtered")
	spec.Command = []string{"sh", "-c", "/attack syscalls > /workspace/init.out 2>&1; grep Seccomp: /proc/self/status >> /workspace/init.out; sleep 3600"}
	mustCreate(t, d, spec)
	res, err := d.Exec(context.Background(), "filtered", driver.ExecSpec{Command: []string{"/attack", "syscalls"}})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v, exit %d: %s", err, res.ExitCode, res.Stderr)
	}
	fromExec := attackResults(t, string(res.Stdout))
	if len(fromExec) < 30 {
		t.Fatalf("the helper tried %d calls: %q", len(fromExec), res.Stdout)
	}
	for call, got := range fromExec {
		if call == "i386 getpid" && got == "no-ia32" {
			continue // this kernel has no i386 system calls: nothing to filter
		}
		if want := wantFiltered(call); got != want {
			t.Errorf("exec: %s: %s, want %s", call, got, want)
		}
	}
	initOut := sh(t, d, "filtered", "while ! grep -q Seccomp: /workspace/init.out 2>/dev/null; do sleep 0.05; done; cat /workspace/init.out")
	if !strings.Contains(initOut, "Seccomp:\t2") {
		t.Errorf("the command does not run under a seccomp filter: %q", initOut)
	}
	fromInit := attackResults(t, strings.Split(initOut, "Seccomp:")[0])
	for call, want := range fromExec {
		if fromInit[call] != want {
			t.Errorf("command: %s: %s, want %s", call, fromInit[call], want)
		}
	}

	priv := withAttack(t, "unfiltered")
	priv.Security.Privileged = true
	mustCreate(t, d, priv)
	res, err = d.Exec(context.Background(), "unfiltered", driver.ExecSpec{Command: []string{"/attack", "syscalls"}})
	if err != nil {
		t.Fatal(err)
	}
	unfiltered := attackResults(t, string(res.Stdout))
	// Calls whose kernel answer does not depend on this host's settings.
	for _, call := range []string{"keyctl", "add_key", "request_key", "unshare(CLONE_NEWUSER)", "clone3", "personality(ADDR_NO_RANDOMIZE)",
		"i386 getpid", "mount", "setns", "swapon", "reboot", "init_module", "settimeofday", "clock_settime", "open_by_handle_at"} {
		if got := unfiltered[call]; got == "" || (got == fromExec[call] && got != "no-ia32") {
			t.Errorf("privileged, without the filter: %s answered %q, as with the filter", call, got)
		}
	}
	if got := sh(t, d, "unfiltered", "grep Seccomp: /proc/self/status"); !strings.Contains(got, "\t0") {
		t.Errorf("a privileged sandbox has a seccomp filter: %q", got)
	}
}

// TestFreshSessionKeyring: a sandbox does not share the provider's session
// keyring (seen in a privileged sandbox, where keyctl is allowed).
func TestFreshSessionKeyring(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	ours, err := unix.KeyctlGetKeyringID(unix.KEY_SPEC_SESSION_KEYRING, false) // without one: the user session keyring, which every thread sees
	if err != nil {
		t.Fatalf("this process's session keyring: %v", err)
	}
	spec := withAttack(t, "keys")
	spec.Security.Privileged = true
	spec.Command = []string{"sh", "-c", "/attack keyring > /workspace/init.out; sleep 3600"}
	mustCreate(t, d, spec)
	res, err := d.Exec(context.Background(), "keys", driver.ExecSpec{Command: []string{"/attack", "keyring"}})
	if err != nil {
		t.Fatal(err)
	}
	fromExec := strings.TrimSpace(string(res.Stdout))
	fromInit := strings.TrimSpace(sh(t, d, "keys", "while [ ! -s /workspace/init.out ]; do sleep 0.05; done; cat /workspace/init.out"))
	for what, got := range map[string]string{"exec": fromExec, "command": fromInit} {
		id, err := strconv.Atoi(strings.TrimPrefix(got, "keyring "))
		if err != nil || id == ours {
			t.Errorf("%s: session keyring %q, the provider's is %d", what, got, ours)
		}
	}
}

// TestReservedEnvAndUserIDs: the wrapper's variables and ids that setuid
// cannot take are refused, and nothing is left behind.
func TestReservedEnvAndUserIDs(t *testing.T) {
	for _, isolation := range []string{driver.IsolationNone, driver.IsolationBwrap} {
		d := openTest(t, isolation)
		base := testSpec("bad")
		if isolation == driver.IsolationNone {
			base.Image = ""
		}
		env := base
		env.Env = map[string]string{"SBX_EXIT": "/etc/passwd"}
		if _, err := d.CreateInstance(context.Background(), env); !errors.Is(err, driver.ErrInvalid) || !strings.Contains(err.Error(), `env "SBX_EXIT"`) {
			t.Errorf("%s: env SBX_EXIT: %v", isolation, err)
		}
		for _, u := range []string{"4294967295", "0:4294967295", "-1", "99999999999999999999"} {
			bad := base
			bad.User = u
			if _, err := d.CreateInstance(context.Background(), bad); err == nil || !strings.Contains(err.Error(), "out of range") {
				t.Errorf("%s: user %q: %v", isolation, u, err)
			}
		}
		if _, err := os.Stat(d.instanceDir("bad")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: a refused create left %s: %v", isolation, d.instanceDir("bad"), err)
		}
	}
}
