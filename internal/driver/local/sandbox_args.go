package local

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// agentStateDir is initplan.StateDir: where the agent keeps service logs
// and pid files inside a sandbox.
const agentStateDir = "/.sandbox/run"

// The command line of a bwrap sandbox: namespaces, root file system,
// mounts, capabilities and environment.

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
	a = append(a, seccompArgs(s.Security)...)
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
	// The agent's directory must be reachable, and its state directory
	// (service logs and pid files) writable, by the sandbox's user: a
	// service runs as that user. bwrap would make /.sandbox 0700.
	a = append(a, "--perms", "0755", "--dir", filepath.Dir(agent.PathInInstance),
		"--perms", "1777", "--dir", agentStateDir)
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
	a := []string{"--cap-drop", "ALL"}
	for _, c := range keptCaps(sec) {
		a = append(a, "--cap-add", c)
	}
	return a
}

// keptCaps is the sorted capability set root keeps in an unprivileged
// sandbox: Docker's default adjusted by CapAdd and CapDrop.
func keptCaps(sec driver.Security) []string {
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
	names := make([]string, 0, len(keep))
	for c := range keep {
		names = append(names, c)
	}
	sort.Strings(names)
	return names
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
