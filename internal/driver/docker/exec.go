package docker

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// Exec runs a command in a running instance. Detached commands go through
// the agent's service subcommand, which starts them in their own session
// with output appended to spec.LogPath and returns at once.
func (d *Driver) Exec(ctx context.Context, id string, spec driver.ExecSpec) (driver.ExecResult, error) {
	if len(spec.Command) == 0 {
		return driver.ExecResult{}, fmt.Errorf("docker backend %q: exec in %q: empty command", d.backend, id)
	}
	if !spec.Detach {
		res, err := d.execAttached(ctx, id, spec)
		if err == nil && spec.Workdir != "" && missingWorkdir(res) && d.makeDir(ctx, id, spec.Workdir) == nil {
			return d.execAttached(ctx, id, spec)
		}
		return res, err
	}
	logPath := spec.LogPath
	if logPath == "" {
		logPath = "/tmp/sandbox-service.log"
	}
	svc := spec
	svc.Detach = false
	svc.Command = agent.ServiceCommand(logPath, logPath+".pid", spec.Workdir, spec.Command)
	res, err := d.execAttached(ctx, id, svc)
	if err != nil || !agentMissing(res) {
		return res, err
	}
	// Instances made without the agent: let the engine detach the process;
	// its output is lost.
	return d.execDetached(ctx, id, spec)
}

// agentMissing recognises the runtime's answer when the agent is not in
// the instance (126/127 with "no such file" from the exec).
func agentMissing(res driver.ExecResult) bool {
	if res.ExitCode != 126 && res.ExitCode != 127 {
		return false
	}
	out := string(res.Stdout) + string(res.Stderr)
	return strings.Contains(out, agent.PathInInstance) && strings.Contains(strings.ToLower(out), "no such file")
}

// missingWorkdir recognises the runtime's refusal to chdir into a
// directory the image lacks (exit 126 on Docker, 127 on Podman).
func missingWorkdir(res driver.ExecResult) bool {
	return (res.ExitCode == 126 || res.ExitCode == 127) && strings.Contains(string(res.Stdout)+string(res.Stderr), "chdir to cwd")
}

// makeDir creates a missing exec working directory, as the engine does for
// the container's own working directory.
func (d *Driver) makeDir(ctx context.Context, id, dir string) error {
	cli, err := d.api()
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := tarDirEntry(&buf, dir); err != nil {
		return err
	}
	return cli.CopyToContainer(ctx, id, "/", &buf, container.CopyToContainerOptions{})
}

func (d *Driver) execOptions(spec driver.ExecSpec) container.ExecOptions {
	return container.ExecOptions{
		Cmd:          spec.Command,
		Env:          envList(spec.Env),
		WorkingDir:   spec.Workdir,
		User:         spec.User,
		AttachStdin:  len(spec.Stdin) > 0,
		AttachStdout: !spec.Detach,
		AttachStderr: !spec.Detach,
	}
}

// execAttached runs the command to completion, demultiplexing stdout and
// stderr, and reads its exit code.
func (d *Driver) execAttached(ctx context.Context, id string, spec driver.ExecSpec) (driver.ExecResult, error) {
	cli, err := d.api()
	if err != nil {
		return driver.ExecResult{}, err
	}
	created, err := cli.ContainerExecCreate(ctx, id, d.execOptions(spec))
	if err != nil {
		return driver.ExecResult{}, d.wrap(err, "exec in instance %q", id)
	}
	hj, err := cli.ContainerExecAttach(ctx, created.ID, container.ExecAttachOptions{})
	if err != nil {
		return driver.ExecResult{}, d.wrap(err, "exec in instance %q: attach", id)
	}
	defer hj.Close()
	if len(spec.Stdin) > 0 {
		// Written concurrently so a command that writes before reading
		// cannot deadlock against a full pipe.
		go func() {
			_, _ = hj.Conn.Write(spec.Stdin)
			_ = hj.CloseWrite()
		}()
	}
	stdout, stderr := spec.Output(), spec.Output()
	done := make(chan error, 1)
	go func() {
		_, err := stdcopy.StdCopy(stdout, stderr, hj.Reader)
		done <- err
	}()
	select {
	case err = <-done:
	case <-ctx.Done():
		hj.Close()
		return driver.ExecResult{}, fmt.Errorf("docker backend %q: exec in instance %q: %w", d.backend, id, ctx.Err())
	}
	if err != nil {
		return driver.ExecResult{}, d.wrap(err, "exec in instance %q: read output", id)
	}
	ins, err := cli.ContainerExecInspect(ctx, created.ID)
	if err != nil {
		return driver.ExecResult{}, d.wrap(err, "exec in instance %q: exit code", id)
	}
	return driver.Collected(ins.ExitCode, stdout, stderr), nil
}

func (d *Driver) execDetached(ctx context.Context, id string, spec driver.ExecSpec) (driver.ExecResult, error) {
	cli, err := d.api()
	if err != nil {
		return driver.ExecResult{}, err
	}
	opts := d.execOptions(spec)
	opts.AttachStdin = false
	created, err := cli.ContainerExecCreate(ctx, id, opts)
	if err != nil {
		return driver.ExecResult{}, d.wrap(err, "exec in instance %q", id)
	}
	err = cli.ContainerExecStart(ctx, created.ID, container.ExecStartOptions{Detach: true})
	return driver.ExecResult{}, d.wrap(err, "exec in instance %q: start detached", id)
}

// CopyFiles writes files into the instance (created, running or stopped),
// creating missing parent directories.
func (d *Driver) CopyFiles(ctx context.Context, id string, files []driver.File) error {
	if len(files) == 0 {
		return nil
	}
	cli, err := d.api()
	if err != nil {
		return err
	}
	buf, err := tarInstanceFiles(files)
	if err != nil {
		return fmt.Errorf("docker backend %q: copy files to %q: %w", d.backend, id, err)
	}
	err = cli.CopyToContainer(ctx, id, "/", buf, container.CopyToContainerOptions{})
	return d.wrap(err, "copy files to instance %q", id)
}

// probeDiskLimit asks the engine whether a per-container size limit works,
// by creating (never starting) a throwaway container with one. Only storage
// drivers that can have such an option are probed: on ext4 overlay2 there
// is nothing to ask.
func (d *Driver) probeDiskLimit(ctx context.Context, ei *engineInfo) bool {
	candidate := ei.storageDrv == "btrfs" || ei.storageDrv == "zfs" ||
		((ei.storageDrv == "overlay2" || ei.storageDrv == "overlay") && ei.backingFS == "xfs") // overlay: Podman's name
	if !candidate {
		return false
	}
	if err := d.ensureSeedImage(ctx); err != nil {
		return false
	}
	cli, err := d.api()
	if err != nil {
		return false
	}
	c, err := cli.ContainerCreate(ctx,
		&container.Config{Image: seedImage, Cmd: []string{"/.sandbox-seed"}, Labels: driver.ScopeLabels(d.backend)},
		&container.HostConfig{NetworkMode: "none", StorageOpt: map[string]string{"size": "1G"}}, nil, nil, "")
	if err != nil {
		return false
	}
	_ = cli.ContainerRemove(context.WithoutCancel(ctx), c.ID, container.RemoveOptions{Force: true})
	return true
}
