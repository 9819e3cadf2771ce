package docker_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/drivertest"
)

func TestInfo(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{})
	info, err := d.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(info.EngineVersion, "docker ") || info.OS != "linux" || info.CPUs < 1 || info.MemoryBytes <= 0 {
		t.Errorf("info = %+v", info)
	}
	for _, c := range []string{driver.CapContainers, driver.CapLifetime, driver.CapLoopbackPort, driver.CapBuild} {
		if !info.Has(c) {
			t.Errorf("missing capability %s in %v", c, info.Capabilities)
		}
	}
	// ext4 overlay2 here: no size option; and never VMs.
	if info.Has(driver.CapVMs) || info.Has(driver.CapDiskLimit) {
		t.Errorf("unexpected capabilities %v", info.Capabilities)
	}
}

func TestUnreachableEngineIsUnavailable(t *testing.T) {
	engine(t)
	d, err := driver.Open(context.Background(), driver.Config{Driver: driver.Docker, Name: "x",
		Docker: &driver.DockerConfig{Host: "unix:///nonexistent/docker.sock"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Info(ctxT(t)); !errors.Is(err, driver.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

func TestPlainTCPRefused(t *testing.T) {
	engine(t)
	d, err := driver.Open(context.Background(), driver.Config{Driver: driver.Docker, Name: "x",
		Docker: &driver.DockerConfig{Host: "tcp://192.0.2.1:2375"}})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Info(ctxT(t)); err == nil || !strings.Contains(err.Error(), "plain TCP") {
		t.Fatalf("err = %v, want plain TCP refusal", err)
	}
}

func TestScopeConcurrentIdempotent(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{Internal: true})
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for i := 0; i < 10; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- d.EnsureScope(ctxT(t)) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	info, err := d.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	_ = info
	nets, err := rawClient(t).NetworkList(ctxT(t), network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", driver.LabelManagedBy+"="+driver.ManagedByValue))})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, nw := range nets {
		if strings.HasPrefix(nw.Name, "sandbox-tf-acc-") && nw.Labels[driver.LabelBackend] != "" && "sandbox-"+nw.Labels[driver.LabelBackend] == nw.Name {
			if nw.Internal {
				n++
			}
		}
	}
	if n < 1 {
		t.Fatalf("no internal backend network found")
	}
	if err := d.DeleteScope(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteScope(ctxT(t)); err != nil {
		t.Fatalf("second DeleteScope: %v", err)
	}
}

func TestNetworkRemovedBehindBack(t *testing.T) {
	d, backend := openNamed(t, driver.DockerConfig{})
	if err := d.EnsureScope(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	if err := rawClient(t).NetworkRemove(ctxT(t), "sandbox-"+backend); err != nil {
		t.Fatal(err)
	}
	inst, err := d.CreateInstance(ctxT(t), driver.InstanceSpec{Name: "n", Image: fixture.image, Command: []string{"sleep", "60"}, Running: true})
	if err != nil || inst.IPAddress == "" {
		t.Fatalf("%+v %v", inst, err)
	}
}

// A backend whose network still has a sandbox on it is not deleted, and the
// error says so (not the stale-endpoint advice, which is for a network no
// container uses).
func TestDeleteScopeInUse(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{})
	if _, err := d.CreateInstance(ctxT(t), driver.InstanceSpec{Name: "user", Image: fixture.image, Command: []string{"sleep", "60"}, Running: true}); err != nil {
		t.Fatal(err)
	}
	err := d.DeleteScope(ctxT(t))
	var advised *driver.AdvisedError
	if !errors.Is(err, driver.ErrInUse) || errors.As(err, &advised) || strings.Contains(err.Error(), "moby#42119") {
		t.Fatalf("err = %v", err)
	}
}

func TestInstanceLifecycle(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{})
	ctx := ctxT(t)
	inst, err := d.CreateInstance(ctx, driver.InstanceSpec{
		Name: "life", Image: fixture.image, Command: []string{"sleep", "3600"},
		Env: map[string]string{"TASK": "demo"}, Workdir: "/tmp", Labels: map[string]string{"role": "worker"},
		CPUs: 0.5, MemoryBytes: 64 << 20, PidsLimit: 64, Network: driver.NetworkIsolated, Running: true,
		Security: driver.Security{NoNewPrivileges: true, CapDrop: []string{"ALL"}, Init: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if inst.Status != driver.StatusRunning || inst.IPAddress == "" || inst.Name != "life" || inst.Labels["role"] != "worker" {
		t.Fatalf("created %+v", inst)
	}
	if got := mustExec(t, d, inst.ID, "sh", "-c", "echo $TASK $(pwd)"); got != "demo /tmp\n" {
		t.Errorf("env/workdir: %q", got)
	}
	if got := mustExec(t, d, inst.ID, "cat", "/proc/1/cmdline"); !strings.Contains(got, "sandbox-agent") {
		t.Errorf("PID 1 is not the agent: %q", got)
	}
	res, err := d.Exec(ctx, inst.ID, driver.ExecSpec{Command: []string{"sh", "-c", "cat; echo err >&2; exit 3"}, Stdin: []byte("in")})
	if err != nil || res.ExitCode != 3 || string(res.Stdout) != "in" || string(res.Stderr) != "err\n" {
		t.Fatalf("exec: %+v %v", res, err)
	}
	list, err := d.ListInstances(ctx)
	if err != nil || len(list) != 1 || list[0].ID != inst.ID || list[0].IPAddress != inst.IPAddress || list[0].Status != driver.StatusRunning {
		t.Fatalf("list: %+v %v", list, err)
	}
	if byName, err := d.InspectInstance(ctx, "life"); err != nil || byName.ID != inst.ID {
		t.Fatalf("inspect by name: %+v %v", byName, err)
	}
	if err := d.UpdateInstance(ctx, inst.ID, driver.Limits{CPUs: 1, MemoryBytes: 128 << 20, PidsLimit: 100}); err != nil {
		t.Fatal(err)
	}
	pids := "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max"
	if got := mustExec(t, d, inst.ID, "sh", "-c", pids); strings.TrimSpace(got) != "100" {
		t.Errorf("pids.max after update: %q", got)
	}
	if err := d.StopInstance(ctx, inst.ID, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.InspectInstance(ctx, inst.ID); got.Status != driver.StatusStopped {
		t.Fatalf("after stop: %s", got.Status)
	}
	if err := d.StartInstance(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if got, _ := d.InspectInstance(ctx, inst.ID); got.Status != driver.StatusRunning {
		t.Fatalf("after start: %s", got.Status)
	}
	if err := d.DeleteInstance(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := d.InspectInstance(ctx, inst.ID); !driver.IsNotFound(err) {
		t.Fatalf("after delete: %v", err)
	}
	if err := d.DeleteInstance(ctx, inst.ID); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

func TestCreateStoppedAndImageDefaultCommand(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{})
	ctx := ctxT(t)
	// No command: the image (scratch busybox) has none, so the agent
	// waits forever as PID 1.
	inst, err := d.CreateInstance(ctx, driver.InstanceSpec{Name: "idle", Image: fixture.image,
		Network: driver.NetworkNone, Security: driver.Security{Init: true}})
	if err != nil {
		t.Fatal(err)
	}
	if inst.Status != driver.StatusCreated || inst.IPAddress != "" {
		t.Fatalf("created: %+v", inst)
	}
	if err := d.StartInstance(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if got, _ := d.InspectInstance(ctx, inst.ID); got.Status != driver.StatusRunning {
		t.Fatalf("agent without command should keep running, got %s", got.Status)
	}
}

func TestReadOnlyRootfsWithAgent(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{})
	inst, err := d.CreateInstance(ctxT(t), driver.InstanceSpec{Name: "ro", Image: fixture.image, Running: true,
		Command: []string{"sleep", "3600"}, Lifetime: time.Hour, User: "1000:1000",
		Security: driver.Security{ReadOnlyRootfs: true, Init: true, NoNewPrivileges: true, CapDrop: []string{"ALL"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, d, inst.ID, "sh", "-c", "touch /x 2>/dev/null || echo ro; id -u"); got != "ro\n1000\n" {
		t.Fatalf("%q", got)
	}
	// The agent's state directory stays writable for services.
	res, err := d.Exec(ctxT(t), inst.ID, driver.ExecSpec{Command: []string{"sh", "-c", "echo up"}, User: "0",
		Detach: true, LogPath: "/.sandbox/run/svc.log"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("service on a read-only rootfs: %+v %v", res, err)
	}
}

func TestNameConflict(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{})
	spec := driver.InstanceSpec{Name: "dup", Image: fixture.image, Command: []string{"sleep", "60"}}
	if _, err := d.CreateInstance(ctxT(t), spec); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateInstance(ctxT(t), spec); !errors.Is(err, driver.ErrAlreadyExists) {
		t.Fatalf("err = %v, want ErrAlreadyExists", err)
	}
}

// httpGet fetches url until it answers or the timeout passes.
func httpGet(t *testing.T, url string) string {
	t.Helper()
	var body string
	waitFor(t, 15*time.Second, "GET "+url, func() (bool, string) {
		resp, err := http.Get(url)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		body = readAll(resp.Body)
		return resp.StatusCode == 200, resp.Status
	})
	return body
}

func webSpec(name, content string) driver.InstanceSpec {
	return driver.InstanceSpec{
		Name: name, Image: fixture.image, Running: true,
		Command: []string{"httpd", "-f", "-p", "8080", "-h", "/www"},
		Files:   []driver.File{{Path: "/www/index.html", Content: []byte(content), Mode: 0o644}},
		Ports:   []driver.PortSpec{{Name: "http", Port: 8080, Protocol: "tcp"}},
	}
}

func TestPortsDynamic(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{PortStrategy: driver.PortStrategyDynamic})
	inst, err := d.CreateInstance(ctxT(t), webSpec("web", "dynamic"))
	if err != nil {
		t.Fatal(err)
	}
	ep := inst.Endpoints["http"]
	if !strings.HasPrefix(ep, "127.0.0.1:") {
		t.Fatalf("endpoints %v", inst.Endpoints)
	}
	if got := httpGet(t, "http://"+ep+"/"); got != "dynamic" {
		t.Fatalf("body %q", got)
	}
	list, _ := d.ListInstances(ctxT(t))
	if len(list) != 1 || list[0].Endpoints["http"] != ep {
		t.Fatalf("list endpoints: %+v", list)
	}
}

func TestPortsLoopbackTwoBackends(t *testing.T) {
	a := openBackend(t, driver.DockerConfig{PortStrategy: driver.PortStrategyLoopbackIP})
	b := openBackend(t, driver.DockerConfig{PortStrategy: driver.PortStrategyLoopbackIP})
	ia, err := a.CreateInstance(ctxT(t), webSpec("web", "from-a"))
	if err != nil {
		t.Fatal(err)
	}
	ib, err := b.CreateInstance(ctxT(t), webSpec("web", "from-b"))
	if err != nil {
		t.Fatal(err)
	}
	if ia.LoopbackIP == "" || ia.LoopbackIP == ib.LoopbackIP {
		t.Fatalf("loopback IPs %q and %q", ia.LoopbackIP, ib.LoopbackIP)
	}
	if ia.Endpoints["http"] != ia.LoopbackIP+":8080" {
		t.Fatalf("endpoints %v", ia.Endpoints)
	}
	if got := httpGet(t, "http://"+ia.Endpoints["http"]+"/"); got != "from-a" {
		t.Fatalf("a: %q", got)
	}
	if got := httpGet(t, "http://"+ib.Endpoints["http"]+"/"); got != "from-b" {
		t.Fatalf("b: %q", got)
	}
	la, _ := a.ListInstances(ctxT(t))
	lb, _ := b.ListInstances(ctxT(t))
	if len(la) != 1 || len(lb) != 1 || la[0].ID != ia.ID || lb[0].ID != ib.ID || la[0].Endpoints["http"] != ia.Endpoints["http"] {
		t.Fatalf("lists interfere: %+v / %+v", la, lb)
	}
	// Deleting b's instance does not touch a's.
	if err := b.DeleteInstance(ctxT(t), ib.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := a.InspectInstance(ctxT(t), ia.ID); err != nil || got.Status != driver.StatusRunning {
		t.Fatalf("a after b's delete: %+v %v", got, err)
	}
}

func TestLoopbackConcurrentUnique(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{PortStrategy: driver.PortStrategyLoopbackIP})
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			spec := driver.InstanceSpec{Name: fmt.Sprintf("c%d", i), Image: fixture.image, Command: []string{"sleep", "60"},
				Ports: []driver.PortSpec{{Name: "p", Port: 9000}}}
			inst, err := d.CreateInstance(ctxT(t), spec)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if seen[inst.LoopbackIP] {
				t.Errorf("address %s handed out twice", inst.LoopbackIP)
			}
			seen[inst.LoopbackIP] = true
		}(i)
	}
	wg.Wait()
}

func TestFilesAndSeededVolume(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{})
	ctx := ctxT(t)
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(src, "a.txt"), []byte("alpha"), 0o644)
	_ = os.WriteFile(filepath.Join(src, "sub", "b.sh"), []byte("beta"), 0o750)
	if _, err := d.CreateVolume(ctx, driver.VolumeSpec{Name: "data", SourceDir: src}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateVolume(ctx, driver.VolumeSpec{Name: "data"}); !errors.Is(err, driver.ErrAlreadyExists) {
		t.Fatalf("second create: %v", err)
	}
	if v, err := d.InspectVolume(ctx, "data"); err != nil || v.Labels[driver.LabelName] != "data" {
		t.Fatalf("inspect volume: %+v %v", v, err)
	}
	local := filepath.Join(t.TempDir(), "local.txt")
	_ = os.WriteFile(local, []byte("from-disk"), 0o600)
	inst, err := d.CreateInstance(ctx, driver.InstanceSpec{
		Name: "files", Image: fixture.image, Command: []string{"sleep", "3600"}, Running: true,
		Files: []driver.File{
			{Path: "/workspace/task.json", Content: []byte("{}"), Mode: 0o640},
			{Path: "/tmp/x/local.txt", Source: local},
		},
		Mounts: []driver.Mount{{Volume: "data", Target: "/data", ReadOnly: true}},
	})
	if err != nil {
		t.Fatal(err)
	}
	checks := map[string]string{
		"cat /data/a.txt /data/sub/b.sh":         "alphabeta",
		"stat -c %a /data/sub/b.sh":              "750\n",
		"cat /workspace/task.json":               "{}",
		"stat -c %a /workspace/task.json":        "640\n",
		"cat /tmp/x/local.txt":                   "from-disk",
		"touch /data/new 2>/dev/null || echo ro": "ro\n",
	}
	for cmd, want := range checks {
		if got := mustExec(t, d, inst.ID, "sh", "-c", cmd); got != want {
			t.Errorf("%s: %q, want %q", cmd, got, want)
		}
	}
	// Copying into an existing directory keeps that directory's mode.
	mustExec(t, d, inst.ID, "mkdir", "-m", "1777", "/shared")
	if err := d.CopyFiles(ctx, inst.ID, []driver.File{{Path: "/shared/later", Content: []byte("l")}}); err != nil {
		t.Fatal(err)
	}
	if got := mustExec(t, d, inst.ID, "sh", "-c", "cat /shared/later; stat -c %a /shared"); got != "l1777\n" {
		t.Errorf("later: %q", got)
	}
	if err := d.DeleteInstance(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteVolume(ctx, "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.InspectVolume(ctx, "data"); !driver.IsNotFound(err) {
		t.Fatalf("volume after delete: %v", err)
	}
	if err := d.DeleteVolume(ctx, "data"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
}

func TestLifetimeExpires(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{})
	inst, err := d.CreateInstance(ctxT(t), driver.InstanceSpec{Name: "short", Image: fixture.image,
		Command: []string{"sleep", "3600"}, Running: true, Lifetime: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if inst.ExpiresAt.IsZero() || time.Until(inst.ExpiresAt) > 3*time.Second {
		t.Fatalf("expires_at %v", inst.ExpiresAt)
	}
	waitFor(t, 20*time.Second, "expiry", func() (bool, string) {
		got, err := d.InspectInstance(ctxT(t), inst.ID)
		return err == nil && got.Status == driver.StatusExpired, fmt.Sprint(got.Status, err)
	})
	list, _ := d.ListInstances(ctxT(t))
	if len(list) != 1 || list[0].Status != driver.StatusExpired {
		t.Fatalf("list: %+v", list)
	}
}

func TestDetachedExec(t *testing.T) {
	d := openBackend(t, driver.DockerConfig{})
	inst, err := d.CreateInstance(ctxT(t), driver.InstanceSpec{Name: "svc", Image: fixture.image,
		Command: []string{"sleep", "3600"}, Running: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Exec(ctxT(t), inst.ID, driver.ExecSpec{Command: []string{"sh", "-c", "echo started; sleep 3600"},
		Detach: true, LogPath: "/tmp/svc.log"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("detach: %+v %v", res, err)
	}
	waitFor(t, 5*time.Second, "service log", func() (bool, string) {
		out, _ := d.Exec(ctxT(t), inst.ID, driver.ExecSpec{Command: []string{"cat", "/tmp/svc.log"}})
		return string(out.Stdout) == "started\n", string(out.Stdout)
	})
}

func TestCreateFailureLeavesNothing(t *testing.T) {
	d, backend := openNamed(t, driver.DockerConfig{PortStrategy: driver.PortStrategyLoopbackIP})
	ctx := ctxT(t)
	if _, err := d.CreateInstance(ctx, driver.InstanceSpec{Name: "bad", Image: "sandbox-test/does-not-exist:1", Running: true}); err == nil {
		t.Fatal("bad image accepted")
	}
	// Fails after the container exists: files cannot go into a read-only rootfs.
	spec := webSpec("ro", "x")
	spec.Security.ReadOnlyRootfs = true
	if _, err := d.CreateInstance(ctx, spec); err == nil {
		t.Fatal("copy into read-only rootfs accepted")
	}
	// Fails at start: the command does not exist.
	if _, err := d.CreateInstance(ctx, driver.InstanceSpec{Name: "nocmd", Image: fixture.image, Command: []string{"/nonexistent"}, Running: true}); err == nil {
		t.Fatal("missing command accepted")
	}
	if _, err := d.CreateInstance(ctx, driver.InstanceSpec{Name: "disk", Image: fixture.image, DiskBytes: 1 << 30}); !errors.Is(err, driver.ErrUnsupported) {
		t.Fatalf("disk: %v, want ErrUnsupported", err)
	}
	if n := countContainers(t, backend); n != 0 {
		t.Fatalf("%d containers left behind", n)
	}
	// The reserved address was released: the next sandbox gets a free one.
	inst, err := d.CreateInstance(ctx, webSpec("ok", "ok"))
	if err != nil || inst.LoopbackIP == "" {
		t.Fatalf("%+v %v", inst, err)
	}
}

// TestConformance runs the shared driver suite against the local engine.
func TestConformance(t *testing.T) {
	engine(t)
	drivertest.Run(t, drivertest.Harness{
		Open: func(t *testing.T) driver.Driver {
			return openBackend(t, driver.DockerConfig{})
		},
		Image: fixture.tag,
	})
}

// Instances made without the agent (e.g. by an older provider) still get
// detached commands, through the engine's own detached exec.
func TestDetachedExecWithoutAgent(t *testing.T) {
	d, backend := openNamed(t, driver.DockerConfig{})
	cli := rawClient(t)
	c, err := cli.ContainerCreate(ctxT(t), &container.Config{Image: fixture.image, Cmd: []string{"sleep", "600"},
		Labels: driver.ScopeLabels(backend)}, &container.HostConfig{NetworkMode: "none"}, nil, nil, backend+"-plain")
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.ContainerStart(ctxT(t), c.ID, container.StartOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := d.Exec(ctxT(t), c.ID, driver.ExecSpec{Command: []string{"sh", "-c", "echo hi > /detached"}, Detach: true})
	if err != nil {
		t.Fatalf("%+v %v", res, err)
	}
	waitFor(t, 5*time.Second, "detached command", func() (bool, string) {
		out, _ := d.Exec(ctxT(t), c.ID, driver.ExecSpec{Command: []string{"cat", "/detached"}})
		return string(out.Stdout) == "hi\n", string(out.Stdout) + string(out.Stderr)
	})
}
