package docker

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/sshconn"
)

func init() {
	driver.Register(driver.Docker, Open)
}

// Driver is a connected Docker backend. Safe for concurrent use.
type Driver struct {
	cfg     driver.Config
	dc      driver.DockerConfig
	backend string
	ep      endpoint

	mu  sync.Mutex // guards cli, ssh and inf
	cli *client.Client
	ssh *sshDial // ssh:// only: remembers why the last dial failed
	inf *engineInfo

	scopeMu    sync.Mutex
	scopeReady bool

	images imageCache
	agent  agentState
}

// engineInfo is what the driver needs to remember about the engine.
type engineInfo struct {
	info        driver.Info
	arch        string // Go-style architecture of the engine host
	diskLimit   bool
	storageDrv  string
	podman      bool
	apiVersion  string
	backingFS   string
	memoryLimit bool
}

var (
	_ driver.Driver       = (*Driver)(nil)
	_ driver.ScopeChecker = (*Driver)(nil)
)

// Open validates cfg; the connection itself is made on first use.
func Open(_ context.Context, cfg driver.Config) (driver.Driver, error) {
	if cfg.Name == "" {
		return nil, errors.New("docker backend: name is required")
	}
	dc := driver.DockerConfig{}
	if cfg.Docker != nil {
		dc = *cfg.Docker
	}
	switch dc.PortStrategy {
	case "":
		dc.PortStrategy = driver.PortStrategyDynamic
	case driver.PortStrategyDynamic, driver.PortStrategyLoopbackIP:
	default:
		return nil, fmt.Errorf("docker backend %q: port_strategy %q: %w", cfg.Name, dc.PortStrategy, driver.ErrUnsupported)
	}
	ep, err := parseEndpoint(&dc)
	if err != nil {
		return nil, fmt.Errorf("docker backend %q: %w", cfg.Name, err)
	}
	return &Driver{
		cfg:     cfg,
		dc:      dc,
		backend: cfg.Name,
		ep:      ep,
		images:  imageCache{byID: map[string]imageDefaults{}},
	}, nil
}

// api returns the client, creating it on first use. A failure is not
// cached, so a later call retries (e.g. after fixing a certificate file).
func (d *Driver) api() (*client.Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cli != nil {
		return d.cli, nil
	}
	cli, dial, err := newClient(d.cfg)
	if err != nil {
		return nil, fmt.Errorf("docker backend %q: %w", d.backend, err)
	}
	d.cli, d.ssh = cli, dial
	return cli, nil
}

// Close releases idle connections.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cli == nil {
		return nil
	}
	err := d.cli.Close()
	d.cli = nil
	return err
}

// wrap adds backend and object context and maps engine errors to the
// driver sentinels.
func (d *Driver) wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	what := fmt.Sprintf(format, args...)
	err = podmanError(err) // Podman: 500 answers that mean a conflict (podman.go)
	if terr := d.transportError(err); terr != nil {
		return fmt.Errorf("docker backend %q: %s: %w", d.backend, what, terr)
	}
	switch {
	case errors.Is(err, driver.ErrNotFound), errors.Is(err, driver.ErrAlreadyExists),
		errors.Is(err, driver.ErrUnsupported), errors.Is(err, driver.ErrUnavailable):
		return fmt.Errorf("docker backend %q: %s: %w", d.backend, what, err)
	case cerrdefs.IsNotFound(err):
		return fmt.Errorf("docker backend %q: %s: %w (%v)", d.backend, what, driver.ErrNotFound, err)
	case cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in use"):
		return fmt.Errorf("docker backend %q: %s: %w (%v)", d.backend, what, driver.ErrAlreadyExists, err)
	case errUnreachable(err):
		return fmt.Errorf("docker backend %q: %s: engine at %s: %w (%v)", d.backend, what, d.ep.host, driver.ErrUnavailable, err)
	}
	return fmt.Errorf("docker backend %q: %s: %w", d.backend, what, err)
}

// transportError explains a failure of the SSH transport, or returns nil.
// An untrusted host key and refused credentials are reported as themselves
// (*sshconn.HostKeyError, sshconn.ErrAuth), not as an unavailable engine:
// retrying does not help, trusting the key or fixing the key file does. A
// connection failure carries the SSH dial's own error instead of the Docker
// client's generic "Cannot connect to the Docker daemon at tcp://docker.ssh".
func (d *Driver) transportError(err error) error {
	d.mu.Lock()
	dial := d.ssh
	d.mu.Unlock()
	cause, dialFailed := err, false
	if dialErr := dial.last(); dialErr != nil && errUnreachable(err) {
		cause, dialFailed = dialErr, true
	}
	var hk *sshconn.HostKeyError
	switch {
	case errors.As(cause, &hk):
		return hk
	case errors.Is(cause, sshconn.ErrAuth):
		return cause
	case dialFailed:
		return fmt.Errorf("engine at %s: %w: %w", d.ep.host, driver.ErrUnavailable, cause)
	}
	return nil
}

// Info reports the engine and its capabilities.
func (d *Driver) Info(ctx context.Context) (driver.Info, error) {
	ei, err := d.engine(ctx)
	if err != nil {
		return driver.Info{}, err
	}
	return ei.info, nil
}

// engine returns the engine facts, asking the engine once per driver.
func (d *Driver) engine(ctx context.Context) (*engineInfo, error) {
	d.mu.Lock()
	inf := d.inf
	d.mu.Unlock()
	if inf != nil {
		return inf, nil
	}
	cli, err := d.api()
	if err != nil {
		return nil, err
	}
	sys, err := cli.Info(ctx)
	if err != nil {
		return nil, d.wrap(err, "engine info")
	}
	ver, err := cli.ServerVersion(ctx)
	if err != nil {
		return nil, d.wrap(err, "engine version")
	}
	inf = d.describe(sys, ver.Version, ver.APIVersion, isPodman(ver.Components))
	inf.diskLimit = d.probeDiskLimit(ctx, inf)
	inf.info.Capabilities = d.capabilities(inf)
	if inf.podman { // what this Podman cannot do (podman.go)
		inf.info.Capabilities = podmanCapabilities(sys, inf.info.Capabilities)
	}
	d.mu.Lock()
	d.inf = inf
	d.mu.Unlock()
	return inf, nil
}

func isPodman(components []types.ComponentVersion) bool {
	for _, c := range components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			return true
		}
	}
	return false
}

func (d *Driver) describe(sys system.Info, version, api string, podman bool) *engineInfo {
	ei := &engineInfo{
		arch:        goArch(sys.Architecture),
		storageDrv:  sys.Driver,
		podman:      podman,
		apiVersion:  api,
		memoryLimit: sys.MemoryLimit,
	}
	for _, kv := range sys.DriverStatus {
		if len(kv) == 2 && kv[0] == "Backing Filesystem" {
			ei.backingFS = kv[1]
		}
	}
	name := "docker"
	if podman {
		name = "podman"
	}
	ei.info = driver.Info{
		EngineVersion: name + " " + version,
		OS:            sys.OSType,
		Arch:          ei.arch,
		CPUs:          int64(sys.NCPU),
		MemoryBytes:   sys.MemTotal,
	}
	return ei
}

// capabilities lists what this backend can do; lifetime depends on the
// agent being usable on the engine's architecture.
func (d *Driver) capabilities(ei *engineInfo) []string {
	caps := []string{
		driver.CapContainers, driver.CapBuild, driver.CapPull, driver.CapArchive,
		driver.CapVolumes, driver.CapNetworkNone, driver.CapNetworkIso,
		driver.CapNetworkBrdg, driver.CapCPULimit, driver.CapPidsLimit,
		driver.CapExec, driver.CapFiles, driver.CapDynamicPort,
	}
	// Docker does not publish ports of containers on an internal network.
	if !d.dc.Internal {
		caps = append(caps, driver.CapPorts)
	}
	if ei.memoryLimit || ei.podman {
		caps = append(caps, driver.CapMemoryLimit)
	}
	// 127.0.0.x addresses are only reachable where the engine runs.
	if d.ep.local || isLoopbackHost(d.ep.u.Hostname()) {
		caps = append(caps, driver.CapLoopbackPort)
	}
	if ei.diskLimit {
		caps = append(caps, driver.CapDiskLimit)
	}
	if _, err := agentBinary(ei.arch); err == nil {
		caps = append(caps, driver.CapLifetime)
	}
	return caps
}

// goArch maps the engine's uname architecture to GOARCH spelling.
func goArch(a string) string {
	switch a {
	case "x86_64", "amd64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	case "":
		return runtime.GOARCH
	}
	return a
}
