package docker_test

// Podman's Docker-compatible API (`podman system service`, scripts/
// setup-podman.sh) as a Docker backend: the shared conformance suite and the
// places where Podman differs, over its unix socket and, with SANDBOX_ACC_SSH
// also set, over the private sshd of scripts/setup-sshd.sh forwarding to that
// socket. Gate: SANDBOX_ACC_PODMAN; set and not answering = failure.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/docker"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/sshconn"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testgate"
)

const podmanGate = "SANDBOX_ACC_PODMAN"

// podmanHost is the service's socket URL (env file of setup-podman.sh).
func podmanHost() string {
	return testEnv("SANDBOX_TEST_PODMAN_HOST", "unix:///run/sandbox-podman/podman.sock")
}

// podmanRemote skips without the gate and fails when the service does not
// answer. The raw client always talks to the local socket: over SSH the
// sshd forwards to that same socket.
func podmanRemote(t *testing.T, dc driver.DockerConfig) *remote {
	t.Helper()
	testgate.Skip(t, podmanGate)
	host := podmanHost()
	raw, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Ping(ctxT(t)); err != nil {
		raw.Close()
		t.Fatalf("%s is set but Podman does not answer at %s (run scripts/setup-podman.sh): %v", podmanGate, host, err)
	}
	t.Cleanup(func() { removePodmanCaches(raw) })
	return newRemote(t, dc, raw)
}

// removePodmanCaches removes the driver's helper image and the agent volumes
// no container uses any more (the driver makes them again on demand).
func removePodmanCaches(raw *client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vols, _ := raw.VolumeList(ctx, volume.ListOptions{})
	for _, v := range vols.Volumes {
		if strings.HasPrefix(v.Name, "sandbox-agent-") {
			_ = raw.VolumeRemove(ctx, v.Name, false)
		}
	}
	_, _ = raw.ImageRemove(ctx, "sandbox-seed:v1", image.RemoveOptions{PruneChildren: true})
}

func TestPodman(t *testing.T) {
	r := podmanRemote(t, driver.DockerConfig{Host: podmanHost()})
	t.Run("Info", func(t *testing.T) { testPodmanInfo(t, r, true) })
	t.Run("Conformance", r.conformance)
	t.Run("NameConflict", func(t *testing.T) { testPodmanNameConflict(t, r) })
	t.Run("ScopeRace", func(t *testing.T) { testPodmanScopeRace(t, r) })
	t.Run("UpdateLimits", func(t *testing.T) { testPodmanUpdate(t, r) })
	t.Run("InternalNetwork", func(t *testing.T) { testPodmanInternal(t, r) })
	t.Run("LoopbackIPAndBridge", func(t *testing.T) { testPodmanLoopback(t, r) })
	t.Run("InitWithoutAgent", func(t *testing.T) { testPodmanInit(t, r) })
	t.Run("ArchiveImport", func(t *testing.T) { testPodmanArchive(t, r) })
}

func TestPodmanSSH(t *testing.T) {
	testgate.Skip(t, "SANDBOX_ACC_SSH")
	dc := sshDockerConfig()
	sc, err := sshconn.ParseURL(dc.Host)
	if err != nil {
		t.Fatal(err)
	}
	remoteGate(t, "SANDBOX_ACC_SSH", sc.Addr(), "setup-sshd.sh")
	t.Setenv("SSH_AUTH_SOCK", "") // only the configured key
	t.Cleanup(sshconn.CloseAll)
	dc.RemoteSocket = strings.TrimPrefix(podmanHost(), "unix://")
	r := podmanRemote(t, dc)
	t.Run("Info", func(t *testing.T) { testPodmanInfo(t, r, false) })
	t.Run("Conformance", r.conformance)
	t.Run("UpdateLimits", func(t *testing.T) { testPodmanUpdate(t, r) })
}

// testPodmanInfo: the engine is recognised as Podman.
func testPodmanInfo(t *testing.T, r *remote, local bool) {
	d, _ := r.open(t)
	info, err := d.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.EngineVersion, "podman ") {
		t.Errorf("engine version %q, want podman ...", info.EngineVersion)
	}
	t.Logf("info: %+v", info)
}

// testPodmanNameConflict: a second instance of the same name is
// ErrAlreadyExists, as on Docker (Podman answers 500, not 409).
func testPodmanNameConflict(t *testing.T, r *remote) {
	d, _ := r.open(t)
	spec := driver.InstanceSpec{Name: "twice", Image: r.image, Command: []string{"sleep", "60"}, Running: true}
	if _, err := d.CreateInstance(ctxT(t), spec); err != nil {
		t.Fatal(err)
	}
	_, err := d.CreateInstance(ctxT(t), spec)
	if !errors.Is(err, driver.ErrAlreadyExists) {
		t.Fatalf("second create: %v, want ErrAlreadyExists", err)
	}
}

// testPodmanScopeRace: the backend network made by someone else between
// the driver's inspect and its create (another provider process) counts
// as made; Podman reports it as a 500 "network already exists".
func testPodmanScopeRace(t *testing.T, r *remote) {
	d, backend := r.open(t)
	if _, err := r.raw.NetworkCreate(ctxT(t), "sandbox-"+backend, network.CreateOptions{Driver: "bridge"}); err != nil {
		t.Fatal(err)
	}
	_, err := r.raw.NetworkCreate(ctxT(t), "sandbox-"+backend, network.CreateOptions{Driver: "bridge"})
	if err == nil {
		t.Fatal("creating the network twice succeeded")
	}
	if !cerrdefs.IsConflict(docker.PodmanError(err)) {
		t.Errorf("duplicate network %v: not mapped to a conflict", err)
	}
	if err := d.EnsureScope(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}

// testPodmanUpdate: limits change in place on a running container through
// libpod's endpoint; a stopped one is refused with the reason.
func testPodmanUpdate(t *testing.T, r *remote) {
	d, _ := r.open(t)
	inst, err := d.CreateInstance(ctxT(t), driver.InstanceSpec{Name: "upd", Image: r.image, Command: []string{"sleep", "600"},
		Running: true, MemoryBytes: 128 << 20, PidsLimit: 100, CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.UpdateInstance(ctxT(t), inst.ID, driver.Limits{MemoryBytes: 96 << 20, PidsLimit: 50, CPUs: 0.5}); err != nil {
		t.Fatal(err)
	}
	got := mustExec(t, d, inst.ID, "sh", "-c", "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes; "+
		"cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max; "+
		"cut -d' ' -f1 /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us")
	if want := fmt.Sprintf("%d\n50\n50000\n", 96<<20); got != want {
		t.Errorf("limits seen inside %q, want %q", got, want)
	}
	if err := d.StopInstance(ctxT(t), inst.ID, time.Second); err != nil {
		t.Fatal(err)
	}
	err = d.UpdateInstance(ctxT(t), inst.ID, driver.Limits{MemoryBytes: 64 << 20})
	if !errors.Is(err, driver.ErrUnsupported) || !strings.Contains(err.Error(), "running container only") {
		t.Errorf("update of a stopped container: %v, want ErrUnsupported with the reason", err)
	}
	if err := d.UpdateInstance(ctxT(t), "tf-acc-missing-"+randName(), driver.Limits{MemoryBytes: 64 << 20}); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("update of a missing container: %v, want ErrNotFound", err)
	}
}

// testPodmanInternal: an internal backend network has no way out, ports are
// not offered, and instances on it still reach each other by name.
func testPodmanInternal(t *testing.T, r *remote) {
	dc := r.dc
	dc.Internal = true
	di, _ := r.openWith(t, dc)
	iinfo, err := di.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if iinfo.Has(driver.CapPorts) {
		t.Errorf("internal backend offers ports: %v", iinfo.Capabilities)
	}
	a, err := di.CreateInstance(ctxT(t), driver.InstanceSpec{Name: "a", Image: r.image, Command: []string{"httpd", "-f", "-p", "8080", "-h", "/"}, Running: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := di.CreateInstance(ctxT(t), driver.InstanceSpec{Name: "b", Image: r.image, Command: []string{"sleep", "600"}, Running: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = a
	nw, err := r.raw.NetworkInspect(ctxT(t), "sandbox-"+backendOf(t, di, b.ID), network.InspectOptions{})
	if err != nil || !nw.Internal {
		t.Errorf("backend network internal=%v (%v)", nw.Internal, err)
	}
	// No default route out of an internal network.
	if out := mustExec(t, di, b.ID, "sh", "-c", "ip route | grep -c default || true"); strings.TrimSpace(out) != "0" {
		t.Errorf("default routes on an internal network: %q", out)
	}
}

func backendOf(t *testing.T, d driver.Driver, id string) string {
	t.Helper()
	in, err := d.InspectInstance(ctxT(t), id)
	if err != nil {
		t.Fatal(err)
	}
	return in.Labels[driver.LabelBackend]
}

// testPodmanLoopback: loopback_ip publishes on the instance's own 127.0.0.x
// through netavark; network "bridge" is Podman's default network.
func testPodmanLoopback(t *testing.T, r *remote) {
	dc := r.dc
	dc.PortStrategy = driver.PortStrategyLoopbackIP
	d, _ := r.openWith(t, dc)
	spec := driver.InstanceSpec{Name: "web", Image: r.image, Running: true, Network: driver.NetworkBridge,
		Command: []string{"sh", "-c", "mkdir -p /srv && echo ok > /srv/index.html && exec httpd -f -p 8080 -h /srv"},
		Ports:   []driver.PortSpec{{Name: "http", Port: 8080, Protocol: "tcp"}}}
	inst, err := d.CreateInstance(ctxT(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	if inst.LoopbackIP == "" || inst.Endpoints["http"] != inst.LoopbackIP+":8080" {
		t.Fatalf("endpoints %v, loopback %q", inst.Endpoints, inst.LoopbackIP)
	}
	if inst.IPAddress == "" {
		t.Errorf("no address on the bridge network")
	}
	getOK(t, inst.Endpoints["http"])
}

// testPodmanInit: without a usable agent the engine's own init (catatonit)
// is PID 1 and a lifetime is refused.
func testPodmanInit(t *testing.T, r *remote) {
	t.Setenv("SANDBOX_AGENT_BINARY", "/nonexistent/sandbox-agent")
	d, _ := r.open(t)
	info, err := d.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.Has(driver.CapLifetime) {
		t.Errorf("lifetime offered without an agent: %v", info.Capabilities)
	}
	inst, err := d.CreateInstance(ctxT(t), driver.InstanceSpec{Name: "init", Image: r.image, Command: []string{"sleep", "600"},
		Running: true, Security: driver.Security{Init: true}})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, d, inst.ID, "cat", "/proc/1/cmdline"); !strings.Contains(got, "init") || strings.HasPrefix(got, "sleep") {
		t.Errorf("PID 1 is %q, want the engine's init", got)
	}
	_, err = d.CreateInstance(ctxT(t), driver.InstanceSpec{Name: "life", Image: r.image, Command: []string{"sleep", "600"},
		Running: true, Lifetime: time.Hour})
	if !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("lifetime without agent: %v, want ErrUnsupported", err)
	}
}

// testPodmanArchive: a root filesystem tarball is imported, with labels,
// and runs; deleting it removes it.
func testPodmanArchive(t *testing.T, r *remote) {
	d, _ := r.open(t)
	dir := t.TempDir()
	tarPath := filepath.Join(dir, "rootfs.tar")
	cmd := exec.Command("tar", "-C", busyboxRootfs(t), "-cf", tarPath, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	name := "sandbox-test/podman-import:" + randName()
	t.Cleanup(func() { _, _ = r.raw.ImageRemove(context.Background(), name, image.RemoveOptions{Force: true}) })
	img, err := d.EnsureImage(ctxT(t), driver.ImageSpec{Name: name, Archive: &driver.ArchiveSource{Path: tarPath}, Labels: map[string]string{"k": "v"}})
	if err != nil {
		t.Fatal(err)
	}
	if img.ID == "" || img.Labels["k"] != "v" {
		t.Errorf("imported image %+v", img)
	}
	inst, err := d.CreateInstance(ctxT(t), driver.InstanceSpec{Name: "imp", Image: img.ID, Command: []string{"sleep", "60"}, Running: true})
	if err != nil {
		t.Fatal(err)
	}
	mustExec(t, d, inst.ID, "true")
	if err := d.DeleteInstance(ctxT(t), inst.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteImage(ctxT(t), name, img.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.InspectImage(ctxT(t), name); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("image after delete: %v, want ErrNotFound", err)
	}
}

// busyboxRootfs is a directory holding bin/busybox and its applet links.
func busyboxRootfs(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "rootfs")
	for _, sub := range []string{"bin", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"sh", "sleep", "true", "cat"} {
		if err := os.Symlink("busybox", filepath.Join(dir, "bin", a)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
