//go:build linux

package agent

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// prSetChildSubreaper makes orphans re-parent to us when we are not PID 1
// (local sandboxes without a PID namespace, tests), so we still reap them.
const prSetChildSubreaper = 36

// forwarded are the signals init passes on to its command.
var forwarded = []os.Signal{
	syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP,
	syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

type initConfig struct {
	deadline time.Time
	grace    time.Duration
	user     string // "uid:gid" the command runs as (see user_linux.go)
	argv     []string
}

func parseInit(args []string, stderr io.Writer) (initConfig, error) {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	deadline := fs.String("deadline", "", "RFC 3339 time at which everything is stopped")
	cfg := initConfig{}
	fs.DurationVar(&cfg.grace, "grace", DefaultGrace, "wait between TERM and KILL")
	fs.StringVar(&cfg.user, "user", "", "numeric uid[:gid] the command runs as (init stays root)")
	argvFile := fs.String("argv-file", "", "file holding the command (JSON list or NUL-separated)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	if *argvFile != "" {
		if fs.NArg() > 0 {
			return cfg, fmt.Errorf("--argv-file and a command after -- are exclusive")
		}
		argv, err := readArgvFile(*argvFile)
		if err != nil {
			return cfg, fmt.Errorf("--argv-file: %w", err)
		}
		cfg.argv = argv
	}
	if *deadline != "" {
		t, err := time.Parse(time.RFC3339Nano, *deadline)
		if err != nil {
			return cfg, fmt.Errorf("--deadline: %w", err)
		}
		cfg.deadline = t
	}
	if *argvFile == "" {
		cfg.argv = fs.Args()
	}
	return cfg, nil
}

// supervisor is the state of a running init.
type supervisor struct {
	pid1   bool
	child  int // pid of the command; 0 when there is none
	stderr io.Writer
	cred   *syscall.Credential // nil: the command runs as init's user
}

func runInit(args []string, stderr io.Writer) int {
	cfg, err := parseInit(args, stderr)
	if err != nil {
		return usageError(stderr, "init: %v", err)
	}
	if !cfg.deadline.IsZero() && !time.Now().Before(cfg.deadline) {
		fmt.Fprintf(stderr, "sandbox-agent: lifetime ended at %s; not starting\n", cfg.deadline.Format(time.RFC3339))
		return ExitExpired
	}
	s := &supervisor{pid1: os.Getpid() == 1, stderr: stderr}
	if s.cred, err = userCredential(cfg.user); err != nil {
		return usageError(stderr, "init: %v", err)
	}
	if !s.pid1 {
		// Best effort: without it orphans go to the real init, which reaps them.
		_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	}
	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs, append([]os.Signal{syscall.SIGCHLD}, forwarded...)...)
	// Every thread init needs exists before the command can fork.
	prepareThreads()
	// The command is resolved before init reports itself ready, so a
	// driver that waits for ReadyName knows a missing command by then.
	var path string
	if len(cfg.argv) > 0 {
		if path, err = exec.LookPath(cfg.argv[0]); err != nil {
			fmt.Fprintf(stderr, "sandbox-agent: init: %v\n", err)
			return ExitNotStarted
		}
	}
	markReady()
	if len(cfg.argv) > 0 {
		if err := s.start(path, cfg.argv); err != nil {
			fmt.Fprintf(stderr, "sandbox-agent: init: %v\n", err)
			return ExitNotStarted
		}
	}
	return s.loop(cfg, sigs)
}

// start launches the command. Outside a PID namespace it gets its own
// process group so the deadline can stop it and its children together.
func (s *supervisor) start(path string, argv []string) error {
	attr := &os.ProcAttr{
		Env:   os.Environ(),
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr},
		Sys:   &syscall.SysProcAttr{Setpgid: !s.pid1, Credential: s.cred},
	}
	p, err := os.StartProcess(path, argv, attr)
	if err != nil {
		return err
	}
	s.child = p.Pid
	// We reap with wait4(-1) ourselves; the os.Process must not wait too.
	_ = p.Release()
	return nil
}

func (s *supervisor) loop(cfg initConfig, sigs <-chan os.Signal) int {
	var expire <-chan time.Time
	if !cfg.deadline.IsZero() {
		t := time.NewTimer(time.Until(cfg.deadline))
		defer t.Stop()
		expire = t.C
	}
	for {
		select {
		case sig := <-sigs:
			if sig == syscall.SIGCHLD {
				if done, code := s.reap(); done {
					return code
				}
				continue
			}
			if s.child == 0 {
				if isStopSignal(sig) {
					return s.shutdown(cfg.grace, 0)
				}
				continue
			}
			if ss, ok := sig.(syscall.Signal); ok {
				_ = syscall.Kill(s.child, ss)
			}
		case <-expire:
			fmt.Fprintf(s.stderr, "sandbox-agent: lifetime ended at %s; stopping\n", cfg.deadline.Format(time.RFC3339))
			return s.shutdown(cfg.grace, ExitExpired)
		}
	}
}

func isStopSignal(sig os.Signal) bool {
	return sig == syscall.SIGTERM || sig == syscall.SIGINT || sig == syscall.SIGHUP
}

// reap collects every exited child (zombies included) and reports whether
// the command itself has exited, with its status.
func (s *supervisor) reap() (done bool, code int) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return done, code
		}
		if pid == s.child && s.child != 0 {
			done, code = true, exitCode(ws)
		}
	}
}

// exitCode turns a wait status into a shell-style exit status.
func exitCode(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// shutdown TERMs every process, waits up to grace for all of them to exit,
// KILLs what remains and returns code.
func (s *supervisor) shutdown(grace time.Duration, code int) int {
	s.signalAll(syscall.SIGTERM)
	if !s.waitAll(time.Now().Add(grace)) {
		s.signalAll(syscall.SIGKILL)
		s.waitAll(time.Now().Add(2 * time.Second))
	}
	return code
}

// waitAll reaps until no child remains (true) or until the deadline (false).
func (s *supervisor) waitAll(deadline time.Time) bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.ECHILD):
			return true
		case err == nil && pid > 0:
			continue
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// signalAll sends sig to every process of the sandbox. As PID 1 of a PID
// namespace that is kill(-1). Otherwise kill(-1) would reach the whole host,
// so only the command's process group and the orphans re-parented to us.
func (s *supervisor) signalAll(sig syscall.Signal) {
	if s.pid1 {
		_ = syscall.Kill(-1, sig)
		return
	}
	if s.child != 0 {
		_ = syscall.Kill(-s.child, sig)
	}
	for _, pid := range childrenOf(os.Getpid()) {
		_ = syscall.Kill(pid, sig)
	}
}

// childrenOf lists the processes whose parent is ppid, from /proc.
func childrenOf(ppid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if parentOf(pid) == ppid {
			out = append(out, pid)
		}
	}
	return out
}

// parentOf is the parent pid from /proc/PID/stat (-1 if unknown).
func parentOf(pid int) int {
	f := procStat(pid)
	if len(f) < 2 {
		return -1
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return -1
	}
	return ppid
}

// procStat returns the fields of /proc/PID/stat after the command name
// (state first). The name may hold spaces and parentheses, so split after
// the last ')'.
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}
