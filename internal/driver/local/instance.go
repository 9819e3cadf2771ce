package local

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/names"
)

// CreateInstance makes the instance directory, stages its files and starts
// it when spec.Running. On error everything it made is removed again.
func (d *Driver) CreateInstance(ctx context.Context, spec driver.InstanceSpec) (inst driver.Instance, err error) {
	if spec.Name == "" {
		spec.Name = "sbx-" + randomHex(4)
	}
	st, err := d.newState(spec)
	if err != nil {
		return driver.Instance{}, d.errf("instance %q: %w", spec.Name, err)
	}
	dir := d.instanceDir(spec.Name)
	if err := os.MkdirAll(filepath.Dir(dir), 0o711); err != nil {
		return driver.Instance{}, d.errf("instance %q: %w", spec.Name, err)
	}
	// mkdir is the name's claim: it fails if another create got there first.
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, os.ErrExist) {
			return driver.Instance{}, d.errf("instance %q: %w", spec.Name, driver.ErrAlreadyExists)
		}
		return driver.Instance{}, d.errf("instance %q: %w", spec.Name, err)
	}
	defer func() {
		if err != nil {
			st.kill()
			_ = removeCgroups(st.Cgroups)
			_ = os.RemoveAll(dir)
		}
	}()
	if err := d.protectInstanceDir(st); err != nil {
		return driver.Instance{}, d.errf("instance %q: %w", spec.Name, err)
	}
	if err := d.makeInstanceDirs(st); err != nil {
		return driver.Instance{}, d.errf("instance %q: %w", spec.Name, err)
	}
	if err := d.stageFiles(st, spec.Files); err != nil {
		return driver.Instance{}, d.errf("instance %q: files: %w", spec.Name, err)
	}
	if spec.Running {
		if err := d.launch(ctx, st); err != nil {
			return driver.Instance{}, d.errf("instance %q: start: %w", spec.Name, err)
		}
	}
	if err := d.writeState(st); err != nil {
		return driver.Instance{}, d.errf("instance %q: %w", spec.Name, err)
	}
	return d.toInstance(st), nil
}

// newState checks what the spec asks against what this host can do and
// resolves the image and user.
func (d *Driver) newState(spec driver.InstanceSpec) (*instanceState, error) {
	if err := d.checkSpec(&spec); err != nil {
		return nil, err
	}
	id, lower, err := d.resolveImage(spec.Image)
	if err != nil {
		return nil, err
	}
	etc := "/etc"
	if lower != "" {
		etc = filepath.Join(lower, "etc")
	}
	uid, gid, err := resolveUser(spec.User, etc)
	if err != nil {
		return nil, err
	}
	if (uid != 0 || gid != 0) && os.Geteuid() != 0 {
		return nil, fmt.Errorf("user %q: only a provider running as root can start a sandbox as another user: %w", spec.User, driver.ErrUnsupported)
	}
	now := time.Now().UTC()
	st := &instanceState{Isolation: d.isolation, ImageID: id, Lower: lower, UID: uid, GID: gid, CreatedAt: now}
	if spec.Lifetime > 0 {
		st.ExpiresAt = now.Add(spec.Lifetime)
	}
	st.Labels = driver.ObjectLabels(d.backend, d.cfg.Labels, spec.Labels)
	st.Labels[driver.LabelName] = spec.Name
	if !st.ExpiresAt.IsZero() {
		st.Labels[driver.LabelExpiresAt] = st.ExpiresAt.Format(time.RFC3339)
	}
	spec.Files = nil // applied once, never kept in state
	st.Spec = spec
	return st, nil
}

// checkSpec rejects what this backend cannot do, with the reason.
func (d *Driver) checkSpec(s *driver.InstanceSpec) error {
	if err := names.ValidateName(s.Name); err != nil {
		return err
	}
	if s.Type == "" {
		s.Type = driver.TypeContainer
	}
	if s.Type != driver.TypeContainer {
		return fmt.Errorf("type %q: the local backend runs containers only: %w", s.Type, driver.ErrUnsupported)
	}
	if s.Network == "" {
		// Ports are reached only on the host network; otherwise stay private.
		s.Network = driver.NetworkIsolated
		if d.isolation == driver.IsolationNone || len(s.Ports) > 0 {
			s.Network = driver.NetworkBridge
		}
	}
	switch {
	case s.Network != driver.NetworkNone && s.Network != driver.NetworkIsolated && s.Network != driver.NetworkBridge:
		return fmt.Errorf("network %q is not one of none, isolated, bridge", s.Network)
	case d.isolation == driver.IsolationNone && s.Network != driver.NetworkBridge:
		return fmt.Errorf("network %q needs isolation \"bwrap\"; without isolation the sandbox shares the host network (\"bridge\"): %w", s.Network, driver.ErrUnsupported)
	case len(s.Ports) > 0 && s.Network != driver.NetworkBridge:
		return fmt.Errorf("ports need network \"bridge\": a %q local sandbox has its own network namespace that the host cannot reach: %w", s.Network, driver.ErrUnsupported)
	case s.DiskBytes > 0:
		return fmt.Errorf("disk: the local backend cannot limit disk use: %w", driver.ErrUnsupported)
	case d.isolation == driver.IsolationNone && s.Image != "" && s.Image != HostImage:
		return fmt.Errorf("image %q: isolation \"none\" runs on the host's file system; use image %q or isolation \"bwrap\": %w", s.Image, HostImage, driver.ErrUnsupported)
	}
	// Without pids_limit a sandbox gets driver.DefaultPidsLimit where this
	// host can enforce it (cgroups as root); elsewhere none, as before.
	s.PidsLimit = driver.EffectivePidsLimit(s.PidsLimit, s.Type, d.canLimit("pids"))
	if err := d.checkLimits(limitsOf(*s)); err != nil {
		return err
	}
	if err := d.checkMounts(*s); err != nil {
		return err
	}
	if err := checkEnv(s.Env); err != nil {
		return err
	}
	return checkPorts(s.Ports)
}

// checkEnv refuses the wrapper's own variables (driver.ReservedEnvPrefix).
func checkEnv(env map[string]string) error {
	for k := range env {
		if strings.HasPrefix(k, driver.ReservedEnvPrefix) {
			return fmt.Errorf("env %q: names starting with %s are reserved for the local backend's own wrapper; rename the variable: %w", k, driver.ReservedEnvPrefix, driver.ErrInvalid)
		}
	}
	return nil
}

// checkLimits fails for a limit this host cannot enforce rather than
// silently ignoring it.
func (d *Driver) checkLimits(l driver.Limits) error {
	need := map[string]bool{"cpu": l.CPUs > 0, "memory": l.MemoryBytes > 0, "pids": l.PidsLimit > 0}
	for _, ctrl := range wantedControllers {
		if need[ctrl] && (d.cg == nil || !d.cg.has(ctrl)) {
			return fmt.Errorf("%s: %w", limitAttribute[ctrl], d.limitUnavailable(ctrl))
		}
	}
	if l.PidsLimit > 0 && l.PidsLimit < minPidsLimit {
		return fmt.Errorf("pids_limit: %d is too low: it counts the sandbox's init, which runs about %d threads, bwrap and every exec; use at least %d", l.PidsLimit, agent.InitThreads, minPidsLimit)
	}
	return nil
}

// canLimit reports whether this host gives the sandboxes the cgroup
// controller ctrl ("pids", "memory", "cpu").
func (d *Driver) canLimit(ctrl string) bool {
	return d.cg != nil && d.cg.has(ctrl)
}

// minPidsLimit leaves room beside init (about agent.InitThreads) and bwrap
// for the command and an exec, which briefly takes a few more threads (the
// agent's exec, as runc's init does for a Docker exec).
const minPidsLimit = 24

// limitAttribute names the sandbox_instance attribute each controller enforces.
var limitAttribute = map[string]string{"cpu": "cpus", "memory": "memory", "pids": "pids_limit"}

// limitUnavailable says why a controller cannot be used here (an
// ErrUnsupported), as far as this process can tell.
func (d *Driver) limitUnavailable(ctrl string) error {
	why := "this host does not let the provider use the " + ctrl + " cgroup controller"
	if os.Geteuid() != 0 {
		why = "the provider does not run as root, and only root can create the cgroups that enforce it"
	}
	return fmt.Errorf("this limit cannot be enforced: %s; remove it, or run the provider as root on a host with cgroups: %w", why, driver.ErrUnsupported)
}

func (d *Driver) checkMounts(s driver.InstanceSpec) error {
	for _, m := range s.Mounts {
		if _, err := d.InspectVolume(context.Background(), m.Volume); err != nil {
			return err
		}
		if !filepath.IsAbs(m.Target) || filepath.Clean(m.Target) == "/" {
			return fmt.Errorf("volume %q: target %q must be an absolute path other than /", m.Volume, m.Target)
		}
		if d.isolation == driver.IsolationNone {
			if _, ok := relUnder(workdirOf(s), m.Target); !ok {
				return fmt.Errorf("volume %q: without isolation a volume can only appear under the workdir %s (as a symlink), not at %s: %w", m.Volume, workdirOf(s), m.Target, driver.ErrUnsupported)
			}
		}
	}
	return nil
}

// checkPorts fails early when a port is already taken on the host, which
// would otherwise surface only as a service that cannot bind.
func checkPorts(ports []driver.PortSpec) error {
	for _, p := range ports {
		if p.Port < 1 || p.Port > 65535 {
			return fmt.Errorf("port %q: %d is not a port number", p.Name, p.Port)
		}
		if p.Protocol == "udp" {
			continue
		}
		l, err := net.Listen("tcp", ":"+strconv.Itoa(p.Port))
		if err != nil {
			return fmt.Errorf("port %q: %d is already in use on the host", p.Name, p.Port)
		}
		l.Close()
	}
	return nil
}

// protectInstanceDir keeps every other host user out of the instance
// directory: it holds what the sandbox wrote (workspace, upper layer), where
// root in the sandbox can leave set-uid files and device nodes that must
// never be reachable from the host (bwrap mounts them nosuid and nodev only
// inside). bwrap and the overlay reach it as root. Without isolation a
// non-root instance user runs on the host and reaches its workspace by path:
// the directory then lets the instance's group traverse it.
func (d *Driver) protectInstanceDir(st *instanceState) error {
	dir := d.instanceDir(st.Spec.Name)
	if d.isolation == driver.IsolationNone && (st.UID != 0 || st.GID != 0) {
		if err := os.Chown(dir, 0, st.GID); err != nil {
			return err
		}
		return os.Chmod(dir, 0o710)
	}
	return os.Chmod(dir, 0o700)
}

// makeInstanceDirs lays out the instance directory.
func (d *Driver) makeInstanceDirs(st *instanceState) error {
	dir := d.instanceDir(st.Spec.Name)
	for _, sub := range []string{workspace, upperDir, overlayWork, mergedDir} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, lockFile), nil, 0o600); err != nil {
		return err
	}
	ws := filepath.Join(dir, workspace)
	if st.UID != 0 || st.GID != 0 {
		// The workspace belongs to the instance's user, who must write it.
		if err := os.Chown(ws, st.UID, st.GID); err != nil {
			return err
		}
	}
	if d.isolation == driver.IsolationNone {
		return d.linkVolumes(st)
	}
	return nil
}

// linkVolumes is the none-isolation stand-in for mounts: symlinks in the
// workspace (read_only cannot be enforced without a mount namespace).
func (d *Driver) linkVolumes(st *instanceState) error {
	ws := filepath.Join(d.instanceDir(st.Spec.Name), workspace)
	for _, m := range st.Spec.Mounts {
		rel, _ := relUnder(workdirOf(st.Spec), m.Target)
		link := filepath.Join(ws, rel)
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(d.volumeData(m.Volume), link); err != nil {
			return err
		}
	}
	return nil
}

// InspectInstance reads one instance, by ID or name.
func (d *Driver) InspectInstance(_ context.Context, id string) (driver.Instance, error) {
	st, err := d.readState(id)
	if err != nil {
		return driver.Instance{}, err
	}
	inst := d.toInstance(st)
	spec := st.Spec // state.json keeps the whole request but the files
	spec.Files = nil
	spec.Running = inst.Running()
	inst.Spec = &spec
	return inst, nil
}

// ListInstances reads every state file; liveness comes from /proc, so no
// process is started however many instances there are.
func (d *Driver) ListInstances(_ context.Context) ([]driver.Instance, error) {
	states, err := d.allStates()
	if err != nil {
		return nil, err
	}
	out := make([]driver.Instance, 0, len(states))
	for _, st := range states {
		out = append(out, d.toInstance(st))
	}
	return out, nil
}

func (d *Driver) allStates() ([]*instanceState, error) {
	entries, err := os.ReadDir(filepath.Join(d.root, "instances"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, d.errf("list instances: %w", err)
	}
	var out []*instanceState
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.IsDir() {
			continue
		}
		st, err := d.readState(e.Name())
		if driver.IsNotFound(err) {
			continue // being created or deleted
		}
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec.Name < out[j].Spec.Name })
	return out, nil
}

// status derives the instance's state from /proc and the recorded exit.
func (d *Driver) status(st *instanceState) string {
	if st.Pid != 0 && st.alive() {
		return driver.StatusRunning
	}
	if st.StartedAt.IsZero() {
		return driver.StatusCreated
	}
	code, ok := d.settledExit(st)
	if ok && code == agent.ExitExpired {
		return driver.StatusExpired
	}
	if !ok && !st.ExpiresAt.IsZero() && time.Now().After(st.ExpiresAt) {
		return driver.StatusExpired
	}
	return driver.StatusStopped
}

// settledExit is lastExit, allowing for the moment after the sandbox's PID 1
// has died and before bwrap (or the none-mode wrapper) has written the exit
// record: for a run started in the last few seconds it waits for the record
// a little, so a command that ends at once is not reported as stopped with
// no exit code (which would read as "stopped outside Terraform").
func (d *Driver) settledExit(st *instanceState) (int, bool) {
	dir := d.instanceDir(st.Spec.Name)
	if time.Since(st.StartedAt) > 10*time.Second {
		return lastExit(dir)
	}
	return awaitExit(dir)
}

// awaitExit is lastExit, waiting up to exitRecordDelay for a record that
// bwrap (or the none-mode wrapper) writes just after the sandbox's PID 1 is
// gone.
func awaitExit(dir string) (int, bool) {
	return waitExitRecord(dir, exitRecordDelay)
}

// waitExitRecord is lastExit, waiting up to bound for the record.
func waitExitRecord(dir string, bound time.Duration) (int, bool) {
	code, ok := lastExit(dir)
	for deadline := time.Now().Add(bound); !ok && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		code, ok = lastExit(dir)
	}
	return code, ok
}

// exitRecordDelay bounds the wait for a fresh exit record; stopRecordDelay
// the wait of a stop, which kills the recorder with the cgroups after it
// (on a loaded host the recorder may need a while to be scheduled).
const (
	exitRecordDelay = 300 * time.Millisecond
	stopRecordDelay = 3 * time.Second
)

func (d *Driver) toInstance(st *instanceState) driver.Instance {
	inst := driver.Instance{ID: d.instanceID(st.Spec.Name), Name: st.Spec.Name, EngineName: d.instanceDir(st.Spec.Name),
		Type: st.Spec.Type, Image: st.Spec.Image, Status: d.status(st), Labels: st.Labels, CreatedAt: st.CreatedAt, ExpiresAt: st.ExpiresAt}
	if inst.Status == driver.StatusStopped {
		if code, ok := d.settledExit(st); ok && driver.ExitedByItself(code) {
			inst.ExitCode = &code
		}
	}
	if st.Spec.Network == driver.NetworkBridge {
		inst.IPAddress = "127.0.0.1"
		inst.Endpoints = map[string]string{}
		for _, p := range st.Spec.Ports {
			inst.Endpoints[p.Name] = net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port))
		}
	}
	return inst
}

// StartInstance relaunches a stopped instance.
func (d *Driver) StartInstance(ctx context.Context, id string) error {
	return d.withState(id, func(st *instanceState) error {
		if st.alive() {
			return nil
		}
		if !st.ExpiresAt.IsZero() && time.Now().After(st.ExpiresAt) {
			return fmt.Errorf("its lifetime ended at %s; replace it to run again", st.ExpiresAt.Format(time.RFC3339))
		}
		return d.launch(ctx, st)
	})
}

// StopInstance TERMs the sandbox, KILLs it after grace and waits until it
// is gone.
func (d *Driver) StopInstance(_ context.Context, id string, grace time.Duration) error {
	return d.withState(id, func(st *instanceState) error {
		running := st.alive()
		if err := st.signal(syscall.SIGTERM); err != nil {
			return err
		}
		if waitDead(st, grace) {
			// bwrap (or the none wrapper) is in the cgroups too and records
			// the exit status just after PID 1 is gone: let it, then kill
			// the services that left the process tree.
			if running {
				waitExitRecord(d.instanceDir(st.Spec.Name), stopRecordDelay)
			}
			killCgroups(st.Cgroups)
			return nil
		}
		st.kill()
		if !waitDead(st, 5*time.Second) {
			return fmt.Errorf("process %d survived SIGKILL", st.Pid)
		}
		return nil
	})
}

// waitDead polls /proc until the tracked process is gone or timeout passes.
func waitDead(st *instanceState, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for st.alive() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// kill SIGKILLs the sandbox: its PID 1 (which takes the PID namespace with
// it) or the wrapper's process group, then whatever is left in its cgroups.
func (st *instanceState) kill() {
	if st.alive() {
		if st.Isolation == driver.IsolationNone && len(st.Cgroups) == 0 {
			// No cgroup to find them by: the command has its own process
			// group but is still in the wrapper's session.
			killSession(st.Pid)
		}
		if st.Isolation == driver.IsolationNone {
			_ = syscall.Kill(-st.Pid, syscall.SIGKILL) // setsid: pgid == pid
		}
		_ = st.signal(syscall.SIGKILL)
	}
	killCgroups(st.Cgroups)
}

// killSession SIGKILLs every process whose session is sid.
func killSession(sid int) {
	for _, pid := range sessionMembers(sid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// sessionMembers lists the processes whose session is sid, but sid itself.
func sessionMembers(sid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == sid {
			continue
		}
		if s, ok := procSession(pid); ok && s == sid {
			out = append(out, pid)
		}
	}
	return out
}

// UpdateInstance changes cgroup limits in place.
func (d *Driver) UpdateInstance(_ context.Context, id string, l driver.Limits) error {
	return d.withState(id, func(st *instanceState) error {
		l.PidsLimit = driver.EffectivePidsLimit(l.PidsLimit, st.Spec.Type, d.canLimit("pids"))
		if err := d.checkLimits(l); err != nil {
			return err
		}
		st.Spec.CPUs, st.Spec.MemoryBytes, st.Spec.PidsLimit = l.CPUs, l.MemoryBytes, l.PidsLimit
		if len(st.Cgroups) == 0 {
			return nil // applied at the next start
		}
		return setLimits(st.Cgroups, l)
	})
}

// withState runs fn under the instance lock and saves the state it leaves.
func (d *Driver) withState(id string, fn func(*instanceState) error) error {
	st, unlock, err := d.lockedState(id)
	if err != nil {
		return err
	}
	defer unlock()
	ferr := fn(st)
	if err := d.writeState(st); err != nil {
		return d.errf("instance %q: %w", id, err)
	}
	if ferr != nil {
		return d.errf("instance %q: %w", id, ferr)
	}
	return nil
}

// DeleteInstance kills the sandbox and removes its directory and cgroups.
// An instance that is already gone is not an error.
func (d *Driver) DeleteInstance(_ context.Context, id string) error {
	st, unlock, err := d.lockedState(id)
	if driver.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unlock()
	id = st.Spec.Name
	st.kill()
	if err := removeCgroups(st.Cgroups); err != nil {
		return d.errf("instance %q: %w", id, err)
	}
	// Rename first: the name is free at once and a failed removal leaves a
	// hidden directory, not a broken instance.
	trash := filepath.Join(d.root, "instances", ".delete-"+id+"-"+randomHex(4))
	if err := os.Rename(d.instanceDir(id), trash); err != nil {
		return d.errf("instance %q: %w", id, err)
	}
	if err := os.RemoveAll(trash); err != nil {
		return d.errf("instance %q: remove %s: %w", id, trash, err)
	}
	return nil
}

// instanceID is "<backend>.<name>.<hash of the backend directory>":
// unique across backends and roots, and also the instance's cgroup name.
func (d *Driver) instanceID(name string) string {
	return fmt.Sprintf("%s.%s.%s", d.backend, name, shortHash(d.root))
}

// nameOf accepts an instance ID of this backend or a bare name.
func (d *Driver) nameOf(id string) (string, bool) {
	name := id
	if parts := strings.Split(id, "."); len(parts) > 1 {
		if len(parts) != 3 || d.instanceID(parts[1]) != id {
			return "", false
		}
		name = parts[1]
	}
	return name, names.ValidateName(name) == nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:4])
}

// relUnder returns p relative to dir when p is dir or below it.
func relUnder(dir, p string) (string, bool) {
	dir, p = filepath.Clean("/"+dir), filepath.Clean("/"+p)
	if p == dir {
		return ".", true
	}
	if dir == "/" {
		return strings.TrimPrefix(p, "/"), true
	}
	if strings.HasPrefix(p, dir+"/") {
		return strings.TrimPrefix(p, dir+"/"), true
	}
	return "", false
}
