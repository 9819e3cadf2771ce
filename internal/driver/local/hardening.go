package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/seccomp"
)

// What a bwrap sandbox gets besides its namespaces: the default seccomp
// filter and a session keyring of its own.

// seccompProgram is the default filter of a sandbox with these security
// settings; none when it is privileged (as on Docker) or on an
// architecture without a filter (the docs say which).
func seccompProgram(sec driver.Security) ([]seccomp.Instruction, error) {
	if sec.Privileged {
		return nil, nil
	}
	prog, err := seccomp.Program(seccomp.CapMask(keptCaps(sec)))
	if errors.Is(err, seccomp.ErrUnsupportedArch) {
		return nil, nil
	}
	return prog, err
}

// seccompFile is the read end of a pipe holding the sandbox's filter, for
// bwrap --seccomp; nil when the sandbox has none.
func seccompFile(sec driver.Security) (*os.File, error) {
	prog, err := seccompProgram(sec)
	if err != nil || prog == nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	// A few hundred bytes: the pipe holds them all before bwrap reads.
	if _, err := w.Write(seccomp.Bytes(prog)); err != nil {
		r.Close()
		return nil, fmt.Errorf("pass the seccomp filter to bwrap: %w", err)
	}
	return r, nil
}

// seccompArgs asks bwrap to install the filter it reads from fdFilter.
func seccompArgs(sec driver.Security) []string {
	if prog, err := seccompProgram(sec); err != nil || prog == nil {
		return nil
	}
	return []string{"--seccomp", strconv.Itoa(fdFilter)}
}

// startInNewKeyring starts cmd with an anonymous session keyring of its
// own, so a sandbox never inherits the provider's (often root's) keys nor
// another sandbox's. The session keyring belongs to a thread's credentials:
// the starting thread joins a new keyring, forks cmd, then joins yet another
// one that nothing else holds, and goes back to the scheduler. It must not
// exit instead: children forked from it earlier (terraform-exec sets
// Pdeathsig, and it fires when the forking thread ends) would be killed.
func startInNewKeyring(cmd *exec.Cmd) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := joinNewSessionKeyring(); err != nil {
		return err
	}
	err := cmd.Start()
	_ = joinNewSessionKeyring() // on failure the thread keeps the sandbox's keyring: every start joins a new one first anyway
	return err
}

// joinNewSessionKeyring gives the calling thread a new anonymous session
// keyring (a NULL name; a name would join a shared one). Kernels without
// keyrings have nothing to inherit.
func joinNewSessionKeyring() error {
	_, _, e := unix.RawSyscall(unix.SYS_KEYCTL, unix.KEYCTL_JOIN_SESSION_KEYRING, 0, 0)
	if e != 0 && e != unix.ENOSYS {
		return fmt.Errorf("create a session keyring for the sandbox: %w", e)
	}
	return nil
}
