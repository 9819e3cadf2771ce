package docker_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	_ "github.com/sandboxfleet/terraform-provider-sandbox/internal/driver/docker"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testgate"
)

const gateEnv = "SANDBOX_ACC_DOCKER"

// fixture is shared by the whole test binary: the busybox image and the
// agent build, both made once in TestMain and removed at the end.
var fixture struct {
	skip     string
	err      error
	image    string // busybox image ID
	tag      string
	agentDir string
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if !testgate.Enabled(gateEnv) {
		fixture.skip = gateEnv + " is not set"
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "docker-driver-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fixture.agentDir = dir
	defer os.RemoveAll(dir)
	if err := buildAgent(dir); err != nil {
		fmt.Fprintln(os.Stderr, "build sandbox-agent:", err)
		return 1
	}
	// A failure is reported by every test through engine(t): the gate is
	// set, so an engine that does not answer fails the tests.
	// The driver builds its helper image on demand; remove it afterwards
	// unless it was already there.
	if !imageExists("sandbox-seed:v1") {
		defer removeImage("sandbox-seed:v1")
	}
	defer removeUnusedAgentVolumes("")
	if testgate.Enabled("SANDBOX_ACC_TLS") && os.Getenv("SANDBOX_TEST_TLS_SOCKET") != "" {
		// The TLS engine exists for tests only: drop the driver's caches there.
		defer removeDriverCaches(os.Getenv("SANDBOX_TEST_TLS_SOCKET"))
	}
	if fixture.err = buildBusybox(dir); fixture.err == nil {
		defer removeImage(fixture.tag)
	}
	return m.Run()
}

// buildAgent builds the static agent and points the driver at it.
func buildAgent(dir string) error {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	out := filepath.Join(dir, "sandbox-agent")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/sandbox-agent")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v: %s", err, b)
	}
	return os.Setenv("SANDBOX_AGENT_BINARY", out)
}

// buildBusybox builds a FROM scratch busybox image through the driver.
func buildBusybox(dir string) error {
	ctxDir := filepath.Join(dir, "busybox")
	if err := os.MkdirAll(ctxDir, 0o755); err != nil {
		return err
	}
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		return fmt.Errorf("%v (apt-get install busybox-static)", err)
	}
	if err := os.WriteFile(filepath.Join(ctxDir, "busybox"), bb, 0o755); err != nil {
		return err
	}
	df := "FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\",\"--install\",\"-s\",\"/bin\"]\n"
	if err := os.WriteFile(filepath.Join(ctxDir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return err
	}
	d, err := driver.Open(context.Background(), driver.Config{Driver: driver.Docker, Name: "fixture"})
	if err != nil {
		return err
	}
	defer d.Close()
	fixture.tag = "sandbox-test/busybox:" + randName()
	img, err := d.EnsureImage(context.Background(), driver.ImageSpec{Name: fixture.tag, Build: &driver.BuildSource{ContextDir: ctxDir}})
	if err != nil {
		return err
	}
	fixture.image = img.ID
	return nil
}

func randName() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// engine skips without the gate and fails when the engine does not answer.
func engine(t *testing.T) {
	t.Helper()
	if fixture.skip != "" {
		t.Skip(fixture.skip)
	}
	if fixture.err != nil {
		t.Fatalf("docker engine not usable (%s is set): %v", gateEnv, fixture.err)
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// openBackend opens a driver on a fresh backend and removes everything it
// labelled at the end, whether the test passed or not.
func openBackend(t *testing.T, dc driver.DockerConfig) driver.Driver {
	t.Helper()
	d, _ := openNamed(t, dc)
	return d
}

// openNamed is openBackend that also returns the backend's name.
func openNamed(t *testing.T, dc driver.DockerConfig) (driver.Driver, string) {
	t.Helper()
	engine(t)
	name := "tf-acc-" + randName()
	d, err := driver.Open(context.Background(), driver.Config{Driver: driver.Docker, Name: name, Docker: &dc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Close()
		cleanupBackend(t, name)
	})
	return d, name
}

func rawClient(t *testing.T) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func backendFilter(name string) filters.Args {
	return filters.NewArgs(filters.Arg("label", driver.LabelBackend+"="+name))
}

// cleanupBackend removes every container, volume and the network of backend.
func cleanupBackend(t *testing.T, name string) {
	ctx := context.Background()
	cli := rawClient(t)
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: backendFilter(name)})
	if err != nil {
		t.Errorf("cleanup %s: %v", name, err)
	}
	for _, c := range list {
		_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}
	vols, _ := cli.VolumeList(ctx, volume.ListOptions{Filters: backendFilter(name)})
	for _, v := range vols.Volumes {
		_ = cli.VolumeRemove(ctx, v.Name, true)
	}
	_ = cli.NetworkRemove(ctx, "sandbox-"+name)
}

func removeImage(ref string) {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return
	}
	defer cli.Close()
	// Test cleanups run in reverse order, so containers of this image may
	// still exist; an image in use would only be untagged and left dangling.
	ctx := context.Background()
	list, _ := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("ancestor", ref))})
	for _, c := range list {
		_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}
	_, _ = cli.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true})
}

// removeUnusedAgentVolumes removes the agent copies remote tests made on the
// engine at host ("" = the default); the driver makes them again on demand
// and volumes in use stay.
func removeUnusedAgentVolumes(host string) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return
	}
	defer cli.Close()
	ctx := context.Background()
	vols, _ := cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("name", "sandbox-agent-"))})
	for _, v := range vols.Volumes {
		_ = cli.VolumeRemove(ctx, v.Name, false)
	}
}

// removeDriverCaches removes the seed image and unused agent volumes.
func removeDriverCaches(host string) {
	removeUnusedAgentVolumes(host)
	cli, err := client.NewClientWithOpts(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		return
	}
	defer cli.Close()
	_, _ = cli.ImageRemove(context.Background(), "sandbox-seed:v1", image.RemoveOptions{PruneChildren: true})
}

func imageExists(ref string) bool {
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err != nil {
		return false
	}
	defer cli.Close()
	_, err = cli.ImageInspect(context.Background(), ref)
	return err == nil
}

// countContainers counts the backend's containers on the engine.
func countContainers(t *testing.T, backend string) int {
	t.Helper()
	list, err := rawClient(t).ContainerList(context.Background(), container.ListOptions{All: true, Filters: backendFilter(backend)})
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}

// mustExec runs a command and fails unless it exits 0.
func mustExec(t *testing.T, d driver.Driver, id string, cmd ...string) string {
	t.Helper()
	res, err := d.Exec(ctxT(t), id, driver.ExecSpec{Command: cmd})
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec %v: exit %d: %s%s", cmd, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

// waitFor polls until cond holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, info := cond()
		if ok {
			return
		}
		last = info
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s (last: %s)", what, last)
}

func readAll(r io.Reader) string {
	b, _ := io.ReadAll(r)
	return string(b)
}
