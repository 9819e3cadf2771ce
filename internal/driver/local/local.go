package local

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/names"
)

func init() {
	driver.Register(driver.Local, Open)
}

var (
	_ driver.Driver       = (*Driver)(nil)
	_ driver.ScopeChecker = (*Driver)(nil)
)

// Driver is one local backend: the directory <root>/<backend>.
type Driver struct {
	cfg       driver.Config
	backend   string
	root      string // <root>/<backend>
	isolation string

	bwrap   string // absolute path of bwrap ("" with isolation none)
	nsenter string // absolute path of nsenter ("" with isolation none)
	shell   string // /bin/sh, runs the small launch wrapper

	cg      *cgroups // nil when this host gives us no cgroups
	overlay bool     // overlayfs usable: instances get a writable rootfs

	agentOnce sync.Once
	agentPath string
	agentErr  error

	versionOnce sync.Once
	version     string
}

// Open validates the config and finds the tools; it touches nothing on disk.
func Open(_ context.Context, cfg driver.Config) (driver.Driver, error) {
	if cfg.Local == nil {
		return nil, fmt.Errorf("local backend %q: the local configuration is missing", cfg.Name)
	}
	if err := names.ValidateName(cfg.Name); err != nil {
		return nil, fmt.Errorf("local backend: %w", err)
	}
	root := cfg.Local.Root
	if root == "" {
		return nil, fmt.Errorf("local backend %q: local.root is empty", cfg.Name)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("local backend %q: root %q: %w", cfg.Name, root, err)
	}
	d := &Driver{cfg: cfg, backend: cfg.Name, root: filepath.Join(abs, cfg.Name), isolation: cfg.Local.Isolation}
	if d.isolation == "" {
		d.isolation = driver.IsolationBwrap
	}
	if err := d.findTools(); err != nil {
		return nil, err
	}
	d.cg = detectCgroups()
	d.overlay = d.isolation == driver.IsolationBwrap && os.Geteuid() == 0 && hasFilesystem("overlay") && canHoldUpper(abs) && !strings.ContainsAny(abs, ",:") && hasPrograms("unshare", "mount")
	return d, nil
}

// hasPrograms reports whether every program is on PATH.
func hasPrograms(names ...string) bool {
	for _, n := range names {
		if _, err := exec.LookPath(n); err != nil {
			return false
		}
	}
	return true
}

// canHoldUpper reports whether dir's file system can hold an overlay upper
// layer: overlayfs itself cannot (the provider running in a container).
func canHoldUpper(dir string) bool {
	const overlayMagic = 0x794c7630
	for {
		var fs syscall.Statfs_t
		if err := syscall.Statfs(dir, &fs); err == nil {
			return fs.Type != overlayMagic
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
}

// findTools resolves the programs the isolation mode needs, so a missing one
// is reported when the backend is opened rather than at the first instance.
func (d *Driver) findTools() error {
	sh, err := exec.LookPath("sh")
	if err != nil {
		return fmt.Errorf("local backend %q: no /bin/sh to launch sandboxes: %w", d.backend, driver.ErrUnavailable)
	}
	d.shell = sh
	switch d.isolation {
	case driver.IsolationNone:
		return nil
	case driver.IsolationBwrap:
	default:
		return fmt.Errorf("local backend %q: isolation %q is not one of %q, %q: %w", d.backend, d.isolation, driver.IsolationBwrap, driver.IsolationNone, driver.ErrUnsupported)
	}
	if d.bwrap, err = exec.LookPath("bwrap"); err != nil {
		return fmt.Errorf("local backend %q: isolation \"bwrap\" needs bubblewrap (apt-get install bubblewrap), or set isolation = \"none\": %w", d.backend, driver.ErrUnavailable)
	}
	if d.nsenter, err = exec.LookPath("nsenter"); err != nil {
		return fmt.Errorf("local backend %q: isolation \"bwrap\" needs nsenter (util-linux) to run commands in a sandbox: %w", d.backend, driver.ErrUnavailable)
	}
	return nil
}

// Close releases nothing: the driver holds no connection.
func (d *Driver) Close() error { return nil }

// Info reports the host and what this driver can enforce on it.
func (d *Driver) Info(_ context.Context) (driver.Info, error) {
	return driver.Info{
		EngineVersion: d.engineVersion(),
		OS:            runtime.GOOS,
		Arch:          runtime.GOARCH,
		CPUs:          int64(runtime.NumCPU()),
		MemoryBytes:   memTotal(),
		Capabilities:  d.capabilities(),
	}, nil
}

func (d *Driver) capabilities() []string {
	caps := []string{driver.CapContainers, driver.CapExec, driver.CapFiles, driver.CapLifetime,
		driver.CapArchive, driver.CapVolumes, driver.CapNetworkBrdg, driver.CapPorts}
	if d.isolation == driver.IsolationBwrap {
		caps = append(caps, driver.CapNetworkNone, driver.CapNetworkIso)
	}
	if d.cg != nil {
		if d.cg.has("pids") {
			caps = append(caps, driver.CapPidsLimit)
		}
		if d.cg.has("memory") {
			caps = append(caps, driver.CapMemoryLimit)
		}
		if d.cg.has("cpu") {
			caps = append(caps, driver.CapCPULimit)
		}
	}
	return caps
}

func (d *Driver) engineVersion() string {
	d.versionOnce.Do(func() {
		d.version = "local (isolation none)"
		if d.bwrap == "" {
			return
		}
		out, err := exec.Command(d.bwrap, "--version").Output()
		if err == nil {
			d.version = "local (" + strings.TrimSpace(string(out)) + ")"
		}
	})
	return d.version
}

// agentBinary is the host file bound into sandboxes, resolved once.
func (d *Driver) agentBinary() (string, error) {
	d.agentOnce.Do(func() {
		d.agentPath, d.agentErr = agent.BinaryPath()
		if d.agentErr != nil {
			d.agentErr = fmt.Errorf("local backend %q: %w", d.backend, d.agentErr)
		}
	})
	return d.agentPath, d.agentErr
}

// EnsureScope creates the backend directory tree; idempotent.
func (d *Driver) EnsureScope(_ context.Context) error {
	for _, sub := range []string{"images", "volumes", "instances"} {
		if err := os.MkdirAll(filepath.Join(d.root, sub), 0o711); err != nil {
			return fmt.Errorf("local backend %q: create %s: %w", d.backend, d.root, err)
		}
	}
	return nil
}

// ScopeExists reports whether the backend directory is there.
func (d *Driver) ScopeExists(_ context.Context) (bool, error) {
	st, err := os.Stat(d.root)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case err != nil:
		return false, d.errf("%w", err)
	case !st.IsDir():
		return false, d.errf("%s is not a directory", d.root)
	}
	return true, nil
}

// DeleteScope removes the backend directory once it holds no instance and no
// volume. Images are not part of the scope (as on Docker, where they belong
// to the engine): while any is named the directory stays with them.
func (d *Driver) DeleteScope(_ context.Context) error {
	if _, err := os.Stat(d.root); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	for _, sub := range []string{"instances", "volumes"} {
		entries, err := os.ReadDir(filepath.Join(d.root, sub))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("local backend %q: %w", d.backend, err)
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), ".") { // hidden: leftovers of an interrupted create or delete
				return d.errf("%s holds %s %q: %w", d.root, strings.TrimSuffix(sub, "s"), e.Name(), driver.ErrInUse)
			}
		}
	}
	if len(d.refs()) > 0 {
		for _, sub := range []string{"instances", "volumes"} {
			if err := os.RemoveAll(filepath.Join(d.root, sub)); err != nil {
				return d.errf("remove %s: %w", sub, err)
			}
		}
		return nil
	}
	if err := os.RemoveAll(d.root); err != nil {
		return fmt.Errorf("local backend %q: remove %s: %w", d.backend, d.root, err)
	}
	return nil
}

func (d *Driver) instanceDir(name string) string { return filepath.Join(d.root, "instances", name) }
func (d *Driver) volumeDir(name string) string   { return filepath.Join(d.root, "volumes", name) }
func (d *Driver) imagesDir() string              { return filepath.Join(d.root, "images") }

// errf formats an error that names the backend.
func (d *Driver) errf(format string, a ...any) error {
	return fmt.Errorf("local backend %q: "+format, append([]any{d.backend}, a...)...)
}

// memTotal reads MemTotal from /proc/meminfo, in bytes (0 if unknown).
func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// hasFilesystem reports whether the kernel knows a file system type.
func hasFilesystem(name string) bool {
	b, err := os.ReadFile("/proc/filesystems")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[len(f)-1] == name {
			return true
		}
	}
	return false
}
