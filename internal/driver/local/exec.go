package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// Exec runs a command in a running instance. With bwrap it enters the
// namespaces of the sandbox's PID 1 (nsenter), so every exec shares one
// network, PID and mount namespace: a service started by one exec is
// reached by the next, as in a container.
func (d *Driver) Exec(ctx context.Context, id string, spec driver.ExecSpec) (driver.ExecResult, error) {
	st, err := d.readState(id)
	if err != nil {
		return driver.ExecResult{}, err
	}
	if !st.alive() {
		return driver.ExecResult{}, d.errf("instance %q is %s, not running; start it before running commands", id, d.status(st))
	}
	if len(spec.Command) == 0 {
		return driver.ExecResult{}, d.errf("instance %q: exec: empty command", id)
	}
	argv := spec.Command
	if spec.Detach {
		if argv, err = d.serviceArgv(st, spec); err != nil {
			return driver.ExecResult{}, d.errf("instance %q: %w", id, err)
		}
	}
	cmd, err := d.execCmd(ctx, st, spec, argv)
	if err != nil {
		return driver.ExecResult{}, d.errf("instance %q: exec: %w", id, err)
	}
	stdout, stderr := spec.Output(), spec.Output()
	cmd.Stdin = bytes.NewReader(spec.Stdin)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err = startInNewKeyring(cmd); err == nil {
		err = cmd.Wait()
	}
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	}
	res := driver.Collected(code, stdout, stderr)
	switch {
	case exitErr != nil:
		if ctx.Err() != nil {
			return res, d.errf("instance %q: exec %q: %w", id, spec.Command[0], ctx.Err())
		}
	case err != nil:
		return res, d.errf("instance %q: exec %q: %w", id, spec.Command[0], err)
	}
	if res.ExitCode == 2 && st.Spec.PidsLimit > 0 && bytes.Contains(res.Stderr, []byte("failed to create new OS thread")) {
		return res, d.errf("instance %q: exec %q: the sandbox's processes and threads have reached its pids_limit (%d)", id, spec.Command[0], st.Spec.PidsLimit)
	}
	return res, nil
}

// serviceArgv wraps the command in the agent's `service`, which detaches it.
// Its pid goes to LogPath + ".pid".
func (d *Driver) serviceArgv(st *instanceState, spec driver.ExecSpec) ([]string, error) {
	log := spec.LogPath
	base := "sandbox-service-" + strconv.FormatInt(time.Now().UnixNano(), 36) + ".log"
	if log == "" {
		log = "/tmp/" + base
	}
	wd := spec.Workdir
	argv := agent.ServiceCommand(log, log+".pid", wd, spec.Command)
	if d.isolation == driver.IsolationNone {
		// Paths under the workdir are the workspace; others are the host's
		// own, written by the service itself like any command would. The
		// default log stays in the instance directory, off the host's /tmp.
		hostLog, err := d.hostPath(st, log)
		switch {
		case spec.LogPath == "":
			hostLog = filepath.Join(d.instanceDir(st.Spec.Name), base)
		case err != nil:
			hostLog = log
		}
		if wd != "" {
			if hwd, err := d.hostPath(st, wd); err == nil {
				wd = hwd
			}
		}
		agentPath, err := d.agentBinary()
		if err != nil {
			return nil, err
		}
		argv = agent.ServiceCommand(hostLog, hostLog+".pid", wd, spec.Command)
		argv[0] = agentPath
	}
	return argv, nil
}

// execCmd builds the process of one exec: it joins the instance's cgroups
// first, then nsenter (bwrap) or the plain command (none).
func (d *Driver) execCmd(ctx context.Context, st *instanceState, spec driver.ExecSpec, argv []string) (*exec.Cmd, error) {
	uid, gid, err := d.execUser(st, spec.User)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, kv := range d.instanceEnv(st) {
		k, v, _ := cutEnv(kv)
		env[k] = v
	}
	for k, v := range spec.Env {
		env[k] = v
	}
	wd := spec.Workdir
	if !path.IsAbs(wd) {
		wd = path.Join(workdirOf(st.Spec), wd) // "" and relative: from the instance's workdir
	}
	var full []string
	// A session of its own, without a controlling terminal: nothing run in
	// the sandbox can open the provider's terminal (/dev/tty) to push input
	// into it (TIOCSTI). Its process group is its pid, for Cancel.
	sys := &syscall.SysProcAttr{Setsid: true}
	dir := "/" // nsenter re-opens its working directory after entering the mount namespace

	if d.isolation == driver.IsolationNone {
		// The workdir is the workspace; any other directory is the host's own.
		if dir, err = d.hostPath(st, wd); err != nil {
			dir = wd
		}
		full = argv
		if uid != 0 || gid != 0 {
			// The agent drops to the user after the shell, still root, has
			// joined the instance's cgroups.
			agentPath, err := d.agentBinary()
			if err != nil {
				return nil, err
			}
			full = agent.ExecCommand(agent.Hardening{User: strconv.Itoa(uid) + ":" + strconv.Itoa(gid)}, argv)
			full[0] = agentPath
		}
	} else {
		h, err := hardeningOf(st.Pid)
		if err != nil {
			return nil, err
		}
		if uid != 0 || gid != 0 {
			h.User = strconv.Itoa(uid) + ":" + strconv.Itoa(gid)
		}
		full = []string{d.nsenter, "--target", strconv.Itoa(st.Pid), "--mount", "--uts", "--ipc", "--net", "--pid", "--root", "--wdns=" + wd}
		if os.Geteuid() != 0 {
			// Unprivileged bwrap made a user namespace: enter it as ourselves.
			full = append(full, "--user", "--preserve-credentials")
		}
		// nsenter keeps our privileges: the agent gives the command those of
		// the sandbox's PID 1 (and its user) before it runs.
		full = append(append(full, "--"), agent.ExecCommand(h, argv)...)
	}
	if len(st.Cgroups) > 0 {
		full = append([]string{d.shell, "-c", joinCgroups + `unset SBX_CGROUPS; exec "$@"`, "sh"}, full...)
		env["SBX_CGROUPS"] = procsFiles(st.Cgroups)
	}
	cmd := exec.CommandContext(ctx, full[0], full[1:]...)
	cmd.Env = envList(env)
	cmd.Dir = dir
	cmd.SysProcAttr = sys
	// On cancel kill the whole group: nsenter's child is in it too.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A process that keeps our pipes open (a badly detached service) must not hang us.
	cmd.WaitDelay = 2 * time.Second
	return cmd, nil
}

// hardeningOf reads what the sandbox's PID 1 is held to (bwrap set it up):
// no_new_privs, the capabilities it may hold (its permitted set within its
// bounding set) and whether it runs under the seccomp filter. An exec gets
// the same.
func hardeningOf(pid int) (agent.Hardening, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return agent.Hardening{}, fmt.Errorf("read the sandbox's privileges: %w", err)
	}
	var h agent.Hardening
	caps := map[string]uint64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		v = strings.TrimSpace(v)
		switch k {
		case "NoNewPrivs":
			h.NoNewPrivs = v == "1"
		case "Seccomp":
			h.Seccomp = v == "2" // SECCOMP_MODE_FILTER: bwrap installed the default filter
		case "CapPrm", "CapBnd":
			if n, err := strconv.ParseUint(v, 16, 64); err == nil {
				caps[k] = n
			}
		}
	}
	if len(caps) != 2 {
		return h, fmt.Errorf("read the sandbox's privileges: no CapPrm and CapBnd in /proc/%d/status", pid)
	}
	h.Caps = strconv.FormatUint(caps["CapPrm"]&caps["CapBnd"], 16)
	return h, nil
}

// execUser resolves an exec's user; the default is the instance's.
func (d *Driver) execUser(st *instanceState, spec string) (int, int, error) {
	if spec == "" {
		return st.UID, st.GID, nil
	}
	if os.Geteuid() != 0 {
		return 0, 0, fmt.Errorf("user %q: only root can run commands as another user: %w", spec, driver.ErrUnsupported)
	}
	etc := "/etc"
	if st.Lower != "" {
		etc = filepath.Join(st.Lower, "etc")
	}
	return resolveUser(spec, etc)
}

func cutEnv(kv string) (string, string, bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, "", false
}

// hostPath maps a path of a none-isolation sandbox to the host: the workdir
// is the workspace directory and volumes appear under it. Anything else
// would be the host's own file system, which the driver does not write.
func (d *Driver) hostPath(st *instanceState, p string) (string, error) {
	ws := filepath.Join(d.instanceDir(st.Spec.Name), workspace)
	if !filepath.IsAbs(p) {
		return filepath.Join(ws, filepath.Clean("/"+p)), nil
	}
	if rel, ok := relUnder(workdirOf(st.Spec), p); ok {
		return filepath.Join(ws, rel), nil
	}
	return "", fmt.Errorf("without isolation only paths under the workdir %s (the sandbox's own directory) can be used, not %s: %w", workdirOf(st.Spec), p, driver.ErrUnsupported)
}

// CopyFiles writes files into an instance: straight into a running
// sandbox's file system, or staged for its next start when it is stopped.
func (d *Driver) CopyFiles(_ context.Context, id string, files []driver.File) error {
	if len(files) == 0 {
		return nil
	}
	st, unlock, err := d.lockedState(id)
	if err != nil {
		return err
	}
	defer unlock()
	if err := d.stageFiles(st, files); err != nil {
		return d.errf("instance %q: files: %w", id, err)
	}
	return nil
}

// stageFiles writes files now when they can reach their place (a running
// bwrap sandbox, or the workspace without isolation) and otherwise keeps them
// in pending/ until the next start.
func (d *Driver) stageFiles(st *instanceState, files []driver.File) error {
	for _, f := range files {
		content, err := fileContent(f)
		if err != nil {
			return err
		}
		mode := f.Mode
		if mode == 0 {
			mode = 0o644
		}
		switch {
		case d.isolation == driver.IsolationNone:
			err = d.writeNone(st, f.Path, content, mode)
		case st.Pid != 0 && st.alive():
			uid, gid := st.fileOwner()
			err = writeFileInRoot(procRoot(st.Pid), f.Path, bytes.NewReader(content), mode, uid, gid)
		default:
			err = d.addPending(st, f.Path, content, mode)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	return nil
}

func procRoot(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/root" }

func fileContent(f driver.File) ([]byte, error) {
	if f.Source == "" {
		return f.Content, nil
	}
	b, err := os.ReadFile(f.Source)
	if err != nil {
		return nil, fmt.Errorf("%s: read source: %w", f.Path, err)
	}
	return b, nil
}

// writeNone writes a file of a none-isolation sandbox into its workspace
// (or a volume linked there).
func (d *Driver) writeNone(st *instanceState, p string, content []byte, mode os.FileMode) error {
	hp, err := d.hostPath(st, p)
	if err != nil {
		return err
	}
	ws := filepath.Join(d.instanceDir(st.Spec.Name), workspace)
	rel, _ := relUnder(ws, hp)
	root := ws
	// A volume target is a symlink to the volume: resolve inside the volume.
	for _, m := range st.Spec.Mounts {
		mrel, _ := relUnder(workdirOf(st.Spec), m.Target)
		if r, ok := relUnder(mrel, rel); ok {
			root, rel = d.volumeData(m.Volume), r
		}
	}
	uid, gid := st.fileOwner()
	return writeFileInRoot(root, rel, bytes.NewReader(content), mode, uid, gid)
}

// fileOwner is who owns the files written for the instance: its user, so
// the command can change them (-1: leave them root's).
func (st *instanceState) fileOwner() (int, int) {
	if st.UID == 0 && st.GID == 0 {
		return -1, -1
	}
	return st.UID, st.GID
}
