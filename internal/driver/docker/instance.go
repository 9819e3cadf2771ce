package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// createPlan collects what CreateInstance sends, plus what it must undo.
type createPlan struct {
	name     string
	cfg      *container.Config
	host     *container.HostConfig
	net      *network.NetworkingConfig
	release  func() // frees a reserved loopback address
	netMode  string
	loopback string
}

// CreateInstance creates the container, copies files in and starts it when
// spec.Running. Whatever fails, the container is removed and a reserved
// loopback address released, so nothing is left behind.
func (d *Driver) CreateInstance(ctx context.Context, spec driver.InstanceSpec) (driver.Instance, error) {
	if spec.Type != "" && spec.Type != driver.TypeContainer {
		return driver.Instance{}, fmt.Errorf("docker backend %q: instance %q: type %q: %w", d.backend, spec.Name, spec.Type, driver.ErrUnsupported)
	}
	inst, err := d.createOnce(ctx, spec)
	switch {
	case err == nil:
	case d.networkMissing(err, spec):
		// The network was removed behind our back (the scope is cached as
		// ready): recreate it and try once more.
		d.forgetScope()
		inst, err = d.createOnce(ctx, spec)
	case !d.ep.local && strings.Contains(err.Error(), path.Dir(agent.PathInInstance)+"/"):
		// The remote agent volume was removed since we filled it (the
		// engine then mounts an empty one: no agent, no run/).
		d.forgetAgentVolume()
		inst, err = d.createOnce(ctx, spec)
	}
	return inst, err
}

// networkMissing reports a failure caused by the backend network being gone.
func (d *Driver) networkMissing(err error, spec driver.InstanceSpec) bool {
	isolated := spec.Network == "" || spec.Network == driver.NetworkIsolated
	return isolated && strings.Contains(err.Error(), "network "+d.networkName()+" not found")
}

func (d *Driver) forgetScope() {
	d.scopeMu.Lock()
	d.scopeReady = false
	d.scopeMu.Unlock()
}

func (d *Driver) createOnce(ctx context.Context, spec driver.InstanceSpec) (inst driver.Instance, err error) {
	cli, err := d.api()
	if err != nil {
		return driver.Instance{}, err
	}
	plan, err := d.plan(ctx, spec)
	if plan != nil && plan.release != nil {
		defer plan.release()
	}
	if err != nil {
		return driver.Instance{}, err
	}
	created, err := cli.ContainerCreate(ctx, plan.cfg, plan.host, plan.net, nil, plan.name)
	if errors.Is(d.wrap(err, ""), driver.ErrAlreadyExists) && d.removeInterrupted(ctx, cli, plan.name, spec) {
		created, err = cli.ContainerCreate(ctx, plan.cfg, plan.host, plan.net, nil, plan.name)
	}
	if err != nil {
		if ctx.Err() != nil && !isConflict(err) {
			// Cancelled mid-request: the engine may have created it anyway.
			_ = cli.ContainerRemove(context.WithoutCancel(ctx), plan.name, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}
		return driver.Instance{}, d.wrap(err, "create container %q", plan.name)
	}
	defer func() {
		if err != nil {
			// The caller's context may be cancelled: clean up regardless.
			_ = cli.ContainerRemove(context.WithoutCancel(ctx), created.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}
	}()
	if len(spec.Files) > 0 {
		if err = d.CopyFiles(ctx, created.ID, spec.Files); err != nil {
			return driver.Instance{}, err
		}
	}
	if err = d.prepareStateDir(ctx, created.ID, spec); err != nil {
		return driver.Instance{}, err
	}
	if !spec.Running {
		return d.inspect(ctx, created.ID)
	}
	if err = cli.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
		return driver.Instance{}, d.wrap(err, "start container %q", plan.name)
	}
	// A command that cannot start fails the create (startcheck.go). Its last
	// inspect, taken after the start, has the address on the network.
	c, err := d.checkStarted(ctx, created.ID)
	if err != nil {
		return driver.Instance{}, err
	}
	return d.fromInspect(c, created.ID)
}

// plan translates spec into the engine's create request.
func (d *Driver) plan(ctx context.Context, spec driver.InstanceSpec) (*createPlan, error) {
	p := &createPlan{name: d.objectName(spec.Name)}
	labels := driver.ObjectLabels(d.backend, nil, spec.Labels)
	labels[driver.LabelName] = spec.Name
	p.cfg = &container.Config{
		Hostname:   spec.Name,
		Image:      spec.Image,
		Env:        envList(spec.Env),
		WorkingDir: spec.Workdir,
		User:       spec.User,
		Labels:     labels,
	}
	p.host = &container.HostConfig{
		Privileged:     spec.Security.Privileged,
		ReadonlyRootfs: spec.Security.ReadOnlyRootfs,
		CapAdd:         spec.Security.CapAdd,
		CapDrop:        spec.Security.CapDrop,
		Resources:      resources(driver.Limits{CPUs: spec.CPUs, MemoryBytes: spec.MemoryBytes, PidsLimit: spec.PidsLimit}),
	}
	if spec.Security.NoNewPrivileges {
		p.host.SecurityOpt = []string{"no-new-privileges"}
	}
	steps := []func(context.Context, *createPlan, driver.InstanceSpec) error{
		d.planPids, d.planDisk, d.planNetwork, d.planPorts, d.planMounts, d.planInit,
		d.planPodman, // Podman only: image label, limits it cannot enforce (podman.go)
	}
	for _, step := range steps {
		if err := step(ctx, p, spec); err != nil {
			return p, err
		}
	}
	return p, nil
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// resources maps limits; memory swap equals memory so the limit is real.
func resources(l driver.Limits) container.Resources {
	r := container.Resources{NanoCPUs: int64(l.CPUs * 1e9)}
	if l.MemoryBytes > 0 {
		r.Memory = l.MemoryBytes
		r.MemorySwap = l.MemoryBytes
	}
	if l.PidsLimit != 0 { // -1 (driver.PidsUnlimited) lifts a limit
		pids := l.PidsLimit
		r.PidsLimit = &pids
	}
	return r
}

// planPids gives a container driver.DefaultPidsLimit when the spec leaves
// the pids limit unset and the engine can enforce one (a Podman without the
// pids controller cannot: its capabilities say so).
func (d *Driver) planPids(ctx context.Context, p *createPlan, spec driver.InstanceSpec) error {
	if spec.PidsLimit != 0 {
		return nil // resources() applied it
	}
	ei, err := d.engine(ctx)
	if err != nil {
		return err
	}
	if n := driver.EffectivePidsLimit(0, spec.Type, ei.info.Has(driver.CapPidsLimit)); n > 0 {
		p.host.PidsLimit = &n
	}
	return nil
}

func (d *Driver) planDisk(ctx context.Context, p *createPlan, spec driver.InstanceSpec) error {
	if spec.DiskBytes <= 0 {
		return nil
	}
	ei, err := d.engine(ctx)
	if err != nil {
		return err
	}
	if !ei.diskLimit {
		return fmt.Errorf("docker backend %q: instance %q: disk limit: storage driver %s on %s has no size option (needs overlay2 on xfs with pquota, btrfs or zfs): %w",
			d.backend, spec.Name, ei.storageDrv, ei.backingFS, driver.ErrUnsupported)
	}
	p.host.StorageOpt = map[string]string{"size": strconv.FormatInt(spec.DiskBytes, 10)}
	return nil
}

func (d *Driver) planNetwork(ctx context.Context, p *createPlan, spec driver.InstanceSpec) error {
	switch spec.Network {
	case driver.NetworkNone:
		p.netMode = "none"
		if len(spec.Ports) > 0 {
			return fmt.Errorf("docker backend %q: instance %q: ports need a network, not %q", d.backend, spec.Name, spec.Network)
		}
	case driver.NetworkBridge:
		p.netMode = "bridge"
	case driver.NetworkIsolated, "":
		if err := d.EnsureScope(ctx); err != nil {
			return err
		}
		p.netMode = d.networkName()
		p.net = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
			p.netMode: {Aliases: []string{spec.Name}},
		}}
	default:
		return fmt.Errorf("docker backend %q: instance %q: network %q: %w", d.backend, spec.Name, spec.Network, driver.ErrUnsupported)
	}
	p.host.NetworkMode = container.NetworkMode(p.netMode)
	return nil
}

// planPorts publishes ports: loopback_ip binds each port to the same number
// on the instance's own 127.0.0.x; dynamic lets the engine choose, bound to
// 127.0.0.1 when endpoints are advertised on loopback, else to all addresses.
func (d *Driver) planPorts(ctx context.Context, p *createPlan, spec driver.InstanceSpec) error {
	if len(spec.Ports) == 0 {
		return nil
	}
	hostIP := "0.0.0.0"
	if isLoopbackHost(d.ep.advertiseHost(&d.dc)) {
		hostIP = "127.0.0.1"
	}
	if d.dc.PortStrategy == driver.PortStrategyLoopbackIP {
		if !d.ep.local && !isLoopbackHost(d.ep.u.Hostname()) {
			return fmt.Errorf("docker backend %q: instance %q: port_strategy %q publishes on 127.0.0.x of the engine host %s, which this machine cannot reach; use %q: %w",
				d.backend, spec.Name, driver.PortStrategyLoopbackIP, d.ep.u.Hostname(), driver.PortStrategyDynamic, driver.ErrUnsupported)
		}
		ip, release, err := d.reserveLoopback(ctx)
		if err != nil {
			return err
		}
		p.release, p.loopback, hostIP = release, ip, ip
		p.cfg.Labels[driver.LabelLoopbackIP] = ip
	}
	p.cfg.ExposedPorts = nat.PortSet{}
	p.host.PortBindings = nat.PortMap{}
	names := make([]string, 0, len(spec.Ports))
	for _, ps := range spec.Ports {
		proto := ps.Protocol
		if proto == "" {
			proto = "tcp"
		}
		port, err := nat.NewPort(proto, strconv.Itoa(ps.Port))
		if err != nil {
			return fmt.Errorf("docker backend %q: instance %q: port %q: %w", d.backend, spec.Name, ps.Name, err)
		}
		hostPort := ""
		if p.loopback != "" {
			hostPort = strconv.Itoa(ps.Port)
		}
		p.cfg.ExposedPorts[port] = struct{}{}
		p.host.PortBindings[port] = append(p.host.PortBindings[port], nat.PortBinding{HostIP: hostIP, HostPort: hostPort})
		names = append(names, fmt.Sprintf("%s=%d/%s", ps.Name, ps.Port, proto))
	}
	p.cfg.Labels[driver.LabelPorts] = strings.Join(names, ",")
	return nil
}

// planMounts attaches the backend's volumes. Should a volume be missing,
// the engine creates it; the labels make such a volume findable as ours.
func (d *Driver) planMounts(_ context.Context, p *createPlan, spec driver.InstanceSpec) error {
	for _, m := range spec.Mounts {
		labels := driver.ObjectLabels(d.backend, nil, nil)
		labels[driver.LabelName] = m.Volume
		p.host.Mounts = append(p.host.Mounts, mount.Mount{
			Type: mount.TypeVolume, Source: d.objectName(m.Volume), Target: m.Target, ReadOnly: m.ReadOnly,
			VolumeOptions: &mount.VolumeOptions{Labels: labels},
		})
	}
	return nil
}

// planInit makes the agent PID 1 when an init or a lifetime is wanted: it
// reaps zombies and stops the instance at its deadline with no Terraform
// running. A given Command replaces both the image's Entrypoint and Cmd (as
// with Kubernetes' command); without one the image's Entrypoint+Cmd run
// under the agent. Without a usable agent, Docker's own init is used and a
// lifetime is refused.
func (d *Driver) planInit(ctx context.Context, p *createPlan, spec driver.InstanceSpec) error {
	cmd := spec.Command
	ei, err := d.engine(ctx)
	if err != nil {
		return err
	}
	am, agentErr := d.agentMount(ctx, ei.arch)
	if agentErr == nil {
		p.host.Mounts = append(p.host.Mounts, am)
		if sm, ok := d.stateMount(spec.Security.ReadOnlyRootfs); ok {
			p.host.Mounts = append(p.host.Mounts, sm)
		}
	}
	if spec.Lifetime > 0 && agentErr != nil {
		return fmt.Errorf("docker backend %q: instance %q: lifetime needs the sandbox agent: %v: %w", d.backend, spec.Name, agentErr, driver.ErrUnsupported)
	}
	if agentErr != nil || (!spec.Security.Init && spec.Lifetime <= 0) {
		if len(cmd) > 0 {
			p.cfg.Entrypoint = cmd
		}
		if spec.Security.Init {
			yes := true
			p.host.Init = &yes
		}
		return nil
	}
	if len(cmd) == 0 {
		def, err := d.imageDefaultsFor(ctx, spec.Image)
		if err != nil {
			return err
		}
		cmd = append(append([]string{}, def.entrypoint...), def.cmd...)
	}
	var deadline time.Time
	if spec.Lifetime > 0 {
		deadline = time.Now().Add(spec.Lifetime).UTC()
		p.cfg.Labels[driver.LabelExpiresAt] = deadline.Format(time.RFC3339Nano)
	}
	p.cfg.Entrypoint = agent.InitCommand(deadline, cmd)
	return nil
}

// reserveLoopback picks a 127.0.0.x no managed container on this engine
// uses (any backend: "never two sandboxes on one address"). The list and
// the reservation happen under one engine-wide lock, and the release takes
// the same lock, so a concurrent create is either visible in the list or
// still reserved.
func (d *Driver) reserveLoopback(ctx context.Context) (string, func(), error) {
	la := loopbackFor(d.ep.host)
	la.mu.Lock()
	defer la.mu.Unlock()
	used, err := d.usedLoopbackIPs(ctx)
	if err != nil {
		return "", nil, err
	}
	addr, release, err := la.alloc.Reserve(used)
	if err != nil {
		return "", nil, fmt.Errorf("docker backend %q: loopback_ip: %w", d.backend, err)
	}
	return addr.String(), func() {
		la.mu.Lock()
		defer la.mu.Unlock()
		release()
	}, nil
}

func (d *Driver) usedLoopbackIPs(ctx context.Context) ([]string, error) {
	cli, err := d.api()
	if err != nil {
		return nil, err
	}
	f := labelFilter(map[string]string{driver.LabelManagedBy: driver.ManagedByValue})
	f.Add("label", driver.LabelLoopbackIP)
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: f})
	if err != nil {
		return nil, d.wrap(err, "list loopback addresses")
	}
	used := make([]string, 0, len(list))
	for _, c := range list {
		if ip := c.Labels[driver.LabelLoopbackIP]; net.ParseIP(ip) != nil {
			used = append(used, ip)
		}
	}
	return used, nil
}

// errIsNotFound is errors.Is against ErrNotFound after mapping.
func (d *Driver) errIsNotFound(err error) bool {
	return err != nil && errors.Is(d.wrap(err, ""), driver.ErrNotFound)
}
