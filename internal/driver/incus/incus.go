// Package incus is the Incus backend: system containers and virtual
// machines on a local or remote Incus server, through the Incus Go client.
//
// Decisions the provider and users rely on:
//
//   - Connection: the local socket (address "" or unix://PATH, else
//     $INCUS_SOCKET, else the client's default), or https:// with
//     client_cert_file/client_key_file and the server pinned by
//     server_cert_file or server_fingerprint (else the system CAs must
//     accept it). Nothing is written to the user's Incus configuration.
//     One connection per driver, opened on first use, keep-alive on.
//   - Scope: the project (default: the backend name), created with its own
//     images, profiles and volumes and labelled as ours; DeleteScope deletes
//     only a project it created, and only when empty.
//   - Names: instance BACKEND-NAME (the instance ID; Incus registers instance
//     names in the DNS of a shared network), volume NAME, image alias NAME.
//   - Labels: user.<key> config keys (keys.go).
//   - command: replaces the image's init as PID 1 through raw.lxc (lxc.go),
//     behind the sandbox agent's init when security.init or lifetime is set;
//     arguments with whitespace go through /bin/sh and a script, since LXC
//     splits lxc.init.cmd at spaces. Without command the image's init runs
//     (a system container). VMs take no command.
//   - The agent is bind-mounted read-only into every local container at
//     /.sandbox/sandbox-agent; remote servers get a copy when it is needed.
//   - lifetime: kept by the agent as PID 1, so it needs command; without
//     command it is rejected (watcherCommand says what is missing).
//   - ports: proxy devices (ports.go); VMs are reached on their own address.
//   - network: none = no NIC, isolated = the backend's network (default
//     incusbr0), bridge = the NIC network of the default project's default
//     profile.
//
// Later: a trust token for first contact and remote servers over SSH.
package incus

import (
	"context"
	"fmt"
	"sync"

	incus "github.com/lxc/incus/v6/client"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/portalloc"
)

func init() { driver.Register(driver.Incus, Open) }

// Defaults for the engine-side names a backend uses.
const (
	DefaultStoragePool = "default"
	DefaultNetwork     = "incusbr0"
)

// Driver is one Incus backend. The server connection is opened on first use
// and shared by every call; the client is safe for concurrent use.
type Driver struct {
	backend string
	cfg     driver.IncusConfig
	labels  map[string]string // provider-level labels
	secrets driver.Secrets    // the provider's SSH key, for ssh:// addresses
	remote  bool              // https or ssh: the daemon is not on this host

	mu       sync.Mutex
	server   incus.InstanceServer // scoped to the backend's project; nil until connected
	images   imageCache           // image reference -> fingerprint, briefly
	imageMu  sync.Mutex           // serialises image resolution (and copies)
	agentIn  sync.Map             // instance name -> true: the agent is inside
	workdirs sync.Map             // instance name + "\x00" + dir -> true: exists

	loopback *portalloc.Allocator // loopback_ip strategy, per-process reservations
	portMu   sync.Mutex           // guards ports
	ports    map[int]bool         // dynamic host ports reserved in this process
}

var _ driver.Driver = (*Driver)(nil)

// Open returns a driver for cfg without contacting the server.
func Open(_ context.Context, cfg driver.Config) (driver.Driver, error) {
	if cfg.Incus == nil {
		return nil, fmt.Errorf("incus backend %q: no incus settings in the backend configuration", cfg.Name)
	}
	ic := *cfg.Incus
	if ic.Project == "" {
		ic.Project = cfg.Name
	}
	if ic.StoragePool == "" {
		ic.StoragePool = DefaultStoragePool
	}
	if ic.Network == "" {
		ic.Network = DefaultNetwork
	}
	if ic.PortStrategy == "" {
		ic.PortStrategy = driver.PortStrategyLoopbackIP
	}
	remote, err := isRemote(ic.Address)
	if err != nil {
		return nil, fmt.Errorf("incus backend %q: %w", cfg.Name, err)
	}
	return &Driver{
		backend:  cfg.Name,
		cfg:      ic,
		labels:   cfg.Labels,
		secrets:  cfg.Secrets,
		remote:   remote,
		loopback: portalloc.NewAllocator(portalloc.Loopback),
		ports:    map[int]bool{},
	}, nil
}

// client returns the project-scoped connection, connecting on first use. A
// failed connect is not cached, so a later call retries.
func (d *Driver) client(ctx context.Context) (incus.InstanceServer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.server != nil {
		return d.server, nil
	}
	// The Incus client keeps the context it connected with for every later
	// request, so it must not be the (soon cancelled) context of one call.
	s, err := connect(context.WithoutCancel(ctx), d.cfg, d.secrets)
	if err != nil {
		return nil, fmt.Errorf("incus backend %q: connect to %s: %v: %w", d.backend, d.address(), err, driver.ErrUnavailable)
	}
	d.server = s.UseProject(d.cfg.Project)
	return d.server, nil
}

// global returns the connection outside any project (for server-wide calls
// such as projects and resources).
func (d *Driver) global(ctx context.Context) (incus.InstanceServer, error) {
	s, err := d.client(ctx)
	if err != nil {
		return nil, err
	}
	return s.UseProject("default"), nil
}

func (d *Driver) address() string {
	if d.cfg.Address == "" {
		return "the local socket"
	}
	return d.cfg.Address
}

// Close drops the connection.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.server != nil {
		d.server.Disconnect()
		d.server = nil
	}
	return nil
}

// errf wraps err with the backend and the object it concerns, translating
// Incus' "not found" into driver.ErrNotFound.
func (d *Driver) errf(err error, format string, a ...any) error {
	if err == nil {
		return nil
	}
	what := fmt.Sprintf(format, a...)
	return fmt.Errorf("incus backend %q: %s: %w", d.backend, what, translate(err))
}
