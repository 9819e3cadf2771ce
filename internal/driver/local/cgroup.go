package local

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// cgroupParent is the directory under which per-instance cgroups go, below
// the provider's own cgroup so that whatever limits the provider also
// contains its sandboxes.
const cgroupParent = "sandbox-local"

// cgroups is what this host lets us use: controller name -> parent directory.
// Both cgroup v1 (one hierarchy per controller) and a pure v2 hierarchy
// (all controllers share one directory) are handled.
type cgroups struct {
	v2     bool
	parent map[string]string // "pids", "memory", "cpu"
}

func (c *cgroups) has(ctrl string) bool { _, ok := c.parent[ctrl]; return ok }

var wantedControllers = []string{"pids", "memory", "cpu"}

// detectCgroups finds writable cgroup hierarchies; nil when there are none
// (not root, read-only cgroupfs, no controllers).
func detectCgroups() *cgroups {
	if os.Geteuid() != 0 {
		return nil
	}
	own := ownCgroups()
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return detectV2(own[""])
	}
	c := &cgroups{parent: map[string]string{}}
	for _, m := range cgroupMounts() {
		for _, ctrl := range wantedControllers {
			if !m.controllers[ctrl] || c.has(ctrl) {
				continue
			}
			base := filepath.Join(m.point, own[m.key])
			if syscall.Access(base, 2 /* W_OK */) == nil {
				c.parent[ctrl] = filepath.Join(base, cgroupParent)
			}
		}
	}
	if len(c.parent) == 0 {
		return nil
	}
	return c
}

// detectV2 uses <root>/sandbox-local of a pure v2 hierarchy when the root's
// controllers can be delegated to it.
func detectV2(own string) *cgroups {
	root := "/sys/fs/cgroup"
	avail, err := os.ReadFile(filepath.Join(root, "cgroup.controllers"))
	if err != nil || syscall.Access(root, 2) != nil {
		return nil
	}
	_ = own // v2 forbids processes in inner nodes: we cannot nest below our own cgroup
	c := &cgroups{v2: true, parent: map[string]string{}}
	for _, ctrl := range strings.Fields(string(avail)) {
		for _, w := range wantedControllers {
			if ctrl == w {
				c.parent[ctrl] = filepath.Join(root, cgroupParent)
			}
		}
	}
	if len(c.parent) == 0 {
		return nil
	}
	return c
}

type cgroupMount struct {
	point       string
	key         string // the controller list as /proc/self/cgroup names it
	controllers map[string]bool
}

// cgroupMounts lists the v1 hierarchies from /proc/self/mountinfo.
func cgroupMounts() []cgroupMount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := indexOf(fields, "-")
		if sep < 0 || len(fields) < sep+4 || fields[sep+1] != "cgroup" {
			continue
		}
		m := cgroupMount{point: fields[4], controllers: map[string]bool{}}
		var keys []string
		for _, opt := range strings.Split(fields[sep+3], ",") {
			for _, w := range wantedControllers {
				if opt == w {
					m.controllers[w] = true
				}
			}
			if opt == "cpu" || opt == "cpuacct" || opt == "memory" || opt == "pids" || strings.HasPrefix(opt, "name=") {
				keys = append(keys, opt)
			}
		}
		m.key = strings.Join(keys, ",")
		out = append(out, m)
	}
	return out
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// ownCgroups maps each hierarchy's controller list to our cgroup path in it.
func ownCgroups() map[string]string {
	out := map[string]string{}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return out
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) == 3 {
			out[parts[1]] = parts[2]
		}
	}
	return out
}

// create makes the instance's cgroups and returns their directories.
func (c *cgroups) create(id string) ([]string, error) {
	var dirs []string
	seen := map[string]bool{}
	for _, ctrl := range wantedControllers {
		parent, ok := c.parent[ctrl]
		if !ok || seen[parent] {
			continue
		}
		seen[parent] = true
		if err := c.ensureParent(parent); err != nil {
			return dirs, err
		}
		dir := filepath.Join(parent, id)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return dirs, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		dirs = append(dirs, dir)
	}
	return dirs, nil
}

// ensureParent creates the parent cgroup; on v2 it also delegates the
// controllers to it, which the v2 rules require before children can use them.
func (c *cgroups) ensureParent(parent string) error {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("create cgroup %s: %w", parent, err)
	}
	if !c.v2 {
		return nil
	}
	var enable []string
	for ctrl := range c.parent {
		enable = append(enable, "+"+ctrl)
	}
	for _, dir := range []string{filepath.Dir(parent), parent} {
		_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0)
	}
	return nil
}

// setLimits writes the limits into whichever of the instance's cgroups has
// the matching files; zero means unlimited. A limit that no cgroup can take
// is an error, never silently dropped.
func setLimits(dirs []string, l driver.Limits) error {
	const period = 100000
	mem, pids, quota := "-1", "max", "-1"
	if l.MemoryBytes > 0 {
		mem = strconv.FormatInt(l.MemoryBytes, 10)
	}
	if l.PidsLimit > 0 {
		pids = strconv.FormatInt(l.PidsLimit, 10)
	}
	if l.CPUs > 0 {
		quota = strconv.FormatInt(int64(l.CPUs*period), 10)
	}
	v2mem, v2cpu := mem, quota+" "+strconv.Itoa(period)
	if mem == "-1" {
		v2mem = "max"
	}
	if quota == "-1" {
		v2cpu = "max " + strconv.Itoa(period)
	}
	limits := []struct {
		set    bool
		writes [][2]string // alternatives: v1 files, then v2 files
	}{
		{l.PidsLimit > 0, [][2]string{{"pids.max", pids}}},
		// v1: no swap beyond the memory limit. Lowering must go memory first,
		// raising memsw first: writing the pair twice covers both.
		{l.MemoryBytes > 0, [][2]string{{"memory.limit_in_bytes", mem}, {"memory.memsw.limit_in_bytes", mem},
			{"memory.limit_in_bytes", mem}, {"memory.memsw.limit_in_bytes", mem}, {"memory.max", v2mem}, {"memory.swap.max", "0"}}},
		{l.CPUs > 0, [][2]string{{"cpu.cfs_period_us", strconv.Itoa(period)}, {"cpu.cfs_quota_us", quota}, {"cpu.max", v2cpu}}},
	}
	for _, lim := range limits {
		applied, err := writeCgroupFiles(dirs, lim.writes)
		if lim.set && !applied {
			if err == nil {
				err = fmt.Errorf("no cgroup of the instance has %s", lim.writes[0][0])
			}
			return err
		}
	}
	return nil
}

// writeCgroupFiles writes each file present in the dirs and reports
// whether the last write of some file succeeded.
func writeCgroupFiles(dirs []string, writes [][2]string) (bool, error) {
	applied := false
	var last error
	for _, dir := range dirs {
		for _, w := range writes {
			p := filepath.Join(dir, w[0])
			if _, err := os.Stat(p); err != nil {
				continue
			}
			if err := os.WriteFile(p, []byte(w[1]), 0); err != nil {
				last = fmt.Errorf("cgroup %s: %w", p, err)
				continue
			}
			applied, last = true, nil
		}
	}
	return applied, last
}

// cgroupPids lists the processes in the instance's cgroups (each once: on
// v1 every hierarchy lists the same processes).
func cgroupPids(dirs []string) []int {
	var pids []int
	seen := map[int]bool{}
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// killCgroups SIGKILLs every process of the instance until none is left (a
// process may fork while we read the list).
func killCgroups(dirs []string) {
	deadline := time.Now().Add(2 * time.Second)
	for {
		pids := cgroupPids(dirs)
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// removeCgroups kills what is left and removes the directories.
func removeCgroups(dirs []string) error {
	killCgroups(dirs)
	var first error
	for _, dir := range dirs {
		// A killed process leaves its cgroup only once reaped: retry briefly.
		var err error
		for i := 0; i < 100; i++ {
			if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
				err = nil
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil && first == nil {
			first = fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
	}
	return first
}
