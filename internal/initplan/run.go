package initplan

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/outcap"
)

// MaxOutput is how much of each output stream a Result keeps: the last
// 4 KiB, behind a "[... N bytes truncated]" line. Service log tails in
// errors are bounded the same way. The driver reads no more than that
// (ExecSpec.MaxOutput) and masks secrets before it cuts.
const MaxOutput = 4096

// File contents are masked like secrets when their length, without
// surrounding white space, is in this range: shorter ones would mask
// ordinary words of the output, longer ones are not secrets to print.
const (
	minMaskedFile = 8
	maxMaskedFile = 64 << 10
)

// Result is one command that ran (sandbox_initializer.results).
type Result struct {
	Description string
	Command     []string
	ExitCode    int
	Stdout      string
	Stderr      string
}

// Results is what Run reports; ReadyAt is zero when the plan has no service.
type Results struct {
	Steps   []Result
	ReadyAt time.Time
}

// Polling backoff of readiness probes; variables so tests can shorten them.
var (
	pollFirst = 250 * time.Millisecond
	pollMax   = 2 * time.Second
)

// tailTimeout bounds the exec that fetches a service log for an error.
const tailTimeout = 15 * time.Second

// Run executes the plan's steps in order through d. It stops at the first
// failure; the Results gathered so far are returned with the error. Secrets
// of the plan and the contents of its files are masked in both.
func Run(ctx context.Context, d driver.Driver, instanceID string, plan Plan) (Results, error) {
	r := newRunner(ctx, d, instanceID, plan)
	for i, st := range plan.Steps {
		if err := r.step(st); err != nil {
			return r.res, fmt.Errorf("initializer step %d of %d (%s): %w", i+1, len(plan.Steps), st.Description, r.maskErr(err))
		}
	}
	return r.res, nil
}

// RunDestroy runs the OnDestroy commands. Unlike Run it does not stop at a
// failure: every command gets its chance, and the errors are joined.
func RunDestroy(ctx context.Context, d driver.Driver, instanceID string, plan Plan) (Results, error) {
	r := newRunner(ctx, d, instanceID, plan)
	var errs []error
	for i, st := range plan.OnDestroy {
		if err := r.step(st); err != nil {
			errs = append(errs, fmt.Errorf("on_destroy[%d]: %w", i, r.maskErr(err)))
		}
	}
	return r.res, errors.Join(errs...)
}

type runner struct {
	ctx     context.Context
	d       driver.Driver
	id      string
	secrets []string
	res     Results
}

func newRunner(ctx context.Context, d driver.Driver, id string, plan Plan) *runner {
	return &runner{ctx: ctx, d: d, id: id, secrets: append(nonEmpty(plan.Secrets), fileSecrets(plan.Steps)...)}
}

// fileSecrets are the contents of the user's files (minMaskedFile to
// maxMaskedFile bytes), whole and without surrounding white space, as a
// command that prints a file or its value would show them.
func fileSecrets(steps []Step) []string {
	var out []string
	for _, st := range steps {
		if !st.UserFiles {
			continue
		}
		for _, f := range st.Files {
			content := f.Content
			if f.Source != "" {
				if fi, err := os.Stat(f.Source); err != nil || fi.Size() > maxMaskedFile+64 {
					continue
				}
				if content, _ = os.ReadFile(f.Source); content == nil {
					continue
				}
			}
			trimmed := strings.TrimSpace(string(content))
			if len(trimmed) < minMaskedFile || len(trimmed) > maxMaskedFile {
				continue
			}
			out = append(out, trimmed)
			if trimmed != string(content) {
				out = append(out, string(content))
			}
		}
	}
	return out
}

func (r *runner) step(st Step) error {
	switch st.Kind {
	case StepFiles:
		return r.d.CopyFiles(r.ctx, r.id, st.Files)
	case StepRun:
		return r.run(st)
	case StepService:
		if rs := r.asRoot(st); rs.User != st.User {
			n := len(r.res.Steps)
			if err := r.run(rs); err == nil {
				return nil
			}
			// Root cannot start it as the user here (no exec as root on an
			// unprivileged local backend, no CAP_SETUID in a sandbox with
			// its capabilities dropped): start it as the user, as before
			// (the driver made StateDir writable for the sandbox's user).
			r.res.Steps = r.res.Steps[:n]
		}
		return r.run(st)
	case StepWait:
		return r.wait(st)
	}
	return fmt.Errorf("unknown step kind %q", st.Kind)
}

// run executes a command and records it; a non-zero exit is an error.
func (r *runner) run(st Step) error {
	res, err := r.d.Exec(r.ctx, r.id, r.spec(st))
	if err != nil {
		return fmt.Errorf("exec %s: %w", quoteArgv(st.Command), err)
	}
	r.record(st, res)
	if res.ExitCode == 0 {
		return nil
	}
	what := "command " + quoteArgv(st.Command)
	if st.Kind == StepService && res.ExitCode == agent.ExitNotStarted {
		what = "service " + quoteArgv(serviceArgv(st.Command)) + " could not be started"
	}
	return fmt.Errorf("%s exited with status %d: %s", what, res.ExitCode, lastLine(res.Stderr, res.Stdout))
}

// asRoot turns a service step for a non-root user into one the agent runs
// as root with --user: the agent creates the log and pid file in StateDir
// (root's, and read-only for others on remote engines) before it drops to
// the user. The user (the step's, else the sandbox's) is resolved by the
// engine through one `agent id` exec as that user. Where that fails, or the
// user is root, or the engine cannot exec as root here (an unprivileged
// local backend), the step is unchanged.
func (r *runner) asRoot(st Step) Step {
	if st.User == RootUser || st.User == "root" {
		return st
	}
	res, err := r.d.Exec(r.ctx, r.id, r.bounded(driver.ExecSpec{Command: agent.IDCommand(), User: st.User}))
	if err != nil || res.ExitCode != 0 {
		return st
	}
	id := strings.TrimSpace(string(res.Stdout))
	if id == "0:0" || !strings.Contains(id, ":") {
		return st
	}
	argv := serviceArgv(st.Command)
	opts := st.Command[:len(st.Command)-len(argv)]
	if len(opts) == 0 || opts[len(opts)-1] != "--" {
		return st
	}
	out := st
	out.Command = append(append(append([]string{}, opts[:len(opts)-1]...), "--user", id, "--"), argv...)
	out.User = RootUser
	return out
}

func (r *runner) spec(st Step) driver.ExecSpec {
	return r.bounded(driver.ExecSpec{Command: st.Command, Env: st.Env, Workdir: st.Workdir, User: st.User})
}

// bounded asks the driver to keep MaxOutput bytes of each stream, masked.
func (r *runner) bounded(spec driver.ExecSpec) driver.ExecSpec {
	spec.MaxOutput, spec.Mask = MaxOutput, r.secrets
	return spec
}

func (r *runner) record(st Step, res driver.ExecResult) {
	cmd := make([]string, len(st.Command))
	for i, a := range st.Command {
		cmd[i] = r.mask(a)
	}
	r.res.Steps = append(r.res.Steps, Result{
		Description: st.Description,
		Command:     cmd,
		ExitCode:    res.ExitCode,
		Stdout:      Truncate(res.Stdout, res.StdoutOmitted),
		Stderr:      Truncate(res.Stderr, res.StderrOmitted),
	})
}

// wait polls the probe with backoff until it succeeds, the step's timeout
// passes or ctx ends.
func (r *runner) wait(st Step) error {
	if st.Timeout <= 0 {
		st.Timeout = DefaultServiceTimeout
	}
	ctx, cancel := context.WithTimeout(r.ctx, st.Timeout)
	defer cancel()
	delay := pollFirst
	last := "no probe completed"
	for {
		res, err := r.d.Exec(ctx, r.id, r.spec(st))
		switch {
		case err == nil && res.ExitCode == 0:
			r.res.ReadyAt = time.Now().UTC()
			return nil
		case err == nil:
			last = fmt.Sprintf("exit %d: %s", res.ExitCode, lastLine(res.Stderr, res.Stdout))
		case driver.IsNotFound(err):
			return fmt.Errorf("probe: %w", err)
		case ctx.Err() == nil:
			last = err.Error()
		}
		select {
		case <-ctx.Done():
			return r.notReady(st, last)
		case <-time.After(delay):
		}
		delay = min(delay*2, pollMax)
	}
}

// notReady explains a readiness timeout with the last probe failure, whether
// the service still runs, and the end of its log.
func (r *runner) notReady(st Step, last string) error {
	if err := r.ctx.Err(); err != nil {
		return fmt.Errorf("waiting for readiness: %w (last probe: %s)", err, last)
	}
	ctx, cancel := context.WithTimeout(context.Background(), tailTimeout)
	defer cancel()
	alive := "is still running"
	if st.PIDFile != "" {
		pid := agent.ProbeCommand(agent.Probe{Kind: agent.ProbePID, PIDFile: st.PIDFile})
		if res, err := r.d.Exec(ctx, r.id, r.bounded(driver.ExecSpec{Command: pid, User: st.User})); err == nil && res.ExitCode != 0 {
			alive = "has exited"
		}
	}
	return fmt.Errorf("service not ready after %s; last probe: %s; the service process %s; %s",
		st.Timeout, last, alive, r.logTail(ctx, st))
}

func (r *runner) logTail(ctx context.Context, st Step) string {
	if st.LogPath == "" {
		return "no service log"
	}
	res, err := r.d.Exec(ctx, r.id, r.bounded(driver.ExecSpec{Command: agent.TailCommand(MaxOutput, st.LogPath), User: st.User}))
	switch {
	case err != nil:
		return fmt.Sprintf("service log %s unavailable: %v", st.LogPath, err)
	case res.ExitCode != 0:
		return fmt.Sprintf("service log %s unavailable: %s", st.LogPath, lastLine(res.Stderr, res.Stdout))
	case len(res.Stdout) == 0:
		return fmt.Sprintf("service log %s is empty", st.LogPath)
	}
	return fmt.Sprintf("end of service log %s:\n%s", st.LogPath, Truncate(res.Stdout, res.StdoutOmitted))
}

// mask replaces every secret value with "(sensitive)" in a whole text
// (argv, errors); output is masked by the driver as it reads it.
func (r *runner) mask(s string) string {
	return outcap.Mask(s, r.secrets)
}

// maskedError keeps the cause for errors.Is while its text hides secrets.
type maskedError struct {
	msg string
	err error
}

func (e *maskedError) Error() string { return e.msg }
func (e *maskedError) Unwrap() error { return e.err }

func (r *runner) maskErr(err error) error {
	return &maskedError{msg: r.mask(err.Error()), err: err}
}

// Truncate keeps the last MaxOutput bytes of b, the end of a stream of
// which omitted bytes came before b, starting on a whole UTF-8 character,
// behind a line saying how much was cut.
func Truncate(b []byte, omitted int64) string {
	start := max(len(b)-MaxOutput, 0)
	if start == 0 && omitted == 0 {
		return string(b)
	}
	for start < len(b) && !utf8.RuneStart(b[start]) {
		start++
	}
	return fmt.Sprintf("[... %d bytes truncated]\n%s", omitted+int64(start), b[start:])
}

// lastLine is the last non-empty line of the first non-empty stream, for
// one-line error messages.
func lastLine(streams ...[]byte) string {
	for _, s := range streams {
		lines := strings.Split(strings.TrimSpace(string(s)), "\n")
		if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
			if len(l) > 512 {
				l = l[:512] + "..."
			}
			return l
		}
	}
	return "no output"
}

// serviceArgv recovers the user's command from the agent's service argv.
func serviceArgv(argv []string) []string {
	for i, a := range argv {
		if a == "--" {
			return argv[i+1:]
		}
	}
	return argv
}

func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = fmt.Sprintf("%q", a)
	}
	return "[" + strings.Join(q, " ") + "]"
}
