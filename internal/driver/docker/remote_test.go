package docker_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testgate"
)

// remoteEnv returns the named variables, skipping without gate and failing
// when the gate is set but the set-up script's variables are missing.
func remoteEnv(t *testing.T, gate string, names ...string) map[string]string {
	t.Helper()
	testgate.Skip(t, gate)
	out := map[string]string{}
	for _, n := range names {
		if out[n] = os.Getenv(n); out[n] == "" {
			t.Fatalf("%s is set but %s is not (source /var/lib/sandbox-test/env.sh after scripts/setup-*.sh)", gate, n)
		}
	}
	return out
}

func openRemote(t *testing.T, dc driver.DockerConfig) (driver.Driver, string) {
	t.Helper()
	name := "tf-acc-" + randName()
	d, err := driver.Open(context.Background(), driver.Config{Driver: driver.Docker, Name: name, Docker: &dc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d, name
}

// cleanupEngine removes what a remote test made on the engine behind sock.
func cleanupEngine(t *testing.T, sock, backend string, images ...string) {
	cli, err := client.NewClientWithOpts(client.WithHost(sock), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Error(err)
		return
	}
	defer cli.Close()
	ctx := context.Background()
	list, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: backendFilter(backend)})
	for _, c := range list {
		_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}
	_ = cli.NetworkRemove(ctx, "sandbox-"+backend)
	for _, img := range images {
		_, _ = cli.ImageRemove(ctx, img, image.RemoveOptions{Force: true, PruneChildren: true})
	}
	// The agent volume is the remote engine's copy of the agent binary.
	vols, _ := cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("name", "sandbox-agent-"))})
	for _, v := range vols.Volumes {
		_ = cli.VolumeRemove(ctx, v.Name, false) // in use by others: kept
	}
}

// remoteSmoke exercises a remote engine: the agent arrives through a volume,
// a lifetime is accepted, files, exec and a published port work.
func remoteSmoke(t *testing.T, d driver.Driver, img string) {
	t.Helper()
	ctx := ctxT(t)
	spec := webSpec("remote", "over-remote")
	spec.Image, spec.Lifetime = img, time.Hour
	inst, err := d.CreateInstance(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	if inst.ExpiresAt.IsZero() {
		t.Errorf("no expiry recorded")
	}
	if got := mustExec(t, d, inst.ID, "cat", "/proc/1/cmdline"); !strings.Contains(got, "sandbox-agent") {
		t.Errorf("PID 1 is not the agent: %q", got)
	}
	if got := httpGet(t, "http://"+inst.Endpoints["http"]+"/"); got != "over-remote" {
		t.Errorf("endpoint %s: %q", inst.Endpoints["http"], got)
	}
	if list, err := d.ListInstances(ctx); err != nil || len(list) != 1 {
		t.Errorf("list: %v %v", list, err)
	}
	if err := d.DeleteInstance(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
}

func TestTLSRemote(t *testing.T) {
	env := remoteEnv(t, "SANDBOX_ACC_TLS", "SANDBOX_TEST_TLS_HOST", "SANDBOX_TEST_TLS_CA", "SANDBOX_TEST_TLS_CERT",
		"SANDBOX_TEST_TLS_KEY", "SANDBOX_TEST_TLS_WRONG_CA", "SANDBOX_TEST_TLS_SOCKET")
	engine(t)
	good := driver.DockerConfig{Host: env["SANDBOX_TEST_TLS_HOST"], TLSCAFile: env["SANDBOX_TEST_TLS_CA"],
		TLSCertFile: env["SANDBOX_TEST_TLS_CERT"], TLSKeyFile: env["SANDBOX_TEST_TLS_KEY"]}

	wrong := good
	wrong.TLSCAFile = env["SANDBOX_TEST_TLS_WRONG_CA"]
	dw, _ := openRemote(t, wrong)
	if _, err := dw.Info(ctxT(t)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("wrong CA: %v, want a certificate error", err)
	}

	d, backend := openRemote(t, good)
	tag := "sandbox-test/busybox-tls:" + randName()
	t.Cleanup(func() { cleanupEngine(t, env["SANDBOX_TEST_TLS_SOCKET"], backend, tag, "sandbox-seed:v1") })
	info, err := d.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if !info.Has(driver.CapLifetime) {
		t.Errorf("capabilities %v", info.Capabilities)
	}
	img, err := d.EnsureImage(ctxT(t), driver.ImageSpec{Name: tag, Build: &driver.BuildSource{ContextDir: busyboxContext(t)}})
	if err != nil {
		t.Fatal(err)
	}
	remoteSmoke(t, d, img.ID)
}

func TestSSHRemote(t *testing.T) {
	env := remoteEnv(t, "SANDBOX_ACC_SSH", "SANDBOX_TEST_SSH_HOST", "SANDBOX_TEST_SSH_KEY", "SANDBOX_TEST_SSH_KNOWN_HOSTS")
	engine(t)
	d, backend := openRemote(t, driver.DockerConfig{Host: env["SANDBOX_TEST_SSH_HOST"],
		SSHKeyFile: env["SANDBOX_TEST_SSH_KEY"], KnownHostsFile: env["SANDBOX_TEST_SSH_KNOWN_HOSTS"]})
	// The SSH server forwards to this machine's engine.
	t.Cleanup(func() { cleanupEngine(t, "unix:///var/run/docker.sock", backend) })
	info, err := d.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if info.CPUs < 1 {
		t.Errorf("info %+v", info)
	}
	remoteSmoke(t, d, fixture.image)

	// The agent volume removed behind the driver's back is refilled.
	cli := rawClient(t)
	vols, err := cli.VolumeList(ctxT(t), volume.ListOptions{Filters: filters.NewArgs(filters.Arg("name", "sandbox-agent-"))})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vols.Volumes {
		_ = cli.VolumeRemove(ctxT(t), v.Name, false)
	}
	inst, err := d.CreateInstance(ctxT(t), driver.InstanceSpec{Name: "again", Image: fixture.image,
		Command: []string{"sleep", "60"}, Running: true, Lifetime: time.Hour})
	if err != nil {
		t.Fatalf("after the agent volume was removed: %v", err)
	}
	mustExec(t, d, inst.ID, "true")
}

// busyboxContext writes the busybox build context to a temp dir.
func busyboxContext(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"Dockerfile": "FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\",\"--install\",\"-s\",\"/bin\"]\n"})
	if err := os.WriteFile(filepath.Join(dir, "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
