// Package initplan turns a sandbox_initializer's inputs into an ordered plan
// of steps and runs that plan through a driver. It is framework-free: the
// provider converts Terraform values into Input, shows Kind docs in the
// schema, and stores Results.
//
// Every plan has the same shape, whatever the kind:
//
//  1. copy the user's files in;
//  2. the kind's setup commands (run as root);
//  3. the user's commands, in order (a non-zero exit stops the plan);
//  4. start the service detached through the agent's `service` command;
//  5. poll its readiness probe through the agent's `probe` command until the
//     service timeout.
//
// OnDestroy commands are a separate list run by RunDestroy.
package initplan

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// Input is what the user wrote in a sandbox_initializer.
type Input struct {
	// Name tells initializers of one instance apart; it names the service's
	// log and pid files. Default "init".
	Name string
	// Kind is one of KindNames(); "" means custom.
	Kind string
	// Settings are kind-specific options; lists are written as
	// space- or comma-separated strings.
	Settings  map[string]string
	Files     []driver.File
	Commands  [][]string
	Env       map[string]string
	Service   *Service
	OnDestroy [][]string
}

// Service is a long-running process started detached, then probed.
type Service struct {
	Command []string
	Workdir string
	User    string
	Ready   Ready
	// Timeout bounds the wait for readiness; 0: the kind's default.
	Timeout time.Duration
}

// Ready says when a service is ready. At most one field is set; none means
// "its process is running".
type Ready struct {
	TCPPort int
	HTTP    *HTTPReady
	Command []string
}

// HTTPReady is a GET against 127.0.0.1 inside the instance.
type HTTPReady struct {
	Port   int
	Path   string
	Status int // 0: any 2xx or 3xx
}

func (r Ready) set() int {
	n := 0
	if r.TCPPort != 0 {
		n++
	}
	if r.HTTP != nil {
		n++
	}
	if len(r.Command) > 0 {
		n++
	}
	return n
}

// Step kinds.
const (
	StepFiles   = "files"   // CopyFiles
	StepRun     = "run"     // Exec; a non-zero exit fails the plan
	StepService = "service" // Exec of the agent's `service`
	StepWait    = "wait"    // Exec of Probe until it succeeds or Timeout
)

// Step is one action of a plan.
type Step struct {
	Kind        string
	Description string
	Files       []driver.File // StepFiles
	// UserFiles marks the StepFiles of the user's `files`, whose contents
	// are sensitive and masked in output (a kind's own files are not).
	UserFiles bool
	// Command is the argv run (StepRun, StepService: the agent argv) or the
	// probe (StepWait).
	Command []string
	Env     map[string]string
	Workdir string
	User    string
	// LogPath and PIDFile belong to StepService and the StepWait after it.
	LogPath string
	PIDFile string
	Timeout time.Duration // StepWait
}

// Plan is the ordered expansion of an Input.
type Plan struct {
	Kind      string
	Steps     []Step
	OnDestroy []Step
	// Secrets are values (passwords) masked in Results and errors.
	Secrets []string
}

// Defaults.
const (
	DefaultName           = "init"
	DefaultServiceTimeout = 60 * time.Second
	// StateDir holds service logs and pid files inside the instance.
	StateDir = "/.sandbox/run"
	// RootUser is the exec user of kind setup steps.
	RootUser = "0"
)

// Expand validates in and expands it into a plan.
func Expand(in Input) (Plan, error) {
	kind := in.Kind
	if kind == "" {
		kind = KindCustom
	}
	k, ok := LookupKind(kind)
	if !ok {
		return Plan{}, fmt.Errorf("kind: %q is not a known kind (want one of %s)", in.Kind, strings.Join(KindNames(), ", "))
	}
	settings, err := k.resolve(in.Settings)
	if err != nil {
		return Plan{}, err
	}
	if err := validateInput(in); err != nil {
		return Plan{}, err
	}
	r := k.expand(settings, in)
	return assemble(kind, in, r)
}

// recipe is what a kind adds to the user's input.
type recipe struct {
	setup   []Step            // run after the files, before the user's commands
	env     map[string]string // under the user's env
	workdir string            // of the user's commands and service, unless set
	service *Service          // default service, merged under the user's
	secrets []string          // setting values to mask
}

// assemble puts the kind's recipe and the user's input in the plan order.
func assemble(kind string, in Input, r recipe) (Plan, error) {
	p := Plan{Kind: kind, Secrets: nonEmpty(r.secrets)}
	env := mergeEnv(r.env, in.Env)
	if len(in.Files) > 0 {
		p.Steps = append(p.Steps, Step{Kind: StepFiles, Description: "copy files", Files: in.Files, UserFiles: true})
	}
	p.Steps = append(p.Steps, r.setup...)
	for _, c := range in.Commands {
		p.Steps = append(p.Steps, Step{Kind: StepRun, Description: "command", Command: c, Env: env, Workdir: r.workdir})
	}
	svc, err := mergeService(r.service, in.Service)
	if err != nil {
		return Plan{}, err
	}
	if svc != nil && svc.Workdir == "" {
		svc.Workdir = r.workdir
	}
	if svc != nil {
		p.Steps = append(p.Steps, serviceSteps(name(in), svc, env)...)
	}
	for _, c := range in.OnDestroy {
		p.OnDestroy = append(p.OnDestroy, Step{Kind: StepRun, Description: "on_destroy command", Command: c, Env: env, Workdir: r.workdir})
	}
	return p, nil
}

func name(in Input) string {
	if in.Name == "" {
		return DefaultName
	}
	return in.Name
}

// serviceSteps starts svc through the agent and waits for its probe.
func serviceSteps(n string, svc *Service, env map[string]string) []Step {
	logPath, pidFile := path.Join(StateDir, n+".log"), path.Join(StateDir, n+".pid")
	start := Step{
		Kind: StepService, Description: "start service",
		Command: agent.ServiceCommand(logPath, pidFile, svc.Workdir, svc.Command),
		Env:     env, User: svc.User, LogPath: logPath, PIDFile: pidFile,
	}
	wait := Step{
		Kind: StepWait, Description: "wait for service readiness",
		Command: probeCommand(svc.Ready, pidFile),
		User:    svc.User, LogPath: logPath, PIDFile: pidFile, Timeout: svc.Timeout,
	}
	if len(svc.Ready.Command) > 0 {
		wait.Env = env // a user's probe command sees the same env as the service
	}
	return []Step{start, wait}
}

// probeCommand is the argv of one readiness attempt.
func probeCommand(r Ready, pidFile string) []string {
	switch {
	case r.TCPPort != 0:
		return agent.ProbeCommand(agent.Probe{Kind: agent.ProbeTCP, Port: r.TCPPort})
	case r.HTTP != nil:
		return agent.ProbeCommand(agent.Probe{Kind: agent.ProbeHTTP, Port: r.HTTP.Port, Path: r.HTTP.Path, Status: r.HTTP.Status})
	case len(r.Command) > 0:
		return r.Command
	}
	return agent.ProbeCommand(agent.Probe{Kind: agent.ProbePID, PIDFile: pidFile})
}

// mergeService lays the user's service over the kind's default, field by
// field, so a user can change only the timeout or the probe of a recipe.
func mergeService(def, user *Service) (*Service, error) {
	if def == nil && user == nil {
		return nil, nil
	}
	out := Service{}
	if def != nil {
		out = *def
	}
	if user != nil {
		if len(user.Command) > 0 {
			out.Command = user.Command
		}
		if user.Workdir != "" {
			out.Workdir = user.Workdir
		}
		if user.User != "" {
			out.User = user.User
		}
		if user.Ready.set() > 0 {
			out.Ready = user.Ready
		}
		if user.Timeout > 0 {
			out.Timeout = user.Timeout
		}
	}
	if len(out.Command) == 0 {
		return nil, fmt.Errorf("service.command: required (kind has no default service)")
	}
	if out.Timeout == 0 {
		out.Timeout = DefaultServiceTimeout
	}
	return &out, nil
}

func nonEmpty(ss []string) []string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

func mergeEnv(base, over map[string]string) map[string]string {
	if len(base) == 0 && len(over) == 0 {
		return nil
	}
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// validateInput checks the user's own fields, naming the attribute at fault.
func validateInput(in Input) error {
	if in.Name != "" && (strings.ContainsAny(in.Name, "/ \t\n") || in.Name == "." || in.Name == "..") {
		return fmt.Errorf("name: %q must not contain slashes or spaces", in.Name)
	}
	for i, f := range in.Files {
		if !path.IsAbs(f.Path) {
			return fmt.Errorf("files[%d].path: %q must be absolute", i, f.Path)
		}
		if f.Mode&^fs.ModePerm != 0 {
			return fmt.Errorf("files[%d].mode: %o has bits other than permissions", i, f.Mode)
		}
	}
	if err := checkArgvs("commands", in.Commands); err != nil {
		return err
	}
	if err := checkArgvs("on_destroy", in.OnDestroy); err != nil {
		return err
	}
	if key := badEnvKey(in.Env); key != "" {
		return fmt.Errorf("env: %q is not a valid variable name", key)
	}
	if in.Service != nil {
		return validateService(in.Service)
	}
	return nil
}

func validateService(s *Service) error {
	r := s.Ready
	if r.set() > 1 {
		return fmt.Errorf("service.ready: set only one of tcp_port, http, command")
	}
	if r.TCPPort != 0 && !validPort(r.TCPPort) {
		return fmt.Errorf("service.ready.tcp_port: %d is not a port (1-65535)", r.TCPPort)
	}
	if r.HTTP != nil {
		if !validPort(r.HTTP.Port) {
			return fmt.Errorf("service.ready.http.port: %d is not a port (1-65535)", r.HTTP.Port)
		}
		if r.HTTP.Status != 0 && (r.HTTP.Status < 100 || r.HTTP.Status > 599) {
			return fmt.Errorf("service.ready.http.status: %d is not an HTTP status", r.HTTP.Status)
		}
	}
	if s.Timeout < 0 {
		return fmt.Errorf("service.timeout: must not be negative")
	}
	return nil
}

func checkArgvs(attr string, argvs [][]string) error {
	for i, c := range argvs {
		if len(c) == 0 || c[0] == "" {
			return fmt.Errorf("%s[%d]: a command needs at least a program name", attr, i)
		}
	}
	return nil
}

func validPort(p int) bool { return p >= 1 && p <= 65535 }

// badEnvKey returns the first key that a process environment cannot carry.
func badEnvKey(env map[string]string) string {
	for k := range env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return k
		}
	}
	return ""
}
