// Package incus is the Incus backend: system containers and virtual
// machines on a local or remote Incus server, through the Incus Go client.
//
// Decisions the provider and users rely on:
//
//   - Connection (connect.go): the local socket (address "" or unix://PATH,
//     else $INCUS_SOCKET, else the client's default); https:// with
//     client_cert_file/client_key_file and the server pinned by
//     server_cert_file or server_fingerprint (else the system CAs must
//     accept it); or ssh://USER@HOST[:PORT][/SOCKET], the server's unix
//     socket reached through internal/sshconn by replacing the client
//     transport's dial (HTTP, websockets and SFTP alike). Nothing is written
//     to the user's Incus configuration. One connection per driver, opened
//     on first use, keep-alive on.
//   - Trust token: over https://, when the server does not trust the client
//     certificate, the token in the environment variable named by
//     trust_token_env is presented once (POST /1.0/certificates), which adds
//     the certificate to the trust store. The token is a secret, so only the
//     variable's name is in the handle.
//   - Scope: the project (default: the backend name), created with its own
//     images, profiles and volumes and labelled as ours; DeleteScope deletes
//     only a project it created, and only when empty.
//   - Names: instance BACKEND-NAME (the instance ID; Incus registers instance
//     names in the DNS of a shared network), volume NAME, image alias NAME.
//   - Labels: user.<key> config keys (keys.go).
//   - command: replaces the image's init as PID 1 through raw.lxc (lxc.go),
//     behind the sandbox agent's init when security.init or lifetime is set
//     or when an argument holds whitespace (LXC splits lxc.init.cmd at
//     spaces; the agent reads such a command from an argv file). Without
//     command the image's init runs (a system container). VMs take no
//     command.
//   - The agent is bind-mounted read-only into every local container at
//     /.sandbox/sandbox-agent; remote servers get a copy when it is needed.
//   - lifetime: with command, the agent as PID 1 stops everything at the
//     deadline; without, a detached `agent poweroff --at` powers the
//     instance off (watcherCommand), for which containers keep
//     CAP_SYS_BOOT. A system container launches it from its LXC start hook
//     (lxc.go), so on every start, also a restart outside Terraform; a VM
//     gets it through its guest agent after each start the driver makes.
//   - type = "vm": refused before anything is created when the server has
//     no qemu driver (checkVMs); the provider checks the same at plan time.
//   - ports: proxy devices (ports.go); VMs are reached on their own address.
//   - network: none = no NIC, isolated = the backend's network (default
//     incusbr0), bridge = the NIC network of the default project's default
//     profile.
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
	DefaultNetwork     = driver.IncusDefaultNetwork
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
	stops    sync.Map             // instance name -> *api.Operation: a stop of ours still running

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
