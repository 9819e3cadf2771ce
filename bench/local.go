package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// runLocal: fleets of 10 and 50 on the daemonless backend (bubblewrap),
// beside the same bwrap processes started directly.
func runLocal(ctx context.Context, b *bench) error {
	if _, err := exec.LookPath("bwrap"); err != nil {
		return skipf("bwrap is not installed (scripts/setup-engines.sh local)")
	}
	tarball := filepath.Join(b.tmp, "busybox-rootfs.tar.gz")
	if err := writeBusyboxRootfs(tarball); err != nil {
		return err
	}
	root := filepath.Join(b.tmp, "local-root")
	backend := "bench-local-" + b.runID
	hcl := fmt.Sprintf(`resource "sandbox_backend" "b" {
  name = %q
  local = {
    root      = %q
    isolation = "bwrap"
  }
}

resource "sandbox_image" "img" {
  backend = sandbox_backend.b.handle
  name    = "bench/busybox:1"
  archive = { path = %q }
}

resource "sandbox_instance" "w" {
  count   = var.n
  backend = sandbox_backend.b.handle
  image   = sandbox_image.img.image_id
  name    = "w${count.index}"
  command = ["sleep", %q]
}
`, backend, root, tarball, sleepSeconds)
	wd, err := b.newWorkdir("local", hcl)
	if err != nil {
		return err
	}
	e := &localEngine{par: b.o.parallelism, verbose: b.o.verbose, root: root, backendDir: filepath.Join(root, backend), tarball: tarball}
	// Last resort after a failure: no process may keep running from root.
	b.onCleanup("processes under "+root, func(context.Context) error { killUnder(root); return nil })
	b.onCleanup("engine-side sandboxes", e.sweep)
	f := &fleet{label: "local", wd: wd, eng: e}
	if err := b.floor(ctx, f); err != nil {
		return err
	}
	for _, n := range b.sizes(10, 50) {
		m, err := b.measure(ctx, f, n)
		if err != nil {
			return err
		}
		b.addRows("local", n, m, "-", "-")
	}
	return nil
}

// writeBusyboxRootfs writes a rootfs tarball: bin/busybox, its applets as
// symlinks, sbin/init, /etc/passwd and group, empty mount points.
func writeBusyboxRootfs(path string) error {
	bb, err := staticBusybox()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		return err
	}
	out, err := exec.Command(bb, "--list").Output()
	if err != nil {
		return fmt.Errorf("busybox --list: %w", err)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	epoch := time.Unix(0, 0)
	for _, d := range []string{"bin", "sbin", "etc", "tmp", "root", "proc", "sys", "dev", "workspace"} {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: epoch}); err != nil {
			return err
		}
	}
	files := []struct {
		name string
		mode int64
		data []byte
	}{
		{"bin/busybox", 0o755, data},
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")},
		{"etc/group", 0o644, []byte("root:x:0:\nnogroup:x:65534:\n")},
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: epoch}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	links := map[string]string{"sbin/init": "../bin/busybox"}
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" {
			links["bin/"+a] = "busybox"
		}
	}
	for name, target := range links {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: name, Linkname: target, Mode: 0o777, ModTime: epoch}); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// localEngine starts the provider's bwrap command lines itself: captured
// from the provider's running sandbox w0 (argv and environment of the
// bwrap process), with w0 replaced by each instance's name. Per instance it
// makes the same directories, files and cgroups, runs the same wrapper
// (cgroup join, private overlay mount, exec bwrap) and waits for bwrap's
// child pid; remove kills the sandbox and deletes the cgroups and files.
type localEngine struct {
	par        int
	verbose    bool
	root       string
	backendDir string
	tarball    string

	argv    []string
	env     []string
	lower   string            // overlay lowerdir (the image rootfs)
	dirs    []string          // directories made per instance (w0 paths)
	files   map[string][]byte // files made per instance (w0 paths, contents)
	cgroups []string          // cgroup directories (w0 paths)

	mu    sync.Mutex
	procs map[int]*localProc
}

type localProc struct {
	cmd      *exec.Cmd
	childPid int
	dir      string
	cgroups  []string
}

var (
	wrapperScript = `for f in $SBX_CGROUPS; do echo $$ > "$f" || exit 125; done
if [ -n "$SBX_OVERLAY" ]; then
  exec unshare --mount --propagation private /bin/sh -c 'mount -t overlay overlay -o "$SBX_OVERLAY" "$SBX_MERGED" || exit 125; exec "$@"' sh "$@"
fi
exec "$@"
`
	w0Path = regexp.MustCompile(`/instances/w0(/|$|,|:)`)
)

func (e *localEngine) capture(_ context.Context) error {
	instDir := filepath.Join(e.backendDir, "instances", "w0")
	pid, argv := findBwrap(instDir)
	if pid == 0 {
		return fmt.Errorf("no bwrap process of %s", instDir)
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return err
	}
	e.argv, e.env = argv, nil
	e.files = map[string][]byte{}
	for _, kv := range strings.Split(string(env), "\x00") {
		if kv == "" {
			continue
		}
		e.env = append(e.env, kv)
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "SBX_CGROUPS":
			for _, f := range strings.Fields(v) {
				e.cgroups = append(e.cgroups, filepath.Dir(f))
			}
		case "SBX_OVERLAY":
			for _, opt := range strings.Split(v, ",") {
				key, val, _ := strings.Cut(opt, "=")
				switch key {
				case "lowerdir":
					e.lower = val
				case "upperdir", "workdir":
					e.dirs = append(e.dirs, val)
				}
			}
		case "SBX_MERGED":
			e.dirs = append(e.dirs, v)
		}
	}
	// Paths under the instance directory that bwrap binds.
	for _, a := range argv {
		if !strings.HasPrefix(a, instDir+"/") {
			continue
		}
		fi, err := os.Stat(a)
		switch {
		case err != nil:
		case fi.IsDir():
			e.dirs = append(e.dirs, a)
		default:
			if data, err := os.ReadFile(a); err == nil {
				e.files[a] = data
			}
		}
	}
	e.procs = map[int]*localProc{}
	if e.verbose {
		logf("local: captured from pid %d: argv %q env %q dirs %q files %d cgroups %q", pid, argv, e.env, e.dirs, len(e.files), e.cgroups)
	}
	return nil
}

// findBwrap finds the outer bwrap process whose arguments name instDir.
func findBwrap(instDir string) (int, []string) {
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(b) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
		if filepath.Base(argv[0]) != "bwrap" || !strings.Contains(string(b), instDir+"/") {
			continue
		}
		if pp := parentOf(pid); pp > 0 {
			if pb, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pp)); bytes.Equal(pb, b) {
				continue // the inner bwrap
			}
		}
		return pid, argv
	}
	return 0, nil
}

func parentOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		if f := strings.Fields(s[i+1:]); len(f) > 1 {
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	return 0
}

// subst turns a w0 string into instance i's.
func subst(s string, i int) string {
	name := fmt.Sprintf("w%d", i)
	if s == "w0" {
		return name
	}
	s = w0Path.ReplaceAllString(s, "/instances/"+name+"$1")
	return strings.ReplaceAll(s, ".w0.", "."+name+".")
}

func (e *localEngine) create(ctx context.Context, n int) error {
	if e.argv == nil {
		return fmt.Errorf("nothing captured")
	}
	// The image: what sandbox_image extracts.
	if err := os.MkdirAll(e.lower, 0o755); err != nil {
		return err
	}
	if out, err := exec.CommandContext(ctx, "tar", "-xzf", e.tarball, "-C", e.lower).CombinedOutput(); err != nil {
		return fmt.Errorf("extract the image: %v: %s", err, out)
	}
	return parallel(ctx, n, e.par, func(_ context.Context, i int) error { return e.start(i) })
}

func (e *localEngine) start(i int) error {
	p := &localProc{dir: subst(filepath.Join(e.backendDir, "instances", "w0"), i)}
	for _, d := range e.dirs {
		if err := os.MkdirAll(subst(d, i), 0o755); err != nil {
			return err
		}
	}
	for f, data := range e.files {
		data = bytes.ReplaceAll(data, []byte("w0"), []byte(fmt.Sprintf("w%d", i)))
		if err := os.WriteFile(subst(f, i), data, 0o644); err != nil {
			return err
		}
	}
	for _, c := range e.cgroups {
		c = subst(c, i)
		if err := os.MkdirAll(c, 0o755); err != nil {
			return err
		}
		p.cgroups = append(p.cgroups, c)
	}
	argv := make([]string, len(e.argv))
	for j, a := range e.argv {
		argv[j] = subst(a, i)
	}
	env := make([]string, len(e.env))
	for j, kv := range e.env {
		env[j] = subst(kv, i)
	}
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
	status, err := os.Create(filepath.Join(p.dir, "bench-exit.json"))
	if err != nil {
		infoW.Close()
		blockR.Close()
		return err
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", wrapperScript, "sh"}, argv...)...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.ExtraFiles = []*os.File{infoW, status, blockR}
	err = cmd.Start()
	infoW.Close()
	status.Close()
	blockR.Close()
	if err != nil {
		return err
	}
	p.cmd = cmd
	e.mu.Lock()
	e.procs[i] = p
	e.mu.Unlock()
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(infoR).Decode(&info); err != nil || info.ChildPid <= 0 {
		return fmt.Errorf("bwrap for w%d did not report its child: %v", i, err)
	}
	p.childPid = info.ChildPid
	_, err = blockW.Write([]byte{1})
	return err
}

// list counts the sandboxes whose process runs (what a refresh learns).
func (e *localEngine) list(context.Context) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, p := range e.procs {
		if p.childPid > 0 && syscall.Kill(p.childPid, 0) == nil {
			n++
		}
	}
	return n, nil
}

func (e *localEngine) remove(ctx context.Context, n int) error {
	err := parallel(ctx, n, e.par, func(ctx context.Context, i int) error {
		e.mu.Lock()
		p := e.procs[i]
		delete(e.procs, i)
		e.mu.Unlock()
		if p == nil {
			return fmt.Errorf("w%d was not started", i)
		}
		return p.stop()
	})
	if err != nil {
		return err
	}
	return os.RemoveAll(e.backendDir)
}

func (p *localProc) stop() error {
	if p.childPid > 0 {
		_ = syscall.Kill(p.childPid, syscall.SIGKILL)
	}
	if p.cmd != nil && p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		_ = p.cmd.Wait()
	}
	for _, c := range p.cgroups {
		deadline := time.Now().Add(5 * time.Second)
		for {
			err := os.Remove(c)
			if err == nil || os.IsNotExist(err) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("remove cgroup %s: %w", c, err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return os.RemoveAll(p.dir)
}

func (e *localEngine) sweep(context.Context) error {
	e.mu.Lock()
	procs := e.procs
	e.procs = nil
	e.mu.Unlock()
	for _, p := range procs {
		_ = p.stop()
	}
	return nil
}

// killUnder kills every process whose command line names dir, and removes
// empty cgroups the bench's backends left (names hold the backend).
func killUnder(dir string) {
	ents, _ := os.ReadDir("/proc")
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && bytes.Contains(b, []byte(dir+"/")) {
			logf("clean-up: killing leftover process %d", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}
