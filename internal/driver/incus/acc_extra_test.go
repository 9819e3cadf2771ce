package incus_test

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	incus "github.com/lxc/incus/v6/client"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// scoped opens a fresh backend with its scope, deleted at the end (after
// every instance, volume and image the test left).
func scoped(t *testing.T, mutate func(*driver.IncusConfig)) driver.Driver {
	t.Helper()
	return scopedNamed(t, uniqueName("tf-acc"), mutate)
}

// scopedNamed is scoped on backend name.
func scopedNamed(t *testing.T, name string, mutate func(*driver.IncusConfig)) driver.Driver {
	t.Helper()
	d := openNamed(t, name, mutate)
	if err := d.EnsureScope(testCtx(t)); err != nil {
		t.Fatalf("EnsureScope: %v", err)
	}
	t.Cleanup(func() {
		ctx := testCtx(t)
		list, _ := d.ListInstances(ctx)
		for _, in := range list {
			_ = d.DeleteInstance(ctx, in.ID)
		}
		if err := d.DeleteScope(ctx); err != nil {
			t.Errorf("cleanup: DeleteScope: %v", err)
		}
		_ = d.Close()
	})
	return d
}

// rawClient is the plain Incus client, to check what the driver sent.
func rawClient(t *testing.T, project string) incus.InstanceServer {
	t.Helper()
	c, err := incus.ConnectIncusUnix("", nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(c.Disconnect)
	return c.UseProject(project)
}

// A system container (no command): the image's init runs, exec works, the
// instance gets an address on the backend network, and the limits are in
// its config.
func TestSystemContainerLimitsInConfig(t *testing.T) {
	preCheck(t)
	d := scoped(t, nil)
	in, err := d.CreateInstance(testCtx(t), driver.InstanceSpec{
		Name: "sys", Image: fixtureImage, Running: true,
		CPUs: 0.5, MemoryBytes: 64 << 20, PidsLimit: 50, DiskBytes: 512 << 20,
		Env: map[string]string{"GREETING": "hi there"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rawInstance(t, d, in.ID)
	for k, want := range map[string]string{
		"limits.cpu.allowance": "50ms/100ms", "limits.memory": "67108864", "limits.processes": "50",
		"environment.GREETING": "hi there", "user.sandbox.name": "sys",
	} {
		if cfg.Config[k] != want {
			t.Errorf("config %s = %q, want %q", k, cfg.Config[k], want)
		}
	}
	if cfg.Devices["root"]["size"] != "536870912" {
		t.Errorf("root device %v", cfg.Devices["root"])
	}
	res, err := d.Exec(testCtx(t), in.ID, driver.ExecSpec{Command: []string{"sh", "-c", "echo $GREETING; cat /proc/1/comm"}})
	if err != nil || string(res.Stdout) != "hi there\ninit\n" {
		t.Errorf("exec: %q %v (want the image's init as PID 1)", res.Stdout, err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for in.IPAddress == "" && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		in, _ = d.InspectInstance(testCtx(t), in.ID)
	}
	if !strings.HasPrefix(in.IPAddress, "10.") {
		t.Errorf("no address on the backend network: %q", in.IPAddress)
	}
	// The list (what a refresh reads) has no instance state: its address
	// comes from the network's DHCP leases and must be the same.
	listed := ""
	for listed != in.IPAddress && time.Now().Before(deadline.Add(10*time.Second)) {
		list, err := d.ListInstances(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range list {
			if l.ID == in.ID {
				listed = l.IPAddress
			}
		}
		if listed != in.IPAddress {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if listed != in.IPAddress {
		t.Errorf("ListInstances address %q, InspectInstance %q", listed, in.IPAddress)
	}
	// Stopped, it has none, although its lease outlives it.
	if err := d.StopInstance(testCtx(t), in.ID, 0); err != nil {
		t.Fatal(err)
	}
	list, err := d.ListInstances(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range list {
		if l.ID == in.ID && (l.Status != driver.StatusStopped || l.IPAddress != "") {
			t.Errorf("stopped instance listed as %s with address %q", l.Status, l.IPAddress)
		}
	}
}

func rawInstance(t *testing.T, d driver.Driver, id string) incusInstance {
	t.Helper()
	in, err := d.InspectInstance(testCtx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	inst, _, err := rawClient(t, in.Labels[driver.LabelBackend]).GetInstance(id)
	if err != nil {
		t.Fatal(err)
	}
	return incusInstance{Config: inst.Config, Devices: inst.Devices}
}

type incusInstance struct {
	Config  map[string]string
	Devices map[string]map[string]string
}

func TestNetworkNone(t *testing.T) {
	preCheck(t)
	d := scoped(t, nil)
	in, err := d.CreateInstance(testCtx(t), driver.InstanceSpec{
		Name: "nonet", Image: fixtureImage, Running: true, Network: driver.NetworkNone, Command: []string{"sleep", "600"},
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Exec(testCtx(t), in.ID, driver.ExecSpec{Command: []string{"sh", "-c", "ls /sys/class/net"}})
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "lo" {
		t.Errorf("interfaces %q %v, want only lo", res.Stdout, err)
	}
}

// A create that fails after the instance exists (a missing local file)
// leaves nothing behind.
func TestCreateFailureCleansUp(t *testing.T) {
	preCheck(t)
	d := scoped(t, nil)
	_, err := d.CreateInstance(testCtx(t), driver.InstanceSpec{
		Name: "bad", Image: fixtureImage, Running: true, Command: []string{"sleep", "600"},
		Files: []driver.File{{Path: "/x", Source: "/nonexistent/file"}},
	})
	if err == nil {
		t.Fatal("create with a missing file source succeeded")
	}
	if _, err := d.InspectInstance(testCtx(t), "bad"); !driver.IsNotFound(err) {
		t.Errorf("after failed create: %v, want not found", err)
	}
}

// Images from archives: a plain rootfs tarball (metadata generated), a
// unified one, the alias moving, and delete.
func TestImagesFromArchives(t *testing.T) {
	preCheck(t)
	d := scoped(t, nil)
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs.tar.gz")
	writeRootfs(t, rootfs, "")
	img, err := d.EnsureImage(testCtx(t), driver.ImageSpec{Name: "test/busybox:1", Archive: &driver.ArchiveSource{Path: rootfs}})
	if err != nil {
		t.Fatalf("EnsureImage(rootfs): %v", err)
	}
	again, err := d.EnsureImage(testCtx(t), driver.ImageSpec{Name: "test/busybox:1", Archive: &driver.ArchiveSource{Path: rootfs}})
	if err != nil || again.ID != img.ID {
		t.Errorf("second EnsureImage: %+v %v, want the same fingerprint %s", again, err, img.ID)
	}
	in, err := d.CreateInstance(testCtx(t), driver.InstanceSpec{Name: "fromimg", Image: "test/busybox:1", Running: true, Command: []string{"sleep", "600"}})
	if err != nil {
		t.Fatalf("instance from the imported image: %v", err)
	}
	if err := d.DeleteInstance(testCtx(t), in.ID); err != nil {
		t.Fatal(err)
	}
	unified := filepath.Join(dir, "unified.tar.gz")
	writeRootfs(t, unified, "rootfs/")
	img2, err := d.EnsureImage(testCtx(t), driver.ImageSpec{Name: "test/busybox:1", Archive: &driver.ArchiveSource{Path: unified}})
	if err != nil || img2.ID == img.ID {
		t.Fatalf("EnsureImage(unified): %+v %v, want a new fingerprint", img2, err)
	}
	if got, err := d.InspectImage(testCtx(t), "test/busybox:1"); err != nil || got.ID != img2.ID || got.Labels[driver.LabelManagedBy] == "" {
		t.Errorf("alias now %+v %v, want %s with our labels", got, err, img2.ID)
	}
	for _, x := range []driver.Image{img, img2} {
		_ = d.DeleteImage(testCtx(t), "test/busybox:1", x.ID)
	}
	if _, err := d.InspectImage(testCtx(t), "test/busybox:1"); !driver.IsNotFound(err) {
		t.Errorf("after delete: %v, want not found", err)
	}
	if _, err := d.EnsureImage(testCtx(t), driver.ImageSpec{Name: "x", Build: &driver.BuildSource{ContextDir: dir}}); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("build: %v, want ErrUnsupported", err)
	}
}

// writeRootfs writes a busybox rootfs tarball; with prefix "rootfs/" it is
// a unified image with metadata.yaml.
func writeRootfs(t *testing.T, path, prefix string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	add := func(h *tar.Header, body []byte) {
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write(body)
	}
	if prefix != "" {
		meta := "architecture: x86_64\ncreation_date: 1700000000\nproperties:\n  description: unified test\n"
		add(&tar.Header{Name: "metadata.yaml", Mode: 0o644, Typeflag: tar.TypeReg}, []byte(meta))
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"bin", "sbin", "etc", "tmp", "dev", "proc", "sys"} {
		add(&tar.Header{Name: prefix + d + "/", Mode: 0o755, Typeflag: tar.TypeDir}, nil)
	}
	add(&tar.Header{Name: prefix + "bin/busybox", Mode: 0o755, Typeflag: tar.TypeReg}, bb)
	for _, l := range []string{"bin/sh", "bin/sleep", "bin/cat"} {
		add(&tar.Header{Name: prefix + l, Linkname: "busybox", Typeflag: tar.TypeSymlink, Mode: 0o777}, nil)
	}
	add(&tar.Header{Name: prefix + "sbin/init", Linkname: "../bin/busybox", Typeflag: tar.TypeSymlink, Mode: 0o777}, nil)
	_ = tw.Close()
	_ = zw.Close()
}

// DeleteScope refuses a project with objects, and never deletes a project
// the backend did not create.
func TestScopeRules(t *testing.T) {
	preCheck(t)
	d := scoped(t, nil)
	v, err := d.CreateVolume(testCtx(t), driver.VolumeSpec{Name: "keep"})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteScope(testCtx(t)); err == nil {
		t.Error("DeleteScope of a project holding a volume succeeded")
	}
	if err := d.DeleteVolume(testCtx(t), v.Name); err != nil {
		t.Fatal(err)
	}
	other := openBackend(t, func(c *driver.IncusConfig) { c.Project = "default" })
	if err := other.DeleteScope(testCtx(t)); err != nil {
		t.Errorf("DeleteScope on the default project: %v (must be a no-op)", err)
	}
}

// The dynamic port strategy: a free host port on 127.0.0.1, reached.
func TestDynamicPorts(t *testing.T) {
	preCheck(t)
	d := scoped(t, func(c *driver.IncusConfig) { c.PortStrategy = driver.PortStrategyDynamic })
	in, err := d.CreateInstance(testCtx(t), driver.InstanceSpec{
		Name: "dyn", Image: fixtureImage, Running: true,
		Command: []string{"sh", "-c", "mkdir -p /www && echo dyn > /www/index.html && exec httpd -f -p 8080 -h /www"},
		Ports:   []driver.PortSpec{{Name: "http", Port: 8080, Protocol: "tcp"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ep := in.Endpoints["http"]
	if !strings.HasPrefix(ep, "127.0.0.1:") || strings.HasSuffix(ep, ":8080") {
		t.Fatalf("endpoint %q, want 127.0.0.1 and a picked port", ep)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + ep + "/index.html")
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(body) == "dyn\n" {
				return
			}
			err = fmt.Errorf("body %q", body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", ep, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Creating a name that exists fails with ErrAlreadyExists and leaves the
// existing instance alone.
func TestCreateExistingName(t *testing.T) {
	preCheck(t)
	d := scoped(t, nil)
	spec := driver.InstanceSpec{Name: "dup", Image: fixtureImage, Running: true, Command: []string{"sleep", "600"}}
	first, err := d.CreateInstance(testCtx(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateInstance(testCtx(t), spec); !errors.Is(err, driver.ErrAlreadyExists) {
		t.Errorf("second create: %v, want ErrAlreadyExists", err)
	}
	if in, err := d.InspectInstance(testCtx(t), first.ID); err != nil || in.Status != driver.StatusRunning {
		t.Errorf("the first instance after the failed duplicate: %+v %v", in, err)
	}
}

// A missing working directory is created (Incus would run in / instead),
// and a command that does not exist is exit 127, not an error.
func TestExecWorkdirAndMissingCommand(t *testing.T) {
	preCheck(t)
	d := scoped(t, nil)
	in, err := d.CreateInstance(testCtx(t), driver.InstanceSpec{Name: "wd", Image: fixtureImage, Running: true, Command: []string{"sleep", "600"}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Exec(testCtx(t), in.ID, driver.ExecSpec{Command: []string{"pwd"}, Workdir: "/no/such/dir"})
	if err != nil || string(res.Stdout) != "/no/such/dir\n" {
		t.Errorf("exec in a new workdir: %q %v", res.Stdout, err)
	}
	res, err = d.Exec(testCtx(t), in.ID, driver.ExecSpec{Command: []string{"/no/such/bin"}})
	if err != nil || res.ExitCode != 127 {
		t.Errorf("missing command: %+v %v, want exit 127 and no error", res, err)
	}
}
