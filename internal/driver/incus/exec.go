package incus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"
	"github.com/pkg/sftp"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// Exec runs a command in a running instance and collects its output. With
// Detach the agent's `service` starts it in its own session instead.
func (d *Driver) Exec(ctx context.Context, id string, spec driver.ExecSpec) (driver.ExecResult, error) {
	id, err := d.nameOf(id)
	if err != nil {
		return driver.ExecResult{}, err
	}
	if len(spec.Command) == 0 {
		return driver.ExecResult{}, fmt.Errorf("incus backend %q: exec in %q: empty command", d.backend, id)
	}
	c, err := d.client(ctx)
	if err != nil {
		return driver.ExecResult{}, err
	}
	if err := d.execDefaults(c, id, &spec); err != nil {
		return driver.ExecResult{}, err
	}
	if err := d.ensureWorkdir(c, id, spec.Workdir); err != nil {
		return driver.ExecResult{}, err
	}
	if d.remote && spec.Command[0] == agent.PathInInstance {
		// Remote instances get the agent on first use (initializers).
		if err := d.ensureAgent(ctx, c, id); err != nil {
			return driver.ExecResult{}, err
		}
	}
	if spec.Detach {
		if err := d.ensureAgent(ctx, c, id); err != nil {
			return driver.ExecResult{}, err
		}
		logPath := spec.LogPath
		if logPath == "" {
			logPath = "/tmp/sandbox-service.log" // as on the other backends
		}
		spec.Command = agent.ServiceCommand(logPath, logPath+".pid", spec.Workdir, spec.Command)
	}
	return d.run(ctx, c, id, spec)
}

// execDefaults fills user and workdir from the instance's settings.
func (d *Driver) execDefaults(c incus.InstanceServer, id string, spec *driver.ExecSpec) error {
	if spec.User != "" && spec.Workdir != "" {
		return nil
	}
	inst, _, err := c.GetInstance(id)
	if err != nil {
		return d.errf(err, "instance %q", id)
	}
	if spec.User == "" {
		spec.User = inst.Config[keyUser]
	}
	if spec.Workdir == "" {
		spec.Workdir = inst.Config[keyWorkdir]
	}
	return nil
}

// run executes spec.Command and waits for it and its complete output
// (streamExec: the operation ended and both streams reached their end).
func (d *Driver) run(ctx context.Context, c incus.InstanceServer, id string, spec driver.ExecSpec) (driver.ExecResult, error) {
	req := api.InstanceExecPost{Command: spec.Command, WaitForWS: true, Environment: spec.Env, Cwd: spec.Workdir}
	if spec.User != "" {
		uid, gid, err := parseUser(spec.User)
		if err != nil {
			return driver.ExecResult{}, d.errf(err, "exec in instance %q", id)
		}
		req.User, req.Group = uid, gid
	}
	stdout, stderr := spec.Output(), spec.Output()
	code, err := d.streamExec(ctx, c, id, req, spec.Stdin, stdout, stderr)
	if err != nil {
		if failed, ok := startFailure(err); ok {
			// The command could not start: a result, as a shell reports it,
			// not an error (and never "instance not found").
			_, _ = stderr.Write([]byte(err.Error() + "\n"))
			return driver.Collected(failed, stdout, stderr), nil
		}
		return driver.ExecResult{}, d.errf(err, "exec %q in instance %q", spec.Command, id)
	}
	return driver.Collected(code, stdout, stderr), nil
}

// startFailure maps Incus' "could not start the command" errors to the
// shell's exit codes: 127 not found, 126 not executable.
func startFailure(err error) (int, bool) {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "Command not found"):
		return 127, true
	case strings.Contains(msg, "Permission denied") && !strings.Contains(msg, "instance"):
		return 126, true
	}
	return 0, false
}

// ensureWorkdir creates an exec's working directory once per instance:
// Incus would otherwise run the command in / without a word.
func (d *Driver) ensureWorkdir(c incus.InstanceServer, id, dir string) error {
	key := id + "\x00" + dir
	if dir == "" || dir == "/" {
		return nil
	}
	if _, ok := d.workdirs.Load(key); ok {
		return nil
	}
	s, err := c.GetInstanceFileSFTP(id)
	if err != nil {
		return d.errf(err, "open file transfer to instance %q", id)
	}
	defer s.Close()
	if err := s.MkdirAll(dir); err != nil {
		return d.errf(err, "create the working directory %s in instance %q", dir, id)
	}
	d.workdirs.Store(key, true)
	return nil
}

// CopyFiles writes files into the instance (running or stopped container),
// creating parent directories.
func (d *Driver) CopyFiles(ctx context.Context, id string, files []driver.File) error {
	c, id, err := d.instanceClient(ctx, id)
	if err != nil {
		return err
	}
	return d.copyFiles(ctx, c, id, files)
}

func (d *Driver) copyFiles(ctx context.Context, c incus.InstanceServer, id string, files []driver.File) error {
	return d.putAll(ctx, c, id, nil, files)
}

// putAll creates dirs and writes files over one SFTP session.
func (d *Driver) putAll(ctx context.Context, c incus.InstanceServer, id string, dirs []string, files []driver.File) error {
	if len(dirs)+len(files) == 0 {
		return nil
	}
	s, err := c.GetInstanceFileSFTP(id)
	if err != nil {
		return d.errf(err, "open file transfer to instance %q", id)
	}
	defer s.Close()
	for _, dir := range dirs {
		if err := s.MkdirAll(dir); err != nil {
			return d.errf(err, "create directory %s in instance %q", dir, id)
		}
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := putFile(s, f); err != nil {
			return d.errf(err, "copy %s into instance %q", f.Path, id)
		}
	}
	return nil
}

// copyFilesWhenReady retries until a VM's guest agent answers.
func (d *Driver) copyFilesWhenReady(ctx context.Context, c incus.InstanceServer, id string, files []driver.File) error {
	if len(files) == 0 {
		return nil
	}
	delay := 250 * time.Millisecond
	for {
		err := d.copyFiles(ctx, c, id, files)
		if err == nil || !strings.Contains(err.Error(), "agent") {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (waiting for the VM's incus-agent: the image must include it)", err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// putFile writes one file with its mode, creating parent directories.
func putFile(s *sftp.Client, f driver.File) error {
	if !path.IsAbs(f.Path) {
		return fmt.Errorf("path %q is not absolute", f.Path)
	}
	content, err := fileContent(f)
	if err != nil {
		return err
	}
	defer content.Close()
	if err := s.MkdirAll(path.Dir(f.Path)); err != nil {
		return fmt.Errorf("create parent directories: %w", err)
	}
	w, err := s.OpenFile(f.Path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, content); err != nil {
		_ = w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	mode := f.Mode.Perm()
	if mode == 0 {
		mode = 0o644
	}
	return s.Chmod(f.Path, mode)
}

// fileContent opens the inline content or the local source file.
func fileContent(f driver.File) (io.ReadCloser, error) {
	if f.Source != "" {
		return os.Open(f.Source)
	}
	return io.NopCloser(bytes.NewReader(f.Content)), nil
}

// ensureAgent makes the agent binary available in a running instance,
// uploading it when it is not there yet (mounted or copied at create).
func (d *Driver) ensureAgent(ctx context.Context, c incus.InstanceServer, id string) error {
	if _, ok := d.agentIn.Load(id); ok {
		return nil
	}
	s, err := c.GetInstanceFileSFTP(id)
	if err != nil {
		return d.errf(err, "open file transfer to instance %q", id)
	}
	_, statErr := s.Stat(agent.PathInInstance)
	_ = s.Close()
	if statErr != nil {
		if err := d.uploadAgent(ctx, c, id); err != nil {
			return err
		}
	}
	d.agentIn.Store(id, true)
	return nil
}

// uploadAgent copies the agent binary into the instance.
func (d *Driver) uploadAgent(ctx context.Context, c incus.InstanceServer, id string) error {
	bin, err := agent.BinaryPath()
	if err != nil {
		return d.errf(err, "instance %q", id)
	}
	return d.copyFiles(ctx, c, id, []driver.File{{Path: agent.PathInInstance, Source: bin, Mode: 0o755}})
}

// startWatcher arranges the engine-side stop at the deadline of a VM: a
// detached agent, started through the guest agent, that powers it off at
// the deadline (watcherCommand). It runs after every start the driver makes,
// since a stop ends it; a VM restarted by other means runs on unwatched.
// Containers need none of this: the agent is PID 1 (command) or their
// start hook launches the watcher (lxc.go).
func (d *Driver) startWatcher(ctx context.Context, c incus.InstanceServer, spec driver.InstanceSpec, deadline time.Time) error {
	if deadline.IsZero() || spec.Type != driver.TypeVM {
		return nil
	}
	argv := watcherCommand(deadline)
	if err := d.ensureAgent(ctx, c, spec.Name); err != nil {
		return err
	}
	res, err := d.run(ctx, c, spec.Name, driver.ExecSpec{Command: argv})
	if err != nil {
		return err
	}
	if res.ExitCode != 0 {
		return d.errf(errors.New(strings.TrimSpace(string(res.Stderr))), "start the lifetime watcher in instance %q (exit %d)", spec.Name, res.ExitCode)
	}
	return nil
}
