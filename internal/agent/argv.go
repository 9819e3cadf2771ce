package agent

import (
	"strconv"
	"time"
)

// DeadlineLayout is how InitCommand writes --deadline: RFC 3339 with
// milliseconds, so short lifetimes are not rounded by a whole second.
const DeadlineLayout = "2006-01-02T15:04:05.000Z07:00"

// DefaultGrace is how long init waits between TERM and KILL.
const DefaultGrace = 10 * time.Second

// InitCommand is the argv that makes the agent PID 1 of an instance: it runs
// cmd (or waits forever when cmd is empty) and stops everything at deadline
// (none when zero).
func InitCommand(deadline time.Time, cmd []string) []string {
	return InitCommandGrace(deadline, 0, cmd)
}

// InitCommandGrace is InitCommand with an explicit TERM-to-KILL grace
// (0: DefaultGrace).
func InitCommandGrace(deadline time.Time, grace time.Duration, cmd []string) []string {
	argv := []string{PathInInstance, "init"}
	if !deadline.IsZero() {
		argv = append(argv, "--deadline", deadline.UTC().Format(DeadlineLayout))
	}
	if grace > 0 {
		argv = append(argv, "--grace", grace.String())
	}
	if len(cmd) > 0 {
		argv = append(argv, "--")
		argv = append(argv, cmd...)
	}
	return argv
}

// InitArgvFileCommand is InitCommandGrace with the command read from
// argvFile inside the instance (see ArgvFileContent), for commands whose
// arguments cannot be written on one space-separated line.
func InitArgvFileCommand(deadline time.Time, grace time.Duration, argvFile string) []string {
	argv := InitCommandGrace(deadline, grace, nil)
	return append(argv, "--argv-file", argvFile)
}

// ServiceCommand is the argv that starts cmd detached in its own session,
// appending its output to logPath and writing its pid to pidFile. workdir
// may be empty (the exec's working directory).
func ServiceCommand(logPath, pidFile, workdir string, cmd []string) []string {
	return ServiceCommandAs(logPath, pidFile, workdir, "", cmd)
}

// ServiceCommandAs is ServiceCommand for an agent run as root that starts
// cmd as user ("uid[:gid]"; "" keeps the agent's own user).
func ServiceCommandAs(logPath, pidFile, workdir, user string, cmd []string) []string {
	argv := []string{PathInInstance, "service", "--log", logPath, "--pidfile", pidFile}
	if user != "" {
		argv = append(argv, "--user", user)
	}
	if workdir != "" {
		argv = append(argv, "--workdir", workdir)
	}
	argv = append(argv, "--")
	return append(argv, cmd...)
}

// IDCommand prints the exec user's "uid:gid".
func IDCommand() []string { return []string{PathInInstance, "id"} }

// Probe kinds.
const (
	ProbeTCP  = "tcp"
	ProbeHTTP = "http"
	ProbePID  = "pid"
)

// Probe is one readiness check run inside the instance against 127.0.0.1.
type Probe struct {
	Kind    string // ProbeTCP | ProbeHTTP | ProbePID
	Port    int    // tcp, http
	Path    string // http; "" means "/"
	Status  int    // http; 0 accepts any 2xx or 3xx
	PIDFile string // pid
}

// ProbeCommand is the argv of one probe attempt: exit 0 ready, 1 not ready
// (reason on stderr).
func ProbeCommand(p Probe) []string {
	argv := []string{PathInInstance, "probe", p.Kind}
	switch p.Kind {
	case ProbeTCP:
		argv = append(argv, strconv.Itoa(p.Port))
	case ProbeHTTP:
		path := p.Path
		if path == "" {
			path = "/"
		}
		argv = append(argv, strconv.Itoa(p.Port), path)
		if p.Status != 0 {
			argv = append(argv, strconv.Itoa(p.Status))
		}
	case ProbePID:
		argv = append(argv, p.PIDFile)
	}
	return argv
}

// TailCommand is the argv that prints the last n bytes of path.
func TailCommand(n int, path string) []string {
	return []string{PathInInstance, "tail", "--bytes", strconv.Itoa(n), path}
}

// Hardening is what ExecCommand applies to a command entering a running
// sandbox from outside, so that it is held like the sandbox's own processes.
type Hardening struct {
	NoNewPrivs bool
	// Caps are the capabilities the command may hold at most, hexadecimal
	// as in /proc/PID/status: they become its bounding set, and its
	// effective, permitted and inheritable sets keep only them. "" leaves
	// capabilities alone.
	Caps string
	// User is a numeric "uid[:gid]" ("" keeps the caller's).
	User string
	// Seccomp installs the default seccomp filter (internal/seccomp) for
	// Caps, the one the sandbox's PID 1 runs under.
	Seccomp bool
}

// ExecCommand is the argv that applies h and then replaces itself with cmd
// (exit status and signals are cmd's; 127 when cmd cannot be started).
func ExecCommand(h Hardening, cmd []string) []string {
	argv := []string{PathInInstance, "exec"}
	if h.NoNewPrivs {
		argv = append(argv, "--no-new-privs")
	}
	if h.Caps != "" {
		argv = append(argv, "--caps", h.Caps)
	}
	if h.User != "" {
		argv = append(argv, "--user", h.User)
	}
	if h.Seccomp {
		argv = append(argv, "--seccomp")
	}
	argv = append(argv, "--")
	return append(argv, cmd...)
}

// VersionCommand asks the agent inside an instance to identify itself:
// whatever needs the agent there checks it with this before it starts.
func VersionCommand() []string { return []string{PathInInstance, "version"} }
