package local

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
	fdFilter = 6 // bwrap reads the seccomp program (--seccomp)
)

// launch starts the instance's process tree and records it in st.
func (d *Driver) launch(ctx context.Context, st *instanceState) error {
	dir := d.instanceDir(st.Spec.Name)
	if err := d.protectInstanceDir(st); err != nil { // at every start: older providers made them 0711
		return err
	}
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
		return d.launchNone(ctx, st, agentPath, logf)
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
func (d *Driver) launchNone(ctx context.Context, st *instanceState, agentPath string, logf *os.File) error {
	dir := d.instanceDir(st.Spec.Name)
	argv := agent.InitAsUser(agent.InitCommand(st.ExpiresAt, st.Spec.Command), st.UID, st.GID)
	argv[0] = agentPath
	cmd := d.wrapperCmd(noneScript, st, argv, logf)
	// The wrapper's own variables come last, so they win over the user's
	// (os/exec keeps the last of two); checkSpec refuses such names anyway.
	cmd.Env = append(d.instanceEnv(st), append(cmd.Env, "SBX_EXIT="+filepath.Join(dir, exitFile))...)
	cmd.Dir = filepath.Join(dir, workspace)
	if err := startInNewKeyring(cmd); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	go func() { _ = cmd.Wait() }() // reap it while this process lives
	if err := st.track(cmd.Process.Pid); err != nil {
		return err
	}
	if err := waitAgentReady(ctx, st, dir); err != nil {
		st.kill()
		return fmt.Errorf("%w%s", err, logTail(filepath.Join(dir, logFile)))
	}
	return nil
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
	filter, err := seccompFile(st.Spec.Security)
	if err != nil {
		infoW.Close()
		status.Close()
		blockR.Close()
		return err
	}
	if filter != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, filter)
		defer filter.Close()
	}
	err = startInNewKeyring(cmd)
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
	if err := waitAgentReady(ctx, st, dir); err != nil {
		st.kill()
		return fmt.Errorf("%w%s", err, logTail(filepath.Join(dir, logFile)))
	}
	return nil
}

// agentReadyTimeout bounds the wait for the sandbox's init to set itself up.
const agentReadyTimeout = 30 * time.Second

// waitAgentReady waits until the sandbox's init names itself
// agent.ReadyName: it then has every thread it needs, and only after that
// does it start the command. Returning only then means neither the command
// nor an exec can use up the pids limit while init still grows (the Go
// runtime aborts when it cannot make a thread). With bwrap the tracked pid
// is init; without isolation init is the wrapper's child, in its session.
func waitAgentReady(ctx context.Context, st *instanceState, dir string) error {
	deadline := time.Now().Add(agentReadyTimeout)
	for wait := 500 * time.Microsecond; ; wait = min(2*wait, 10*time.Millisecond) {
		if agentReady(st) {
			return nil
		}
		if !st.alive() {
			if endedByItself(dir) {
				return nil // ready, ran the command and ended between two looks
			}
			return fmt.Errorf("the sandbox's init (%s) exited while starting%s", agent.PathInInstance, pidsHint(st.Spec))
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("the sandbox's init (%s) did not get ready within %s%s", agent.PathInInstance, agentReadyTimeout, pidsHint(st.Spec))
		}
		time.Sleep(wait)
	}
}

// endedByItself tells, once init is gone, whether it got as far as running
// the command, which then ended at once (`true`, a short script): a
// legitimate run, as on Docker. The command was checked before the release,
// so such an exit is not a failed start, unless init itself crashed (the Go
// runtime gets no thread under a tight pids limit and says so in the log).
func endedByItself(dir string) bool {
	code, ok := awaitExit(dir)
	if !ok || !driver.ExitedByItself(code) || code == agent.ExitNotStarted || code == 126 {
		return false
	}
	log := readTail(filepath.Join(dir, logFile), 64<<10)
	return !bytes.Contains(log, []byte("runtime: failed to create new OS thread")) && !bytes.Contains(log, []byte("fatal error: newosproc"))
}

func agentReady(st *instanceState) bool {
	if st.Isolation != driver.IsolationNone {
		return procComm(st.Pid) == agent.ReadyName
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == st.Pid {
			continue
		}
		if sid, ok := procSession(pid); ok && sid == st.Pid && procComm(pid) == agent.ReadyName {
			return true
		}
	}
	return false
}

func procComm(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return strings.TrimSpace(string(b))
}

// pidsHint explains a start that failed under a small pids_limit.
func pidsHint(s driver.InstanceSpec) string {
	if s.PidsLimit <= 0 {
		return ""
	}
	return fmt.Sprintf(" (pids_limit = %d counts the threads of init too, about %d)", s.PidsLimit, agent.InitThreads)
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
	for wait := 500 * time.Microsecond; ; wait = min(2*wait, 4*time.Millisecond) {
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
	b := readTail(path, 2000)
	if len(b) == 0 {
		return ""
	}
	return ": " + strings.TrimSpace(string(b))
}

// readTail reads at most the last n bytes of a file: the console log holds
// whatever the sandbox wrote, of any size.
func readTail(path string, n int64) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		if _, err := f.Seek(st.Size()-n, io.SeekStart); err != nil {
			return nil
		}
	}
	b, _ := io.ReadAll(io.LimitReader(f, n))
	return b
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
		return fmt.Errorf("command %q: no such executable file in the sandbox: %w", st.Spec.Command[0], driver.ErrInvalid)
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
	return fmt.Errorf("command %q: not found in the sandbox's PATH (%s): %w", name, search, driver.ErrInvalid)
}
