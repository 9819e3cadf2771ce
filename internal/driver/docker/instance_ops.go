package docker

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/go-connections/nat"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/portalloc"
)

// loopbackState is shared by every driver of one engine in this process, so
// two backends on one host never hand out the same address.
type loopbackState struct {
	mu    sync.Mutex
	alloc *portalloc.Allocator
}

var (
	loopbacksMu sync.Mutex
	loopbacks   = map[string]*loopbackState{}
)

func loopbackFor(host string) *loopbackState {
	loopbacksMu.Lock()
	defer loopbacksMu.Unlock()
	s, ok := loopbacks[host]
	if !ok {
		s = &loopbackState{alloc: portalloc.NewAllocator(portalloc.Loopback)}
		loopbacks[host] = s
	}
	return s
}

func labelFilter(labels map[string]string) filters.Args {
	f := filters.NewArgs()
	for k, v := range labels {
		f.Add("label", k+"="+v)
	}
	return f
}

// observed is the engine-neutral subset of a container that both the list
// and the inspect answers provide.
type observed struct {
	id, name, image string
	labels          map[string]string
	state           string // engine state: running, exited, created, ...
	exitCode        int
	created         time.Time
	networks        map[string]*network.EndpointSettings
	ports           map[string]string // "8080/tcp" -> host port
	hostIPs         map[string]string // "8080/tcp" -> host IP
}

// InspectInstance finds an instance by container ID, engine name, or the
// user's name within this backend.
func (d *Driver) InspectInstance(ctx context.Context, id string) (driver.Instance, error) {
	inst, c, err := d.inspectFull(ctx, id)
	if d.errIsNotFound(err) && !strings.HasPrefix(id, d.backend+"-") {
		inst, c, err = d.inspectFull(ctx, d.objectName(id))
	}
	if err == nil {
		inst.Spec = d.observedSpec(ctx, c) // spec.go
	}
	return inst, err
}

func (d *Driver) inspect(ctx context.Context, id string) (driver.Instance, error) {
	inst, _, err := d.inspectFull(ctx, id)
	return inst, err
}

func (d *Driver) inspectFull(ctx context.Context, id string) (driver.Instance, container.InspectResponse, error) {
	cli, err := d.api()
	if err != nil {
		return driver.Instance{}, container.InspectResponse{}, err
	}
	c, err := cli.ContainerInspect(ctx, id)
	if err != nil {
		return driver.Instance{}, c, d.wrap(err, "instance %q", id)
	}
	inst, err := d.fromInspect(c, id)
	return inst, c, err
}

// fromInspect reads an instance of this backend from an inspect response.
func (d *Driver) fromInspect(c container.InspectResponse, id string) (driver.Instance, error) {
	if c.Config == nil || c.Config.Labels[driver.LabelBackend] != d.backend || c.Config.Labels[driver.LabelManagedBy] != driver.ManagedByValue {
		return driver.Instance{}, fmt.Errorf("docker backend %q: instance %q belongs to another backend or was not made by this provider: %w", d.backend, id, driver.ErrNotFound)
	}
	o := observed{id: c.ID, name: strings.TrimPrefix(c.Name, "/"), image: c.Config.Image, labels: c.Config.Labels}
	if c.State != nil {
		o.state, o.exitCode = c.State.Status, c.State.ExitCode
	}
	o.created, _ = time.Parse(time.RFC3339Nano, c.Created)
	if c.NetworkSettings != nil {
		o.networks = c.NetworkSettings.Networks
		o.ports, o.hostIPs = bindingsFromMap(c.NetworkSettings.Ports)
	}
	return d.toInstance(o), nil
}

func bindingsFromMap(pm nat.PortMap) (map[string]string, map[string]string) {
	ports, ips := map[string]string{}, map[string]string{}
	for p, bs := range pm {
		for _, b := range bs {
			if b.HostPort == "" || strings.Contains(b.HostIP, ":") {
				continue // IPv6 duplicates of the same binding
			}
			ports[string(p)], ips[string(p)] = b.HostPort, b.HostIP
		}
	}
	return ports, ips
}

// ListInstances lists this backend's containers with one label-filtered call.
func (d *Driver) ListInstances(ctx context.Context) ([]driver.Instance, error) {
	cli, err := d.api()
	if err != nil {
		return nil, err
	}
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: d.scopeFilter()})
	if err != nil {
		return nil, d.wrap(err, "list instances")
	}
	out := make([]driver.Instance, 0, len(list))
	for _, c := range list {
		o := observed{id: c.ID, image: c.Image, labels: c.Labels, state: c.State,
			exitCode: exitCodeFromStatus(c.Status), created: time.Unix(c.Created, 0)}
		if len(c.Names) > 0 {
			o.name = strings.TrimPrefix(c.Names[0], "/")
		}
		if c.NetworkSettings != nil {
			o.networks = c.NetworkSettings.Networks
		}
		o.ports, o.hostIPs = map[string]string{}, map[string]string{}
		for _, p := range c.Ports {
			if p.PublicPort == 0 || strings.Contains(p.IP, ":") {
				continue
			}
			key := fmt.Sprintf("%d/%s", p.PrivatePort, p.Type)
			o.ports[key], o.hostIPs[key] = strconv.Itoa(int(p.PublicPort)), p.IP
		}
		out = append(out, d.toInstance(o))
	}
	return out, nil
}

var exitedRE = regexp.MustCompile(`^Exited \((-?\d+)\)`)

// exitCodeFromStatus reads the code from list's "Exited (124) 3 seconds ago".
func exitCodeFromStatus(s string) int {
	if m := exitedRE.FindStringSubmatch(s); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

func (d *Driver) toInstance(o observed) driver.Instance {
	inst := driver.Instance{
		ID:         o.id,
		Name:       o.labels[driver.LabelName],
		EngineName: o.name,
		Type:       driver.TypeContainer,
		Image:      o.image,
		Labels:     o.labels,
		LoopbackIP: o.labels[driver.LabelLoopbackIP],
		CreatedAt:  o.created,
	}
	if inst.Name == "" {
		inst.Name = strings.TrimPrefix(o.name, d.backend+"-")
	}
	if t, err := time.Parse(time.RFC3339Nano, o.labels[driver.LabelExpiresAt]); err == nil {
		inst.ExpiresAt = t
	}
	inst.Status = status(o.state, o.exitCode, inst.ExpiresAt)
	if inst.Status == driver.StatusStopped && o.state == "exited" && driver.ExitedByItself(o.exitCode) {
		code := o.exitCode
		inst.ExitCode = &code
	}
	inst.IPAddress = d.ipOf(o.networks)
	inst.Endpoints = d.endpoints(o)
	podmanObserved(&inst) // Podman: the image as given, no build label (podman.go)
	return inst
}

// status normalises the engine state. An instance that exited with the
// agent's expiry code after its deadline is expired, not merely stopped.
func status(state string, code int, expires time.Time) string {
	switch state {
	case "running", "restarting":
		return driver.StatusRunning
	case "created":
		return driver.StatusCreated
	case "exited", "dead", "paused", "removing", "stopped":
		if state == "exited" && code == agent.ExitExpired && !expires.IsZero() && !time.Now().Before(expires) {
			return driver.StatusExpired
		}
		return driver.StatusStopped
	}
	return driver.StatusUnknown
}

// ipOf prefers the backend network's address, else any network's.
func (d *Driver) ipOf(nets map[string]*network.EndpointSettings) string {
	if n := nets[d.networkName()]; n != nil && n.IPAddress != "" {
		return n.IPAddress
	}
	for _, n := range nets {
		if n != nil && n.IPAddress != "" {
			return n.IPAddress
		}
	}
	return ""
}

// endpoints names the published ports from the sandbox.ports label. Under
// loopback_ip the address and port are fixed, so they are known even while
// the instance is stopped; dynamic ports exist only while it runs.
func (d *Driver) endpoints(o observed) map[string]string {
	out := map[string]string{}
	loop := o.labels[driver.LabelLoopbackIP]
	for _, item := range strings.Split(o.labels[driver.LabelPorts], ",") {
		name, port, ok := strings.Cut(item, "=")
		if !ok || name == "" {
			continue
		}
		if loop != "" {
			num, _, _ := strings.Cut(port, "/")
			out[name] = loop + ":" + num
			continue
		}
		if hp, ok := o.ports[port]; ok {
			out[name] = d.hostFor(o.hostIPs[port]) + ":" + hp
		}
	}
	return out
}

// hostFor is the advertised host for a port bound to ip.
func (d *Driver) hostFor(ip string) string {
	if d.dc.AdvertiseHost == "" && ip != "" && ip != "0.0.0.0" && d.ep.local {
		return ip
	}
	return d.ep.advertiseHost(&d.dc)
}

// StartInstance starts a created or stopped instance; running is fine.
func (d *Driver) StartInstance(ctx context.Context, id string) error {
	cli, err := d.api()
	if err != nil {
		return err
	}
	if err := cli.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		return d.wrap(err, "start instance %q", id)
	}
	_, err = d.checkStarted(ctx, id)
	return err
}

// StopInstance stops with SIGTERM, then SIGKILL after grace.
func (d *Driver) StopInstance(ctx context.Context, id string, grace time.Duration) error {
	cli, err := d.api()
	if err != nil {
		return err
	}
	secs := int((grace + time.Second - 1) / time.Second)
	return d.wrap(cli.ContainerStop(ctx, id, container.StopOptions{Timeout: &secs}), "stop instance %q", id)
}

// UpdateInstance changes cpu, memory and pids limits in place. A zero
// leaves that limit as it is (the engine cannot lift a limit in place).
func (d *Driver) UpdateInstance(ctx context.Context, id string, limits driver.Limits) error {
	// Podman 4 lacks the Docker endpoint: see podmanUpdate (podman.go).
	if ei, err := d.engine(ctx); err == nil && ei.podman {
		return d.podmanUpdate(ctx, id, limits)
	}
	cli, err := d.api()
	if err != nil {
		return err
	}
	_, err = cli.ContainerUpdate(ctx, id, container.UpdateConfig{Resources: resources(limits)})
	return d.wrap(err, "update instance %q", id)
}

// DeleteInstance removes the instance and its anonymous volumes; a missing
// one counts as done.
func (d *Driver) DeleteInstance(ctx context.Context, id string) error {
	cli, err := d.api()
	if err != nil {
		return err
	}
	err = cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if d.errIsNotFound(err) {
		return nil
	}
	return d.wrap(err, "delete instance %q", id)
}
