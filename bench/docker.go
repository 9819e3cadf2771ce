package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

const (
	dockerImage   = "sandbox-bench/busybox:latest"
	seedImage     = "sandbox-seed:v1"   // the provider's helper image on remote engines
	labelBench    = "sandbox-bench.run" // on everything the engine side creates
	labelRelated  = "sandbox-bench.unrelated"
	envFile       = "/var/lib/sandbox-test/env.sh"
	localSocket   = "unix:///var/run/docker.sock"
	sleepSeconds  = "86400"
	dockerGoal    = "<= 1.10x engine"
	sshGoal       = "<= 1.30x socket"
	incusGoal     = "<= 1.15x engine"
	dockerTimeout = 20 * time.Minute
)

func (b *bench) sizes(full ...int) []int {
	if len(b.o.sizes) > 0 {
		return b.o.sizes
	}
	if b.o.quick {
		return []int{3, 5}[:min(len(full), 2)]
	}
	return full
}

// dockerClient connects like the provider does, keeping connections alive.
func dockerClient(ctx context.Context, host string, tlsFiles ...string) (*client.Client, error) {
	// Connections kept alive, enough for the parallelism (the client's
	// default keeps 2 idle per host and redials the rest).
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}
	opts := []client.Opt{client.WithHTTPClient(&http.Client{Transport: tr, CheckRedirect: client.CheckRedirect}),
		client.WithHost(host), client.WithAPIVersionNegotiation()}
	if len(tlsFiles) == 3 {
		opts = append(opts, client.WithTLSClientConfig(tlsFiles[0], tlsFiles[1], tlsFiles[2]))
	}
	cli, err := client.NewClientWithOpts(opts...)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(pctx); err != nil {
		cli.Close()
		return nil, err
	}
	return cli, nil
}

// ensureDockerImage builds the busybox fixture (FROM scratch + busybox-static)
// on the engine, and removes it at the end.
func (b *bench) ensureDockerImage(ctx context.Context, cli *client.Client, where string) error {
	bb, err := staticBusybox()
	if err != nil {
		return err
	}
	data, err := os.ReadFile(bb)
	if err != nil {
		return err
	}
	dockerfile := "FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\nCMD [\"/bin/sh\"]\n"
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, []byte(dockerfile)}, {"busybox", 0o755, data}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	resp, err := cli.ImageBuild(ctx, &buf, build.ImageBuildOptions{Tags: []string{dockerImage}, Remove: true,
		ForceRemove: true, Labels: map[string]string{labelBench: "1"}, Version: build.BuilderV1})
	if err != nil {
		return fmt.Errorf("build %s on %s: %w", dockerImage, where, err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var msg struct {
			Error string `json:"error"`
		}
		if err := dec.Decode(&msg); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return fmt.Errorf("build %s on %s: %w", dockerImage, where, err)
		}
		if msg.Error != "" {
			return fmt.Errorf("build %s on %s: %s", dockerImage, where, msg.Error)
		}
	}
	b.onCleanup("remove image "+dockerImage+" on "+where, func(ctx context.Context) error {
		_, err := cli.ImageRemove(ctx, dockerImage, image.RemoveOptions{PruneChildren: true})
		if cerrdefs.IsNotFound(err) || cerrdefs.IsConflict(err) {
			return nil // another run of the bench still uses it
		}
		return err
	})
	return nil
}

func staticBusybox() (string, error) {
	for _, p := range []string{"/bin/busybox", "/usr/bin/busybox"} {
		if _, err := os.Stat(p); err == nil {
			if out, _ := exec.Command("ldd", p).CombinedOutput(); !strings.Contains(string(out), "=>") {
				return p, nil
			}
		}
	}
	return "", skipf("no static busybox (apt-get install -y busybox-static)")
}

// dockerBackendHCL is the configuration of a Docker fleet.
func dockerBackendHCL(backend, dockerAttrs string) string {
	return fmt.Sprintf(`resource "sandbox_backend" "b" {
  name = %q
  docker = {
%s
  }
}

resource "sandbox_instance" "w" {
  count   = var.n
  backend = sandbox_backend.b.handle
  image   = %q
  name    = "w${count.index}"
  command = ["sleep", %q]
}
`, backend, dockerAttrs, dockerImage, sleepSeconds)
}

// dockerEngine creates the same containers as the provider through the
// Docker Go client: create+start parallelism at a time, then remove.
type dockerEngine struct {
	cli       *client.Client
	par       int
	provBack  string // the provider's backend (to capture from)
	engBack   string // the engine side's own scope
	network   string
	cfg       *container.Config
	host      *container.HostConfig
	netCreate network.CreateOptions
	provNet   string
}

func newDockerEngine(b *bench, cli *client.Client, provBackend string) *dockerEngine {
	e := &dockerEngine{cli: cli, par: b.o.parallelism, provBack: provBackend, engBack: provBackend + "-eng"}
	e.network = "sandbox-" + e.engBack
	b.onCleanup("engine-side containers of "+e.engBack, e.sweep)
	return e
}

func (e *dockerEngine) capture(ctx context.Context) error {
	list, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: scopeFilter(e.provBack)})
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return fmt.Errorf("the provider's backend %q has no containers", e.provBack)
	}
	c, err := e.cli.ContainerInspect(ctx, list[0].ID)
	if err != nil {
		return err
	}
	e.cfg, e.host = c.Config, c.HostConfig
	e.provNet = string(c.HostConfig.NetworkMode)
	if n, err := e.cli.NetworkInspect(ctx, e.provNet, network.InspectOptions{}); err == nil {
		e.netCreate = network.CreateOptions{Driver: n.Driver, Internal: n.Internal, Options: n.Options, Attachable: n.Attachable}
	} else {
		e.provNet = "" // not a network of its own
	}
	return nil
}

func (e *dockerEngine) name(i int) string { return fmt.Sprintf("%s-w%d", e.engBack, i) }

func (e *dockerEngine) create(ctx context.Context, n int) error {
	if e.provNet != "" {
		opts := e.netCreate
		opts.Labels = driver.ObjectLabels(e.engBack, nil, map[string]string{labelBench: "1"})
		if _, err := e.cli.NetworkCreate(ctx, e.network, opts); err != nil {
			return err
		}
	}
	return parallel(ctx, n, e.par, func(ctx context.Context, i int) error {
		cfg := *e.cfg
		name := e.name(i)
		cfg.Hostname = fmt.Sprintf("w%d", i)
		cfg.Labels = map[string]string{}
		for k, v := range e.cfg.Labels {
			cfg.Labels[k] = v
		}
		for k, v := range driver.ScopeLabels(e.engBack) {
			cfg.Labels[k] = v
		}
		cfg.Labels[driver.LabelName] = cfg.Hostname
		cfg.Labels[labelBench] = "1"
		host := *e.host
		var netCfg *network.NetworkingConfig
		if e.provNet != "" {
			host.NetworkMode = container.NetworkMode(e.network)
			netCfg = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
				e.network: {Aliases: []string{cfg.Hostname}}}}
		}
		created, err := e.cli.ContainerCreate(ctx, &cfg, &host, netCfg, nil, name)
		if err != nil {
			return err
		}
		return e.cli.ContainerStart(ctx, created.ID, container.StartOptions{})
	})
}

func (e *dockerEngine) list(ctx context.Context) (int, error) {
	l, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: scopeFilter(e.engBack)})
	return len(l), err
}

func (e *dockerEngine) remove(ctx context.Context, n int) error {
	err := parallel(ctx, n, e.par, func(ctx context.Context, i int) error {
		return e.cli.ContainerRemove(ctx, e.name(i), container.RemoveOptions{Force: true, RemoveVolumes: true})
	})
	if err != nil {
		return err
	}
	if e.provNet != "" {
		// One attempt, as the provider's DeleteScope: a retry loop here
		// would put the wait for a stale endpoint into the engine's time.
		if err := e.cli.NetworkRemove(ctx, e.network); err != nil && !cerrdefs.IsNotFound(err) {
			if !staleEndpoint(err) {
				return err
			}
			logf("WARNING: dockerd kept a stale endpoint on %s after every container was removed (a dockerd 20.10 race; only a daemon restart clears it): network leaked", e.network)
			stale.Add(1)
		}
	}
	return nil
}

// stale counts networks dockerd would not remove (stale endpoints).
var stale atomic.Int32

func staleEndpoint(err error) bool {
	return err != nil && strings.Contains(err.Error(), "active endpoints")
}

// removeNetwork retries while the engine still reports endpoints of
// containers it has just removed (dockerd 20.10 under load).
func removeNetwork(ctx context.Context, cli *client.Client, name string) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := cli.NetworkRemove(ctx, name)
		if err == nil || cerrdefs.IsNotFound(err) {
			return nil
		}
		if !strings.Contains(err.Error(), "active endpoints") || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sweep removes whatever the engine side left (after a failure).
func (e *dockerEngine) sweep(ctx context.Context) error {
	l, err := e.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: scopeFilter(e.engBack)})
	if err != nil {
		return err
	}
	for _, c := range l {
		_ = e.cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}
	return removeNetwork(ctx, e.cli, e.network)
}

func scopeFilter(backend string) filters.Args {
	f := filters.NewArgs()
	for k, v := range driver.ScopeLabels(backend) {
		f.Add("label", k+"="+v)
	}
	return f
}

// sweepProviderDocker removes containers and the network of a provider
// backend that a failed terraform destroy left behind.
func (b *bench) sweepProviderDocker(cli *client.Client, backend string) {
	b.onCleanup("provider containers of "+backend, func(ctx context.Context) error {
		l, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: scopeFilter(backend)})
		if err != nil {
			return err
		}
		for _, c := range l {
			logf("clean-up: removing leftover container %s", strings.Join(c.Names, ","))
			_ = cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}
		return removeNetwork(ctx, cli, "sandbox-"+backend)
	})
}

// unrelated creates (without starting) count containers no backend owns,
// for the re-plan-with-a-busy-host row; the returned func removes them.
func (b *bench) unrelated(ctx context.Context, cli *client.Client, count int) (func(context.Context) error, error) {
	value := b.runID
	f := filters.NewArgs(filters.Arg("label", labelRelated+"="+value))
	removeAll := func(ctx context.Context) error {
		l, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
		if err != nil {
			return err
		}
		return parallel(ctx, len(l), b.o.parallelism, func(ctx context.Context, i int) error {
			err := cli.ContainerRemove(ctx, l[i].ID, container.RemoveOptions{Force: true})
			if cerrdefs.IsNotFound(err) {
				return nil
			}
			return err
		})
	}
	b.onCleanup("unrelated containers", removeAll)
	err := parallel(ctx, count, b.o.parallelism, func(ctx context.Context, i int) error {
		_, err := cli.ContainerCreate(ctx,
			&container.Config{Image: dockerImage, Cmd: []string{"sleep", sleepSeconds}, Labels: map[string]string{labelRelated: value, labelBench: "1"}},
			&container.HostConfig{NetworkMode: "none"}, nil, nil, fmt.Sprintf("sandbox-bench-unrelated-%s-%d", value, i))
		return err
	})
	return removeAll, err
}

// runDocker: fleets of 10 and 50 on the local socket, a re-plan of 50
// with unrelated containers on the host, and for each size the engine's
// own price of the backend network (netcost.go).
func runDocker(ctx context.Context, b *bench) error {
	cli, err := dockerClient(ctx, localSocket)
	if err != nil {
		return skipf("dockerd does not answer on %s: %v", localSocket, err)
	}
	if err := b.ensureDockerImage(ctx, cli, "the local dockerd"); err != nil {
		return err
	}
	backend := "bench-" + b.runID
	wd, err := b.newWorkdir("docker", dockerBackendHCL(backend, fmt.Sprintf("    host = %q", localSocket)))
	if err != nil {
		return err
	}
	b.sweepProviderDocker(cli, backend)
	eng := newDockerEngine(b, cli, backend)
	f := &fleet{label: "docker", wd: wd, eng: eng}
	sizes := b.sizes(10, 50)
	big := sizes[len(sizes)-1]
	var busy []time.Duration
	var busyEmpty []bool
	if b.o.unrelated > 0 {
		f.afterReplan = func(ctx context.Context, n, rep int) error {
			if n != big {
				return nil
			}
			logf("docker n=%d: creating %d unrelated containers (not started)", n, b.o.unrelated)
			removeAll, err := b.unrelated(ctx, cli, b.o.unrelated)
			if err == nil {
				logf("docker n=%d: re-plan with %d unrelated containers", n, b.o.unrelated)
				var r tfResult
				r, err = wd.run(ctx, "plan", n, "-detailed-exitcode")
				if err == nil && r.exitCode != 0 && r.exitCode != 2 {
					err = r.must("plan")
				}
				busy, busyEmpty = append(busy, r.wall), append(busyEmpty, r.exitCode == 0)
			}
			if rerr := removeAll(ctx); err == nil {
				err = rerr
			}
			return err
		}
	}
	if err := b.floor(ctx, f); err != nil {
		return err
	}
	for _, n := range sizes {
		m, err := b.measure(ctx, f, n)
		if err != nil {
			return err
		}
		b.addRows("docker", n, m, dockerGoal, dockerGoal)
		if b.o.netCost {
			if err := b.netCost(ctx, eng, n); err != nil {
				return err
			}
		}
		if n == big && len(busy) > 0 {
			quiet := median(m.replan)
			b.table.add(row{backend: "docker", n: n, op: fmt.Sprintf("re-plan, %d unrelated", b.o.unrelated),
				prov: median(busy), eng: quiet, engWhat: "quiet host", goal: "< 0.5 s, not growing",
				note: "empty: " + emptyNote(busyEmpty) + "; ratio = busy / quiet host"})
		}
	}
	return nil
}

// remoteEnv reads the test set-up's env.sh (SANDBOX_TEST_*).
func remoteEnv() map[string]string {
	out := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "SANDBOX_TEST_") {
			out[k] = v
		}
	}
	if _, err := os.Stat(envFile); err != nil {
		return out
	}
	cmd := exec.Command("bash", "-c", ". "+envFile+" >/dev/null 2>&1; env -0")
	b, err := cmd.Output()
	if err != nil {
		return out
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "SANDBOX_TEST_") {
			out[k] = v
		}
	}
	return out
}

// dropAgentArtifacts removes, at the end, the agent volume and helper image
// the provider leaves on a remote engine (it uploads the agent once per
// engine and keeps it for every backend), if this run made them.
func (b *bench) dropAgentArtifacts(ctx context.Context, cli *client.Client, where string) {
	agentLabel := filters.NewArgs(filters.Arg("label", "sandbox.agent-sha256"))
	before := map[string]bool{}
	if l, err := cli.VolumeList(ctx, volume.ListOptions{Filters: agentLabel}); err == nil {
		for _, v := range l.Volumes {
			before[v.Name] = true
		}
	}
	_, err := cli.ImageInspect(ctx, seedImage)
	hadSeed := err == nil
	b.onCleanup("agent volume and helper image on "+where, func(ctx context.Context) error {
		if l, err := cli.VolumeList(ctx, volume.ListOptions{Filters: agentLabel}); err == nil {
			for _, v := range l.Volumes {
				if !before[v.Name] {
					_ = cli.VolumeRemove(ctx, v.Name, false) // in use by someone else: keep
				}
			}
		}
		if !hadSeed {
			_, _ = cli.ImageRemove(ctx, seedImage, image.RemoveOptions{})
		}
		return nil
	})
}

// runSSH: the fleet of 50 over SSH to the same dockerd, beside the same
// fleet over the local socket (measured in this run by runDocker).
func runSSH(ctx context.Context, b *bench) error {
	env := remoteEnv()
	host, key, kh := env["SANDBOX_TEST_SSH_HOST"], env["SANDBOX_TEST_SSH_KEY"], env["SANDBOX_TEST_SSH_KNOWN_HOSTS"]
	if host == "" || key == "" || kh == "" {
		return skipf("no SSH test host (run scripts/setup-sshd.sh; it writes %s)", envFile)
	}
	cli, err := dockerClient(ctx, localSocket)
	if err != nil {
		return skipf("dockerd does not answer on %s: %v", localSocket, err)
	}
	if err := b.ensureDockerImage(ctx, cli, "the local dockerd"); err != nil {
		return err
	}
	backend := "bench-ssh-" + b.runID
	wd, err := b.newWorkdir("ssh", dockerBackendHCL(backend, fmt.Sprintf("    host             = %q\n    ssh_key_file     = %q\n    known_hosts_file = %q", host, key, kh)))
	if err != nil {
		return err
	}
	b.sweepProviderDocker(cli, backend)
	b.dropAgentArtifacts(ctx, cli, "the local dockerd")
	f := &fleet{label: "docker/ssh", wd: wd}
	if err := b.warmUp(ctx, f); err != nil {
		return err
	}
	for _, n := range b.sizes(50) {
		m, err := b.measure(ctx, f, n)
		if err != nil {
			return err
		}
		for _, op := range []struct {
			name string
			v    []time.Duration
		}{{"apply", m.apply}, {"re-plan", m.replan}, {"destroy", m.destroy}} {
			r := row{backend: "docker/ssh", n: n, op: op.name, prov: median(op.v), goal: sshGoal}
			switch op.name {
			case "apply":
				r.note = cpuNote(m.cpuApply) + rssSuffix(m.rssApply)
			case "re-plan":
				r.note = cpuNote(m.cpuReplan)
			case "destroy":
				r.note = cpuNote(m.cpuDestroy) + rssSuffix(m.rssDestroy)
			}
			if sock, ok := b.table.find("docker", n, op.name); ok {
				r.eng, r.engWhat = sock, "socket provider"
			} else {
				r.note = strings.TrimPrefix(r.note+"; no socket row to compare (run with -backends docker,ssh)", "; ")
			}
			if op.name == "re-plan" {
				r.note = strings.TrimPrefix(r.note+"; empty: "+emptyNote(m.replanEmpty), "; ")
			}
			b.table.add(r)
		}
	}
	return nil
}

// runTLS: the fleet of 50 on the second dockerd over TCP+TLS, beside the
// same work through the Docker client over the same TLS connection.
func runTLS(ctx context.Context, b *bench) error {
	env := remoteEnv()
	host, ca, cert, key := env["SANDBOX_TEST_TLS_HOST"], env["SANDBOX_TEST_TLS_CA"], env["SANDBOX_TEST_TLS_CERT"], env["SANDBOX_TEST_TLS_KEY"]
	if host == "" || ca == "" {
		return skipf("no TLS dockerd (run scripts/setup-docker-tls.sh; it writes %s)", envFile)
	}
	cli, err := dockerClient(ctx, host, ca, cert, key)
	if err != nil {
		return skipf("the TLS dockerd does not answer on %s: %v", host, err)
	}
	if err := b.ensureDockerImage(ctx, cli, "the TLS dockerd"); err != nil {
		return err
	}
	backend := "bench-tls-" + b.runID
	wd, err := b.newWorkdir("tls", dockerBackendHCL(backend, fmt.Sprintf(
		"    host          = %q\n    tls_ca_file   = %q\n    tls_cert_file = %q\n    tls_key_file  = %q", host, ca, cert, key)))
	if err != nil {
		return err
	}
	b.sweepProviderDocker(cli, backend)
	b.dropAgentArtifacts(ctx, cli, "the TLS dockerd")
	f := &fleet{label: "docker/tls", wd: wd, eng: newDockerEngine(b, cli, backend)}
	if err := b.warmUp(ctx, f); err != nil {
		return err
	}
	for _, n := range b.sizes(50) {
		m, err := b.measure(ctx, f, n)
		if err != nil {
			return err
		}
		b.addRows("docker/tls", n, m, dockerGoal, dockerGoal)
	}
	return nil
}
