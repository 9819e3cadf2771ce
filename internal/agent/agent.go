// Package agent is the small helper that runs INSIDE sandboxes: PID 1 (init),
// detached services, readiness probes and log tails. It is pure Go with the
// standard library only, so a CGO_ENABLED=0 build is one static file that
// works in a scratch image with no libc and no shell.
//
// The same code is reached two ways: as `terraform-provider-sandbox agent ...`
// (the provider binary mounted or uploaded into the sandbox) and as the
// stand-alone `sandbox-agent` built from cmd/sandbox-agent.
//
// Drivers never spell argv by hand: InitCommand, ServiceCommand,
// ProbeCommand and TailCommand build it, so the format lives here only.
package agent

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

const (
	// PathInInstance is where drivers make the agent binary available.
	PathInInstance = "/.sandbox/sandbox-agent"
	// ExitExpired is init's exit status when the sandbox's lifetime ran out.
	ExitExpired = 124
	// ExitNotStarted is the status when the command could not be started
	// (not found, not executable, bad workdir), as shells do.
	ExitNotStarted = 127
	// ExitUsage is the status for bad arguments.
	ExitUsage = 2
	// ExitCannotSwitch: `service --user` ran as root without CAP_SETUID /
	// CAP_SETGID (a sandbox whose capabilities are dropped). It made the
	// state directory writable for everyone (sticky, as /tmp) and started
	// nothing: the caller starts the service as the user instead.
	ExitCannotSwitch = 3
	// ExitNotReady is probe's status when the target is not (yet) ready.
	ExitNotReady = 1

	// BinaryName is the base name under which the binary acts as the agent.
	BinaryName = "sandbox-agent"
	// SubCommand is the provider binary's first argument that selects the agent.
	SubCommand = "agent"

	// InitThreads is about how many OS threads init runs with. A sandbox's
	// pids limit counts them along with the command's processes.
	InitThreads = 10

	// ReadyName is init's process name (/proc/PID/comm) once it is fully set
	// up (threads_linux.go): from then on it creates no thread, and a fork
	// bomb that uses up the sandbox's pids limit cannot make it crash. Drivers
	// wait for it before they report a sandbox started; they build on every
	// platform, so it is defined here.
	ReadyName = "sandbox-init"
)

// Invoked reports whether a process started with args (os.Args) should run
// the agent rather than the provider.
func Invoked(args []string) bool {
	if len(args) == 0 {
		return false
	}
	if filepath.Base(args[0]) == BinaryName {
		return true
	}
	return len(args) > 1 && args[1] == SubCommand
}

// Main runs the agent with the full argument vector (os.Args: program name
// first, then an optional "agent", then the subcommand) and returns the exit
// status.
func Main(args []string) int {
	return run(subArgs(args), os.Stdout, os.Stderr)
}

// subArgs strips the program name and the optional "agent" word.
func subArgs(args []string) []string {
	if len(args) > 0 {
		args = args[1:]
	}
	if len(args) > 0 && args[0] == SubCommand {
		args = args[1:]
	}
	return args
}

const usage = `usage:
  sandbox-agent init [--deadline RFC3339] [--grace 10s] [--argv-file PATH | -- CMD ARGS...]
  sandbox-agent poweroff --at RFC3339
  sandbox-agent service --log PATH --pidfile PATH [--workdir DIR] [--user UID[:GID]] -- CMD ARGS...
  sandbox-agent exec [--no-new-privs] [--caps HEX] [--user UID[:GID]] -- CMD ARGS...
  sandbox-agent probe tcp PORT | probe http PORT PATH [STATUS] | probe pid PIDFILE
  sandbox-agent tail --bytes N PATH
  sandbox-agent version
  sandbox-agent id
`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return ExitUsage
	}
	rest := args[1:]
	switch args[0] {
	case "init":
		return runInit(rest, stderr)
	case "service":
		return runService(rest, stderr)
	case "poweroff":
		return runPoweroff(rest, stdout, stderr)
	case "exec":
		return runExec(rest, stderr)
	case "probe":
		return runProbe(rest, stderr)
	case "tail":
		return runTail(rest, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, VersionMagic)
		return 0
	case "id":
		// The caller's uid:gid: an exec as a named user asks the engine to
		// resolve the name, then starts a service as root with --user.
		fmt.Fprintf(stdout, "%d:%d\n", os.Getuid(), os.Getgid())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "sandbox-agent: unknown command %q\n%s", args[0], usage)
	return ExitUsage
}

// usageError prints a message and returns ExitUsage.
func usageError(stderr io.Writer, format string, a ...any) int {
	fmt.Fprintf(stderr, "sandbox-agent: "+format+"\n", a...)
	return ExitUsage
}
