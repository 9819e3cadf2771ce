//go:build linux

package agent

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

type serviceConfig struct {
	log, pidfile, workdir, user string
	argv                        []string
}

func parseService(args []string, stderr io.Writer) (serviceConfig, error) {
	fs := flag.NewFlagSet("service", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c serviceConfig
	fs.StringVar(&c.log, "log", "", "file that receives stdout and stderr (appended)")
	fs.StringVar(&c.pidfile, "pidfile", "", "file that receives the pid")
	fs.StringVar(&c.workdir, "workdir", "", "working directory")
	fs.StringVar(&c.user, "user", "", "uid[:gid] the command runs as (the agent stays root to create the log and pid file)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	c.argv = fs.Args()
	switch {
	case c.log == "":
		return c, fmt.Errorf("--log is required")
	case c.pidfile == "":
		return c, fmt.Errorf("--pidfile is required")
	case len(c.argv) == 0:
		return c, fmt.Errorf("a command is required after --")
	}
	return c, nil
}

// runService starts the command in a new session so it outlives the exec
// that started it (and is not killed with that exec's process group), and
// returns as soon as it runs.
func runService(args []string, stderr io.Writer) int {
	c, err := parseService(args, stderr)
	if err != nil {
		return usageError(stderr, "service: %v", err)
	}
	cred, err := userCredential(c.user)
	if err != nil {
		return usageError(stderr, "service: %v", err)
	}
	if cred != nil && !canSwitchUser() {
		// Root (the owner of the state directory) may still open it up.
		for _, dir := range []string{filepath.Dir(c.log), filepath.Dir(c.pidfile)} {
			openUpDir(dir)
		}
		fmt.Fprintf(stderr, "sandbox-agent: service: cannot switch to user %s (no CAP_SETUID/CAP_SETGID); start it as that user\n", c.user)
		return ExitCannotSwitch
	}
	logf, err := openLog(c.log, cred)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-agent: service: %v\n", err)
		return ExitNotStarted
	}
	defer logf.Close()
	if cred != nil {
		// The log is opened (and the pid file written) as root; the user
		// gets its log, so it can reopen or read it. Fchown: the open file,
		// never whatever the path names by now.
		_ = logf.Chown(int(cred.Uid), int(cred.Gid))
	}
	cmd := exec.Command(c.argv[0], c.argv[1:]...)
	cmd.Dir = c.workdir
	cmd.Stdout, cmd.Stderr = logf, logf // *os.File: passed as fds, no copying goroutine
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: cred}
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "sandbox-agent: service: cannot start %q: %v\n", c.argv[0], err)
		return ExitNotStarted
	}
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	if err := writePIDFile(c.pidfile, pid); err != nil {
		fmt.Fprintf(stderr, "sandbox-agent: service: started pid %d but %v\n", pid, err)
		return 1
	}
	return 0
}

// The state directory is writable by the sandbox's users (sticky, 1777),
// and the agent often runs as root there: a user could plant a symlink, a
// hard link or a FIFO at the log or pid file's path for root to write
// through (appending service output to /etc/shadow, handing it to the
// user with the fchown). openLog and writePIDFile never follow the last
// component of the path, and accept only a regular file of their own.

// openLog opens the service log for appending, creating it. It refuses
// anything but a regular file with one link owned by root, this process
// or the service's user.
func openLog(path string, user *syscall.Credential) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("log directory: %w", err)
	}
	// O_NONBLOCK: opening a planted FIFO fails (ENXIO) instead of hanging.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("log %s is a symbolic link; refusing to write through it", path)
		}
		return nil, fmt.Errorf("log: %w", err)
	}
	if err := ownRegularFile(f, user); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("log %s %w; refusing to write to it", path, err)
	}
	return f, nil
}

// ownRegularFile checks what an open log is: a regular file with one link
// (no hard link to a file elsewhere), owned by root, us or the user.
func ownRegularFile(f *os.File, user *syscall.Credential) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("cannot be inspected: %w", err)
	}
	switch {
	case st.Mode&syscall.S_IFMT != syscall.S_IFREG:
		return errors.New("is not a regular file")
	case st.Nlink != 1:
		return fmt.Errorf("has %d hard links", st.Nlink)
	case st.Uid != 0 && st.Uid != uint32(os.Geteuid()) && (user == nil || st.Uid != user.Uid):
		return fmt.Errorf("belongs to uid %d, neither root nor the service's user", st.Uid)
	}
	return nil
}

// writePIDFile writes through a rename so a probe never reads half a file.
// The temporary file is new (O_EXCL: nothing planted is opened) and the
// rename replaces whatever is at path, a symlink included, without
// following it.
func writePIDFile(path string, pid int) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("pidfile directory: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write pidfile: %w", err)
	}
	_, err = tmp.WriteString(strconv.Itoa(pid) + "\n")
	if err == nil {
		err = tmp.Chmod(0o644) // probes run as the service's user
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write pidfile: %w", err)
	}
	return nil
}

// openUpDir makes dir sticky world-writable, through an open descriptor of
// the directory itself: a symlink at dir is left alone.
func openUpDir(dir string) {
	if os.MkdirAll(dir, 0o755) != nil {
		return
	}
	d, err := os.OpenFile(dir, os.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return
	}
	_ = d.Chmod(0o1777)
	_ = d.Close()
}

// probePID reports whether the process named in pidfile is alive (and not
// a zombie waiting to be reaped).
func probePID(pidfile string) error {
	b, err := os.ReadFile(pidfile)
	if err != nil {
		return fmt.Errorf("pidfile: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return fmt.Errorf("pidfile %s does not hold a pid: %q", pidfile, strings.TrimSpace(string(b)))
	}
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return fmt.Errorf("process %d is not running: %w", pid, err)
	}
	if processState(pid) == "Z" {
		return fmt.Errorf("process %d has exited", pid)
	}
	return nil
}

// processState is the one-letter state of pid ("" if unknown).
func processState(pid int) string {
	if f := procStat(pid); len(f) > 0 {
		return f[0]
	}
	return ""
}

// canSwitchUser reports whether this process may change its uid and gid
// (CAP_SETUID and CAP_SETGID effective).
func canSwitchUser() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			eff, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			const setgid, setuid = 1 << 6, 1 << 7
			return err == nil && eff&setgid != 0 && eff&setuid != 0
		}
	}
	return false
}
