//go:build linux

package agent

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"unsafe"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/seccomp"
)

// `sandbox-agent exec` gives a command run in a sandbox from outside (nsenter
// and the like) the hardening of the sandbox's own processes, which such
// tools do not apply: no_new_privs, the capability bounding set, the user
// and the sandbox's default seccomp filter.
// It then replaces itself with the command, so exit status and signals are
// the command's own.

type execConfig struct {
	noNewPrivs bool
	caps       uint64 // the most the command may hold; also its bounding set
	hasCaps    bool
	seccomp    bool
	user       string
	argv       []string
}

func parseExec(args []string, stderr io.Writer) (execConfig, error) {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c execConfig
	fs.BoolVar(&c.noNewPrivs, "no-new-privs", false, "set no_new_privs: set-uid programs and file capabilities grant nothing")
	caps := fs.String("caps", "", "capabilities the command may hold at most (its bounding set), hexadecimal as in /proc/PID/status")
	fs.BoolVar(&c.seccomp, "seccomp", false, "install the default seccomp filter of a sandbox holding the --caps capabilities (needs --no-new-privs)")
	fs.StringVar(&c.user, "user", "", "numeric uid[:gid] the command runs as, with no supplementary groups")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if *caps != "" {
		v, err := strconv.ParseUint(*caps, 16, 64)
		if err != nil {
			return c, fmt.Errorf("--caps %q: not a hexadecimal capability mask", *caps)
		}
		c.caps, c.hasCaps = v, true
	}
	c.argv = fs.Args()
	if len(c.argv) == 0 {
		return c, fmt.Errorf("a command is required after --")
	}
	return c, nil
}

func runExec(args []string, stderr io.Writer) int {
	c, err := parseExec(args, stderr)
	if err != nil {
		return usageError(stderr, "exec: %v", err)
	}
	cred, err := userCredential(c.user)
	if err != nil {
		return usageError(stderr, "exec: %v", err)
	}
	path, err := exec.LookPath(c.argv[0])
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-agent: exec: %v\n", err)
		return ExitNotStarted
	}
	// no_new_privs, the bounding set and capset are per thread: all of it
	// and the execve happen on this one.
	runtime.LockOSThread()
	if err := harden(c, cred); err != nil {
		fmt.Fprintf(stderr, "sandbox-agent: exec: %v\n", err)
		return ExitNotStarted
	}
	err = syscall.Exec(path, c.argv, os.Environ())
	fmt.Fprintf(stderr, "sandbox-agent: exec %s: %v\n", c.argv[0], err)
	if errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.ENOEXEC) {
		return 126
	}
	return ExitNotStarted
}

// Kernel interface constants not in package syscall.
const (
	prSetNoNewPrivs      = 38
	prCapAmbient         = 47
	prCapAmbientClearAll = 4
	linuxCapabilityV3    = 0x20080522
)

// harden applies c to the calling thread (and the user to all threads), in
// the only order that works: drop from the bounding set while CAP_SETPCAP is
// held, switch the user while CAP_SETUID/SETGID are, then trim what is left.
func harden(c execConfig, cred *syscall.Credential) error {
	if c.noNewPrivs {
		if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
			return fmt.Errorf("set no_new_privs: %w", e)
		}
	}
	if c.hasCaps {
		for capNum := uintptr(0); capNum < 64; capNum++ {
			if c.caps&(1<<capNum) != 0 {
				continue
			}
			_, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, syscall.PR_CAPBSET_DROP, capNum, 0, 0, 0, 0)
			if e == syscall.EINVAL {
				break // past the last capability this kernel knows
			}
			if e != 0 {
				return fmt.Errorf("drop capability %d from the bounding set: %w", capNum, e)
			}
		}
		// Ambient capabilities would survive the execve: clear them (old
		// kernels without them answer EINVAL, which is fine).
		_, _, _ = syscall.RawSyscall6(syscall.SYS_PRCTL, prCapAmbient, prCapAmbientClearAll, 0, 0, 0, 0)
	}
	if cred != nil {
		if err := syscall.Setgroups(nil); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := syscall.Setgid(int(cred.Gid)); err != nil {
			return fmt.Errorf("setgid %d: %w", cred.Gid, err)
		}
		if err := syscall.Setuid(int(cred.Uid)); err != nil {
			return fmt.Errorf("setuid %d: %w", cred.Uid, err)
		}
	}
	if c.hasCaps {
		if err := trimCaps(c.caps); err != nil {
			return err
		}
	}
	if c.seccomp {
		// Last: the filter may refuse what the steps above need.
		prog, err := seccomp.Program(c.caps)
		if err != nil {
			return err
		}
		return seccomp.Install(prog)
	}
	return nil
}

// trimCaps keeps only mask in this thread's effective, permitted and
// inheritable sets.
func trimCaps(mask uint64) error {
	hdr := struct {
		version uint32
		pid     int32
	}{linuxCapabilityV3, 0}
	var data [2]struct{ effective, permitted, inheritable uint32 }
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPGET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capget: %w", e)
	}
	for i := range data {
		m := uint32(mask >> (32 * i))
		data[i].effective &= m
		data[i].permitted &= m
		data[i].inheritable &= m
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); e != 0 {
		return fmt.Errorf("capset: %w", e)
	}
	return nil
}
