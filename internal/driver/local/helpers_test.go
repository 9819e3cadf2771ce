package local

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testgate"
)

const gateEnv = "SANDBOX_ACC_LOCAL"

var (
	agentOnce sync.Once
	agentErr  error
	fixtureMu sync.Mutex
	fixture   string   // busybox rootfs tarball shared by the tests
	tempDirs  []string // removed when the tests end
)

func TestMain(m *testing.M) {
	if os.Getenv(ttyHelperEnv) != "" {
		os.Exit(ttyHelper()) // a child of TestExecHasNoControllingTerminal
	}
	code := m.Run()
	for _, dir := range tempDirs {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// precheck skips without the gate and fails when the gate is set but the
// host cannot run the backend; it builds the agent once.
func precheck(t *testing.T, isolation string) {
	t.Helper()
	testgate.Skip(t, gateEnv)
	if isolation == driver.IsolationBwrap {
		if _, err := exec.LookPath("bwrap"); err != nil {
			t.Fatalf("%s is set but bwrap is missing: %v", gateEnv, err)
		}
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Fatalf("%s is set but /bin/busybox (busybox-static) is missing", gateEnv)
	}
	agentOnce.Do(buildAgent)
	if agentErr != nil {
		t.Fatalf("build the agent: %v", agentErr)
	}
}

// buildAgent builds cmd/sandbox-agent statically, unless SANDBOX_AGENT_BINARY
// already names one.
func buildAgent() {
	if os.Getenv(agent.EnvBinary) != "" {
		return
	}
	dir, err := os.MkdirTemp("", "local-test-agent-")
	if err != nil {
		agentErr = err
		return
	}
	tempDirs = append(tempDirs, dir)
	out := filepath.Join(dir, agent.BinaryName)
	cmd := exec.Command("go", "build", "-o", out, "./cmd/sandbox-agent")
	cmd.Dir = "../../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		agentErr = fmt.Errorf("%v: %s", err, b)
		return
	}
	os.Setenv(agent.EnvBinary, out)
}

// busyboxTarball returns a gzipped rootfs tarball: busybox with relative
// applet links, /etc/passwd and /etc/group, /tmp.
func busyboxTarball(t testing.TB) string {
	t.Helper()
	fixtureMu.Lock()
	defer fixtureMu.Unlock()
	if fixture != "" {
		return fixture
	}
	dir, err := os.MkdirTemp("", "local-fixture-")
	if err != nil {
		t.Fatal(err)
	}
	tempDirs = append(tempDirs, dir)
	root := filepath.Join(dir, "rootfs")
	mustRun(t, "mkdir", "-p", root+"/bin", root+"/etc", root+"/tmp", root+"/root")
	mustRun(t, "cp", "/bin/busybox", root+"/bin/busybox")
	out, err := exec.Command("/bin/busybox", "--list").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, applet := range strings.Fields(string(out)) {
		if applet != "busybox" {
			_ = os.Symlink("busybox", filepath.Join(root, "bin", applet))
		}
	}
	writeTestFile(t, root+"/etc/passwd", "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")
	writeTestFile(t, root+"/etc/group", "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n")
	if err := os.Chmod(root+"/tmp", 0o1777); err != nil {
		t.Fatal(err)
	}
	fixture = filepath.Join(dir, "busybox-rootfs.tar.gz")
	if err := tarDir(root, fixture); err != nil {
		t.Fatal(err)
	}
	return fixture
}

// tarDir writes a gzipped tarball of dir's contents.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	err = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		link := ""
		if e.Type()&fs.ModeSymlink != 0 {
			link, _ = os.Readlink(p)
		}
		h, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		h.Name, _ = filepath.Rel(dir, p)
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if e.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			_, err = tw.Write(b)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

func mustRun(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v: %s", name, args, err, out)
	}
}

func writeTestFile(t testing.TB, p, content string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// testImage is the name the busybox fixture gets in every test backend.
const testImage = "test/busybox:latest"

// openBench is openTest for benchmarks (bwrap isolation).
func openBench(b *testing.B) *Driver {
	b.Helper()
	testgate.Skip(b, gateEnv)
	agentOnce.Do(buildAgent)
	if agentErr != nil {
		b.Fatal(agentErr)
	}
	root := b.TempDir()
	dr, err := driver.Open(context.Background(), driver.Config{Driver: driver.Local, Name: "bench", Local: &driver.LocalConfig{Root: root, Isolation: driver.IsolationBwrap}})
	if err != nil {
		b.Fatal(err)
	}
	d := dr.(*Driver)
	if _, err := d.EnsureImage(context.Background(), driver.ImageSpec{Name: testImage, Archive: &driver.ArchiveSource{Path: busyboxTarball(b)}}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		list, _ := d.ListInstances(context.Background())
		for _, in := range list {
			_ = d.DeleteInstance(context.Background(), in.ID)
		}
	})
	return d
}

// openTest opens a fresh backend in a temporary root, with the busybox image,
// and deletes everything it holds at cleanup.
func openTest(t *testing.T, isolation string) *Driver {
	t.Helper()
	precheck(t, isolation)
	root := t.TempDir()
	// A non-root sandbox user must be able to reach its workspace.
	_ = os.Chmod(root, 0o711)
	_ = os.Chmod(filepath.Dir(root), 0o711)
	cfg := driver.Config{Driver: driver.Local, Name: "t" + randomHex(4), Local: &driver.LocalConfig{Root: root, Isolation: isolation}}
	dr, err := driver.Open(context.Background(), cfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	d := dr.(*Driver)
	if err := d.EnsureScope(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cleanupBackend(t, d) })
	if isolation == driver.IsolationBwrap {
		if _, err := d.EnsureImage(context.Background(), driver.ImageSpec{Name: testImage, Archive: &driver.ArchiveSource{Path: busyboxTarball(t)}}); err != nil {
			t.Fatalf("EnsureImage: %v", err)
		}
	}
	return d
}

func cleanupBackend(t *testing.T, d *Driver) {
	ctx := context.Background()
	list, _ := d.ListInstances(ctx)
	for _, in := range list {
		if err := d.DeleteInstance(ctx, in.ID); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(d.root, "volumes"))
	for _, e := range entries {
		_ = d.DeleteVolume(ctx, e.Name())
	}
	if err := d.DeleteScope(ctx); err != nil {
		t.Errorf("cleanup: %v", err)
	}
}

// spec is a running busybox instance that stays up.
func testSpec(name string) driver.InstanceSpec {
	return driver.InstanceSpec{Name: name, Image: testImage, Command: []string{"sleep", "3600"}, Running: true}
}

func mustCreate(t *testing.T, d *Driver, spec driver.InstanceSpec) driver.Instance {
	t.Helper()
	in, err := d.CreateInstance(context.Background(), spec)
	if err != nil {
		t.Fatalf("CreateInstance(%s): %v", spec.Name, err)
	}
	return in
}

// sh runs a shell script in the instance and returns stdout; a non-zero exit
// fails the test.
func sh(t *testing.T, d *Driver, id, script string) string {
	t.Helper()
	res, err := d.Exec(context.Background(), id, driver.ExecSpec{Command: []string{"sh", "-c", script}})
	if err != nil {
		t.Fatalf("exec %q: %v", script, err)
	}
	if res.ExitCode != 0 {
		log, _ := os.ReadFile(filepath.Join(d.instanceDir(id), logFile))
		exit, _ := os.ReadFile(filepath.Join(d.instanceDir(id), exitFile))
		t.Fatalf("exec %q: exit %d, stdout %q, stderr %q; console %q; exit %q", script, res.ExitCode, res.Stdout, res.Stderr, log, exit)
	}
	return string(res.Stdout)
}

// waitFor polls check until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func status(t *testing.T, d *Driver, id string) string {
	t.Helper()
	in, err := d.InspectInstance(context.Background(), id)
	if err != nil {
		t.Fatalf("inspect %s: %v", id, err)
	}
	return in.Status
}
