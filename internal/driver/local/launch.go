package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// joinCgroups is the start of every launch script: the shell moves itself
// into the instance's cgroups before it execs anything, so no process of the
// sandbox ever runs outside them.
const joinCgroups = `for f in $SBX_CGROUPS; do echo $$ > "$f" || exit 125; done
`

// bwrapScript mounts the instance's overlay rootfs in a private mount
// namespace (it exists only for the sandbox and vanishes with it) and execs
// bwrap.
const bwrapScript = joinCgroups + `if [ -n "$SBX_OVERLAY" ]; then
  exec unshare --mount --propagation private /bin/sh -c 'mount -t overlay overlay -o "$SBX_OVERLAY" "$SBX_MERGED" || exit 125; exec "$@"' sh "$@"
fi
exec "$@"
`

// noneScript runs the agent as a child, forwards stop signals to it and
// records its exit status, which nothing else would (the provider may be
// gone by then).
const noneScript = joinCgroups + `exitf=$SBX_EXIT; unset SBX_EXIT SBX_CGROUPS
"$@" &
child=$!
trap 'kill -TERM $child 2>/dev/null' TERM INT HUP
while :; do
  wait $child; rc=$?
  kill -0 $child 2>/dev/null || break
done
printf '{"exit-code": %d}\n' $rc > "$exitf"
`

// Fds passed to bwrap (ExtraFiles start at 3).
const (
	fdInfo   = 3 // bwrap writes {"child-pid": N} once the sandbox is set up
	fdStatus = 4 // bwrap appends {"exit-code": N} when the sandbox ends
	fdBlock  = 5 // bwrap waits for one byte before it runs the agent
)

// launch starts the instance's process tree and records it in st.
func (d *Driver) launch(ctx context.Context, st *instanceState) error {
	dir := d.instanceDir(st.Spec.Name)
	if err := d.prepareCgroups(st); err != nil {
		return err
	}
	agentPath, err := d.agentBinary()
	if err != nil {
		return err
	}
	logf, err := os.OpenFile(filepath.Join(dir, logFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	if err := os.Remove(filepath.Join(dir, exitFile)); err != nil && !os.IsNotExist(err) {
		return err
	}
	if d.isolation == driver.IsolationNone {
		return d.launchNone(st, agentPath, logf)
	}
	return d.launchBwrap(ctx, st, agentPath, logf)
}

// prepareCgroups creates the instance's cgroups (again after a reboot,
// which empties cgroupfs) and applies the limits.
func (d *Driver) prepareCgroups(st *instanceState) error {
	if d.cg == nil {
		return nil
	}
	dirs, err := d.cg.create(d.instanceID(st.Spec.Name))
	st.Cgroups = dirs
	if err != nil {
		return err
	}
	return setLimits(st.Cgroups, limitsOf(st.Spec))
}

func limitsOf(s driver.InstanceSpec) driver.Limits {
	return driver.Limits{CPUs: s.CPUs, MemoryBytes: s.MemoryBytes, PidsLimit: s.PidsLimit}
}

func procsFiles(dirs []string) string {
	var files []string
	for _, d := range dirs {
		files = append(files, filepath.Join(d, "cgroup.procs"))
	}
	return strings.Join(files, " ")
}

// wrapperCmd is a detached /bin/sh running script with argv as "$@".
func (d *Driver) wrapperCmd(script string, st *instanceState, argv []string, logf *os.File) *exec.Cmd {
	cmd := exec.Command(d.shell, append([]string{"-c", script, "sh"}, argv...)...)
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SBX_CGROUPS=" + procsFiles(st.Cgroups)}
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: no terminal signal or provider exit reaches it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	return cmd
}

// launchNone runs the agent as a plain process in the workspace.
func (d *Driver) launchNone(st *instanceState, agentPath string, logf *os.File) error {
	dir := d.instanceDir(st.Spec.Name)
	argv := agent.InitAsUser(agent.InitCommand(st.ExpiresAt, st.Spec.Command), st.UID, st.GID)
	argv[0] = agentPath
	cmd := d.wrapperCmd(noneScript, st, argv, logf)
	cmd.Env = append(cmd.Env, "SBX_EXIT="+filepath.Join(dir, exitFile))
	cmd.Env = append(cmd.Env, d.instanceEnv(st)...)
	cmd.Dir = filepath.Join(dir, workspace)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reap it while this process lives
	return st.track(cmd.Process.Pid)
}

// track records pid and its start time as the instance's process.
func (st *instanceState) track(pid int) error {
	start, ok := procStart(pid)
	if !ok {
		return fmt.Errorf("the sandbox process %d exited at once", pid)
	}
	st.Pid, st.PidStart, st.StartedAt = pid, start, time.Now().UTC()
	return nil
}

// launchBwrap starts bwrap, waits until the sandbox is set up (bwrap reports
// its child's pid), writes pending files through /proc/<pid>/root and only
// then lets the command run.
func (d *Driver) launchBwrap(ctx context.Context, st *instanceState, agentPath string, logf *os.File) error {
	dir := d.instanceDir(st.Spec.Name)
	infoR, infoW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer infoR.Close()
	blockR, blockW, err := os.Pipe()
	if err != nil {
		infoW.Close()
		return err
	}
	defer blockW.Close()
	status, err := os.OpenFile(filepath.Join(dir, exitFile), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		infoW.Close()
		blockR.Close()
		return err
	}
	if err := d.writeEtcFiles(st); err != nil {
		return err
	}
	argv := append([]string{d.bwrap}, d.bwrapArgs(st, agentPath)...)
	argv = append(argv, "--")
	argv = append(argv, agent.InitAsUser(agent.InitCommand(st.ExpiresAt, st.Spec.Command), st.UID, st.GID)...)
	cmd := d.wrapperCmd(bwrapScript, st, argv, logf)
	if d.overlay {
		cmd.Env = append(cmd.Env, "SBX_OVERLAY="+d.overlayOptions(st), "SBX_MERGED="+filepath.Join(dir, mergedDir))
	}
	cmd.ExtraFiles = []*os.File{infoW, status, blockR}
	err = cmd.Start()
	infoW.Close()
	status.Close()
	blockR.Close()
	if err != nil {
		return fmt.Errorf("start bwrap: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	pid, err := readChildPid(ctx, infoR)
	if err == nil {
		err = st.track(pid)
	}
	if err == nil {
		err = waitSetUp(ctx, st, agentPath)
	}
	if err == nil {
		err = d.applyPending(st)
	}
	if err == nil {
		err = d.checkCommand(st)
	}
	if err != nil {
		_ = cmd.Process.Kill()
		st.kill()
		return fmt.Errorf("%w%s", err, logTail(filepath.Join(dir, logFile)))
	}
	if _, err := blockW.Write([]byte{1}); err != nil {
		return fmt.Errorf("release the sandbox: %w", err)
	}
	return nil
}

// waitSetUp waits until bwrap's child has built the sandbox: bwrap reports
// the pid right after clone, before the mounts. The agent bind is set up
// late, and the child's root shows it only once it switched to the final
// root; the child then blocks on --block-fd until released.
func waitSetUp(ctx context.Context, st *instanceState, agentPath string) error {
	var want syscall.Stat_t
	if err := syscall.Stat(agentPath, &want); err != nil {
		return err
	}
	seen := filepath.Join(procRoot(st.Pid), agent.PathInInstance)
	deadline := time.Now().Add(30 * time.Second)
	for wait := time.Millisecond; ; wait = min(2*wait, 20*time.Millisecond) {
		var got syscall.Stat_t
		if syscall.Stat(seen, &got) == nil && got.Dev == want.Dev && got.Ino == want.Ino {
			return nil
		}
		if !st.alive() {
			return fmt.Errorf("bwrap exited while setting up the sandbox")
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("bwrap did not finish setting up the sandbox")
		}
		time.Sleep(wait)
	}
}

// readChildPid waits for bwrap's info document, or EOF when it failed.
func readChildPid(ctx context.Context, r *os.File) (int, error) {
	type result struct {
		pid int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		var info struct {
			ChildPid int `json:"child-pid"`
		}
		err := json.NewDecoder(r).Decode(&info)
		if err == nil && info.ChildPid <= 0 {
			err = fmt.Errorf("bwrap reported no child pid")
		}
		ch <- result{info.ChildPid, err}
	}()
	select {
	case res := <-ch:
		if res.err != nil {
			return 0, fmt.Errorf("bwrap could not set up the sandbox")
		}
		return res.pid, nil
	case <-ctx.Done():
		r.Close() // unblocks the decoder
		return 0, fmt.Errorf("waiting for bwrap: %w", ctx.Err())
	}
}

// logTail returns the end of the console log, to explain a failed start.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return ": " + strings.TrimSpace(string(b))
}

func (d *Driver) overlayOptions(st *instanceState) string {
	dir := d.instanceDir(st.Spec.Name)
	lower := st.Lower
	if lower == "" {
		lower = d.hostSkeleton()
	}
	return "lowerdir=" + lower + ",upperdir=" + filepath.Join(dir, upperDir) + ",workdir=" + filepath.Join(dir, overlayWork)
}

// bwrapArgs builds the namespaces, mounts, environment and credentials of
// an instance. Exec does not repeat them: it enters the namespaces of the
// running sandbox with nsenter.
func (d *Driver) bwrapArgs(st *instanceState, agentPath string) []string {
	s := st.Spec
	a := []string{"--info-fd", strconv.Itoa(fdInfo), "--json-status-fd", strconv.Itoa(fdStatus), "--block-fd", strconv.Itoa(fdBlock),
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--hostname", s.Name,
		"--new-session", "--as-pid-1", "--clearenv"}
	if s.Network != driver.NetworkBridge {
		a = append(a, "--unshare-net")
	}
	if os.Geteuid() != 0 {
		// Rootless: bwrap needs a user namespace. Being root in it (the
		// caller's uid outside) keeps it to one user namespace, which
		// nsenter can then enter with the others.
		a = append(a, "--unshare-user", "--uid", "0", "--gid", "0")
	}
	a = append(a, capabilityArgs(s.Security)...)
	a = append(a, d.rootArgs(st)...)
	a = append(a, "--proc", "/proc", "--dev", "/dev")
	if !d.overlay || s.Security.ReadOnlyRootfs {
		a = append(a, "--tmpfs", "/tmp")
	}
	a = append(a, d.etcBinds(st)...)
	wd := workdirOf(s)
	if wd != "/" {
		a = append(a, "--bind", filepath.Join(d.instanceDir(s.Name), workspace), wd)
	}
	for _, m := range s.Mounts {
		flag := "--bind"
		if m.ReadOnly {
			flag = "--ro-bind"
		}
		a = append(a, flag, d.volumeData(m.Volume), m.Target)
	}
	a = append(a, d.cgroupBinds(st)...)
	a = append(a, "--ro-bind", agentPath, agent.PathInInstance)
	if s.Security.ReadOnlyRootfs {
		// Last: bwrap must create its mount points first. Only / turns
		// read-only; the workspace, volumes and /tmp stay writable.
		a = append(a, "--remount-ro", "/")
	}
	for _, kv := range d.instanceEnv(st) {
		k, v, _ := strings.Cut(kv, "=")
		a = append(a, "--setenv", k, v)
	}
	return append(a, "--chdir", wd)
}

// etcBinds gives an image sandbox what Docker gives a container: its own
// /etc/hosts and /etc/hostname, and the host's resolver configuration when
// it shares the host network. The host image already shows the host's /etc;
// without the overlay, /etc is read-only and mount points cannot be made.
func (d *Driver) etcBinds(st *instanceState) []string {
	if !d.overlay || st.Lower == "" {
		return nil
	}
	dir := d.instanceDir(st.Spec.Name)
	a := []string{"--bind", filepath.Join(dir, "hosts"), "/etc/hosts", "--bind", filepath.Join(dir, "hostname"), "/etc/hostname"}
	if _, err := os.Stat("/etc/resolv.conf"); err == nil && st.Spec.Network == driver.NetworkBridge {
		a = append(a, "--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf")
	}
	return a
}

// writeEtcFiles creates the files etcBinds binds, once (the sandbox may
// change them).
func (d *Driver) writeEtcFiles(st *instanceState) error {
	dir := d.instanceDir(st.Spec.Name)
	files := map[string]string{
		"hosts":    "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t" + st.Spec.Name + "\n",
		"hostname": st.Spec.Name + "\n",
	}
	for name, content := range files {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if os.IsExist(err) {
			continue
		}
		if err != nil {
			return err
		}
		_, err = f.WriteString(content)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// rootArgs mounts the root file system: the overlay (writable, private to
// the instance) or, without overlayfs, the image's top-level entries bound
// read-only on bwrap's tmpfs root. The host image adds the host's system
// directories, read-only.
func (d *Driver) rootArgs(st *instanceState) []string {
	var a []string
	switch {
	case d.overlay:
		a = append(a, "--bind", filepath.Join(d.instanceDir(st.Spec.Name), mergedDir), "/")
	case st.Lower != "":
		a = append(a, topLevelBinds(st.Lower)...)
	}
	if st.Lower == "" {
		a = append(a, hostBinds(!d.overlay)...)
	}
	return a
}

// hostDirs are the host directories the host image shows, read-only.
var hostDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"}

// hostBinds binds the host's system directories; with withLinks, symlinks
// among them (merged /usr) are recreated too (the overlay's host skeleton
// already holds them).
func hostBinds(withLinks bool) []string {
	var a []string
	for _, p := range hostDirs {
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil && withLinks {
				a = append(a, "--symlink", target, p)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", p, p)
		}
	}
	return a
}

// topLevelBinds binds each top-level entry of a rootfs read-only.
func topLevelBinds(lower string) []string {
	entries, _ := os.ReadDir(lower)
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	var a []string
	for _, e := range entries {
		p := "/" + e.Name()
		if p == "/proc" || p == "/dev" || p == "/tmp" {
			continue
		}
		if e.Type()&os.ModeSymlink != 0 {
			if target, err := os.Readlink(filepath.Join(lower, e.Name())); err == nil {
				a = append(a, "--symlink", target, p)
			}
			continue
		}
		a = append(a, "--ro-bind", filepath.Join(lower, e.Name()), p)
	}
	return a
}

// hostSkeleton is the overlay lower directory of the host image: empty
// mount points plus the host's top-level symlinks (merged /usr).
func (d *Driver) hostSkeleton() string {
	dir := filepath.Join(d.imagesDir(), HostImage, "rootfs")
	_ = os.MkdirAll(dir, 0o755)
	for _, p := range hostDirs {
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		target := filepath.Join(dir, filepath.Base(p))
		if fi.Mode()&os.ModeSymlink != 0 {
			if link, err := os.Readlink(p); err == nil {
				_ = os.Symlink(link, target)
			}
			continue
		}
		_ = os.Mkdir(target, 0o755)
	}
	return dir
}

// dockerDefaultCaps is what root keeps in a sandbox without a user
// namespace: the set Docker gives containers, which users expect.
var dockerDefaultCaps = []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID", "CAP_KILL",
	"CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_NET_RAW", "CAP_SYS_CHROOT",
	"CAP_MKNOD", "CAP_AUDIT_WRITE", "CAP_SETFCAP"}

// capabilityArgs turns Security into bwrap --cap-drop/--cap-add.
func capabilityArgs(sec driver.Security) []string {
	if sec.Privileged {
		return nil
	}
	keep := map[string]bool{}
	for _, c := range dockerDefaultCaps {
		keep[c] = true
	}
	for _, c := range sec.CapDrop {
		if strings.EqualFold(c, "ALL") {
			keep = map[string]bool{}
		}
		delete(keep, capName(c))
	}
	for _, c := range sec.CapAdd {
		keep[capName(c)] = true
	}
	a := []string{"--cap-drop", "ALL"}
	names := make([]string, 0, len(keep))
	for c := range keep {
		names = append(names, c)
	}
	sort.Strings(names)
	for _, c := range names {
		a = append(a, "--cap-add", c)
	}
	return a
}

func capName(c string) string {
	c = strings.ToUpper(c)
	if !strings.HasPrefix(c, "CAP_") {
		c = "CAP_" + c
	}
	return c
}

// workdirOf is the instance's working directory, where the workspace is.
func workdirOf(s driver.InstanceSpec) string {
	if s.Workdir == "" {
		return "/workspace"
	}
	return filepath.Clean("/" + s.Workdir)
}

// instanceEnv is the environment of the command and of every exec.
func (d *Driver) instanceEnv(st *instanceState) []string {
	env := map[string]string{
		"PATH":     "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOSTNAME": st.Spec.Name,
		"HOME":     "/root",
	}
	if st.UID != 0 {
		env["HOME"] = workdirOf(st.Spec)
	}
	if d.isolation == driver.IsolationNone {
		env["HOME"] = filepath.Join(d.instanceDir(st.Spec.Name), workspace)
	}
	for k, v := range st.Spec.Env {
		env[k] = v
	}
	return envList(env)
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// cgroupBinds shows the instance its own cgroups, read-only, where tools
// look for limits (/sys/fs/cgroup/<controller> on v1, /sys/fs/cgroup on v2).
func (d *Driver) cgroupBinds(st *instanceState) []string {
	if d.cg == nil || len(st.Cgroups) == 0 {
		return nil
	}
	if d.cg.v2 {
		return []string{"--ro-bind", st.Cgroups[0], "/sys/fs/cgroup"}
	}
	var a []string
	id := d.instanceID(st.Spec.Name)
	for _, ctrl := range wantedControllers {
		if parent, ok := d.cg.parent[ctrl]; ok {
			a = append(a, "--ro-bind", filepath.Join(parent, id), "/sys/fs/cgroup/"+ctrl)
		}
	}
	return a
}

// checkCommand fails the start when the command does not exist in the
// sandbox, as `docker run` does, instead of an instance that stops at once.
// The sandbox is fully built (files included) but its command not started.
func (d *Driver) checkCommand(st *instanceState) error {
	if len(st.Spec.Command) == 0 {
		return nil
	}
	name := st.Spec.Command[0]
	root := procRoot(st.Pid)
	if strings.Contains(name, "/") {
		if !path.IsAbs(name) {
			name = path.Join(workdirOf(st.Spec), name)
		}
		if findInRoot(root, name) {
			return nil
		}
		return fmt.Errorf("command %q: no such executable file in the sandbox", st.Spec.Command[0])
	}
	search := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	if p, ok := st.Spec.Env["PATH"]; ok {
		search = p
	}
	for _, dir := range strings.Split(search, ":") {
		if dir != "" && findInRoot(root, path.Join(dir, name)) {
			return nil
		}
	}
	return fmt.Errorf("command %q: not found in the sandbox's PATH (%s)", name, search)
}
