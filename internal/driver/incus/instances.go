package incus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// CreateInstance creates the instance, places the agent and the files, and
// starts it when asked. On error everything it created is deleted again.
func (d *Driver) CreateInstance(ctx context.Context, spec driver.InstanceSpec) (driver.Instance, error) {
	c, err := d.client(ctx)
	if err != nil {
		return driver.Instance{}, err
	}
	userName := spec.Name
	spec.Name = engineName(d.backend, userName)
	d.forget(spec.Name) // a new instance of an old name starts without them
	if spec.Type == driver.TypeVM {
		if err := d.checkVMs(ctx); err != nil {
			return driver.Instance{}, err
		}
	}
	plan, release, err := d.planInstance(ctx, c, spec, userName)
	defer release()
	if err != nil {
		return driver.Instance{}, d.errf(err, "instance %q", spec.Name)
	}
	req, err := buildInstance(plan)
	if err != nil {
		return driver.Instance{}, d.errf(err, "instance %q", spec.Name)
	}
	// A container with nothing to put into it before it starts is started by
	// the create request itself: one operation instead of two. Either way a
	// start holds a start slot (start.go).
	req.Start = spec.Running && spec.Type != driver.TypeVM && !d.needsPrestart(spec, plan)
	started, err := d.createInstance(ctx, c, req)
	if err != nil {
		err = d.errf(err, "create instance %q", spec.Name)
		if !errors.Is(err, driver.ErrAlreadyExists) { // never delete someone else's
			d.cleanupInstance(c, spec.Name)
		}
		return driver.Instance{}, err
	}
	if err := d.finishCreate(ctx, c, spec, plan, started); err != nil {
		d.cleanupInstance(c, spec.Name)
		return driver.Instance{}, err
	}
	// Without its state: a container that has just started has no address
	// yet (the next refresh reads it), and the state is the expensive part
	// of a GET on the server.
	inst, _, err := c.GetInstance(spec.Name)
	if err != nil {
		return driver.Instance{}, d.errf(err, "instance %q", spec.Name)
	}
	return d.observe(&api.InstanceFull{Instance: *inst}), nil
}

// createInstance runs the create request, within a start slot when it
// starts the instance too. It reports whether the instance was started: a
// start that failed in LXC's hooks (a busy server) is left to finishCreate,
// whose start retries it.
func (d *Driver) createInstance(ctx context.Context, c incus.InstanceServer, req api.InstancesPost) (started bool, err error) {
	if req.Start {
		release, err := acquireStart(ctx)
		if err != nil {
			return false, err
		}
		defer release()
	}
	err = d.runOperation(ctx, c, "POST", "/instances", req)
	if err != nil && req.Start && failedToStart(err) {
		if _, _, getErr := c.GetInstance(req.Name); getErr == nil {
			return false, nil // created, not started
		}
	}
	return req.Start && err == nil, err
}

// needsPrestart tells whether files or directories must be put into the
// container before it starts (finishCreate).
func (d *Driver) needsPrestart(spec driver.InstanceSpec, plan instancePlan) bool {
	dirs, files := prestart(spec, plan.Deadline)
	return d.uploadsAgent(spec) || len(dirs)+len(files)+len(mountTargets(plan)) > 0
}

// maxNameLen is Incus' limit on instance names (they are host names).
const maxNameLen = 63

// engineName is the Incus instance name, which is also the instance ID:
// BACKEND-NAME. Incus registers instance names in the DNS of the managed
// network they join, so two backends sharing a network (the default
// incusbr0) could not both have an instance "worker-0" under bare names.
// Too long a result is cut and made unique with a hash.
func engineName(backend, name string) string {
	s := backend + "-" + name
	if len(s) <= maxNameLen {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return strings.TrimRight(s[:maxNameLen-9], "-") + "-" + hex.EncodeToString(sum[:4])
}

// instanceClient resolves an instance ID to its engine name and returns the
// backend's client with it.
func (d *Driver) instanceClient(ctx context.Context, id string) (incus.InstanceServer, string, error) {
	name, err := d.nameOf(id)
	if err != nil {
		return nil, "", err
	}
	c, err := d.client(ctx)
	return c, name, err
}

// nameOf maps an ID to the engine name; a bare instance name (as in an
// import ID) is accepted too.
func (d *Driver) nameOf(id string) (string, error) {
	if id == "" {
		return "", fmt.Errorf("incus backend %q: empty instance ID: %w", d.backend, driver.ErrNotFound)
	}
	if strings.HasPrefix(id, d.backend+"-") {
		return id, nil
	}
	return engineName(d.backend, id), nil
}

// finishCreate copies the agent and files in (a system container with a
// lifetime: also its start hook) and starts the instance; a VM with a
// lifetime gets its watcher through its guest agent.
func (d *Driver) finishCreate(ctx context.Context, c incus.InstanceServer, spec driver.InstanceSpec, plan instancePlan, started bool) error {
	if spec.Type == driver.TypeVM {
		// A VM takes files only through its guest agent, once booted.
		if spec.Running {
			if err := d.start(ctx, c, spec.Name); err != nil {
				return err
			}
		}
		if err := d.copyFilesWhenReady(ctx, c, spec.Name, spec.Files); err != nil {
			return err
		}
		return d.startWatcher(ctx, c, spec, plan.Deadline)
	}
	if d.uploadsAgent(spec) {
		if err := d.uploadAgent(ctx, c, spec.Name); err != nil {
			return err
		}
	}
	dirs, files := prestart(spec, plan.Deadline)
	files = append(mountTargets(plan), files...)
	if err := d.putAll(ctx, c, spec.Name, dirs, files); err != nil {
		return err
	}
	if spec.Running && !started {
		return d.start(ctx, c, spec.Name) // a lifetime's watcher starts from the start hook (lxc.go)
	}
	return nil
}

// uploadsAgent: a remote server cannot bind-mount our binary, so it is
// copied, for a container whose PID 1 or start hook runs it.
func (d *Driver) uploadsAgent(spec driver.InstanceSpec) bool {
	return d.remote && (agentInit(spec) || needsWatcher(spec)) && spec.Type != driver.TypeVM
}

// planInstance resolves the image, the networks, the agent and the ports.
// release frees port reservations once the instance records them.
func (d *Driver) planInstance(ctx context.Context, c incus.InstanceServer, spec driver.InstanceSpec, userName string) (instancePlan, func(), error) {
	release := func() {}
	fp, err := d.resolveImage(ctx, c, spec.Image)
	if err != nil {
		return instancePlan{}, release, err
	}
	plan := instancePlan{
		Spec: spec, ImageFP: fp,
		Pool: d.cfg.StoragePool, Network: d.cfg.Network,
	}
	if spec.Network == driver.NetworkBridge {
		if plan.BridgeNetwork, err = d.bridgeNetwork(ctx); err != nil {
			return plan, release, err
		}
	}
	if spec.Lifetime > 0 {
		// Whole seconds, rounded up: the label is RFC 3339 without fractions
		// and must never claim an earlier deadline than the agent keeps.
		plan.Deadline = time.Now().Add(spec.Lifetime).Add(time.Second - 1).Truncate(time.Second).UTC()
	}
	if !d.remote && spec.Type != driver.TypeVM {
		// Every local container gets the agent (initializers exec it), as a
		// read-only bind mount: free, unlike a copy per instance. It is
		// required when it is PID 1 or the lifetime's start hook runs it.
		path, err := agent.BinaryPath()
		if err != nil && (agentInit(spec) || needsWatcher(spec)) {
			return plan, release, err
		}
		plan.AgentHostPath = path
	}
	labels := d.objectLabels(spec.Labels)
	labels[driver.LabelName] = userName
	if !plan.Deadline.IsZero() {
		labels[driver.LabelExpiresAt] = plan.Deadline.Format(time.RFC3339)
	}
	if len(spec.Ports) > 0 {
		labels[driver.LabelPorts] = portsLabel(spec.Ports)
		var ip string
		plan.Ports, ip, release, err = d.allocatePorts(ctx, spec)
		if err != nil {
			return plan, release, err
		}
		if ip != "" {
			labels[driver.LabelLoopbackIP] = ip
		}
	}
	plan.Labels = labels
	return plan, release, nil
}

// bridgeNetwork is the NIC network of the default project's default profile:
// the engine's default network.
func (d *Driver) bridgeNetwork(ctx context.Context) (string, error) {
	g, err := d.global(ctx)
	if err != nil {
		return "", err
	}
	p, _, err := g.GetProfile("default")
	if err != nil {
		return "", fmt.Errorf("read the default profile for network = bridge: %w", err)
	}
	for _, dev := range p.Devices {
		if dev["type"] == "nic" && dev["network"] != "" {
			return dev["network"], nil
		}
	}
	return "", fmt.Errorf("network = bridge: the default profile has no managed NIC: %w", driver.ErrUnsupported)
}

// cleanupInstance deletes a half-created instance. It runs after ctx may
// have expired, so it has its own short deadline.
func (d *Driver) cleanupInstance(c incus.InstanceServer, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = d.removeInstance(ctx, c, name, 0)
}

// InspectInstance returns one instance with its state.
func (d *Driver) InspectInstance(ctx context.Context, id string) (driver.Instance, error) {
	c, id, err := d.instanceClient(ctx, id)
	if err != nil {
		return driver.Instance{}, err
	}
	inst, err := getInstanceFull(c, id)
	if err != nil {
		return driver.Instance{}, d.errf(err, "instance %q", id)
	}
	if !d.ours(inst.Config) {
		return driver.Instance{}, d.errf(errNotOurs, "instance %q", id)
	}
	return d.observe(inst), nil
}

// errNotOurs makes an instance without our labels look absent.
var errNotOurs = fmt.Errorf("exists but was not created by this backend: %w", driver.ErrNotFound)

// ListInstances reads the project's instances in one call, without their
// state: the server gathers a state per instance (cgroups, processes, disk
// and network counters), which made the list the slowest part of a refresh.
// Addresses come from the DHCP leases of the managed networks the running
// instances are on, one call per network (leaseAddresses).
// Our labels are checked here rather than by a server-side filter, because
// the server reports an instance it cannot render at that moment (starting,
// stopping) as a bare error entry without config, which a filter would drop;
// such entries are read again one by one.
func (d *Driver) ListInstances(ctx context.Context) ([]driver.Instance, error) {
	c, err := d.client(ctx)
	if err != nil {
		return nil, err
	}
	var list []api.Instance
	err = d.answered(ctx, "list instances", answerWithin, func() (err error) {
		list, err = c.GetInstances(api.InstanceTypeAny)
		return err
	})
	if err != nil {
		if api.StatusErrorCheck(err, 404) {
			return nil, nil // the project is gone: nothing of ours is left
		}
		return nil, d.errf(err, "list instances")
	}
	out := make([]driver.Instance, 0, len(list))
	var running []*api.Instance
	for i := range list {
		inst := &list[i]
		if inst.StatusCode == api.Error && len(inst.Config) == 0 {
			if inst, _, err = c.GetInstance(inst.Name); err != nil {
				continue // deleted meanwhile
			}
		}
		if !d.ours(inst.Config) {
			continue
		}
		out = append(out, d.observe(&api.InstanceFull{Instance: *inst}))
		if out[len(out)-1].Status == driver.StatusRunning {
			running = append(running, inst)
		}
	}
	addrs := d.leaseAddresses(c, running)
	for i := range out {
		out[i].IPAddress = addrs[out[i].ID]
	}
	return out, nil
}

// leaseAddresses maps running instances to their IPv4 address on their NIC's
// managed network, from that network's DHCP and static leases (matched by
// the NIC's MAC address). Where the leases cannot be read, the instance's
// state is read instead.
func (d *Driver) leaseAddresses(c incus.InstanceServer, running []*api.Instance) map[string]string {
	out := map[string]string{}
	byNetwork := map[string][]*api.Instance{}
	for _, inst := range running {
		nic := inst.ExpandedDevices[devNIC]
		if nic["type"] != "nic" {
			continue // network = "none": no address
		}
		byNetwork[nic["network"]] = append(byNetwork[nic["network"]], inst)
	}
	for network, insts := range byNetwork {
		var leases []api.NetworkLease
		var err error
		if network != "" {
			leases, err = c.GetNetworkLeases(network)
		}
		byMAC := map[string]string{}
		for _, l := range leases {
			if ip := net.ParseIP(l.Address); ip != nil && ip.To4() != nil && (l.Type == "dynamic" || l.Type == "static") {
				byMAC[strings.ToLower(l.Hwaddr)] = l.Address
			}
		}
		for _, inst := range insts {
			if network != "" && err == nil {
				out[inst.Name] = byMAC[strings.ToLower(inst.Config["volatile."+devNIC+".hwaddr"])]
				continue
			}
			if st, _, err := c.GetInstanceState(inst.Name); err == nil {
				out[inst.Name] = ipv4(st)
			}
		}
	}
	return out
}

// getInstanceFull reads an instance with its state. Reading the state of an
// instance that is just starting or stopping can fail ("Invalid PID"); the
// instance is then returned without state rather than as an error.
func getInstanceFull(c incus.InstanceServer, name string) (*api.InstanceFull, error) {
	full, _, err := c.GetInstanceFull(name)
	if err == nil || api.StatusErrorCheck(err, 404) {
		return full, err
	}
	inst, _, err2 := c.GetInstance(name)
	if err2 != nil {
		return nil, err
	}
	return &api.InstanceFull{Instance: *inst}, nil
}

// observe converts an Incus instance to ours.
func (d *Driver) observe(inst *api.InstanceFull) driver.Instance {
	labels := labelsFromConfig(inst.Config)
	out := driver.Instance{
		ID:         inst.Name,
		Name:       inst.Name,
		EngineName: inst.Name,
		Type:       driver.TypeContainer,
		Image:      inst.Config["volatile.base_image"],
		Labels:     labels,
		LoopbackIP: labels[driver.LabelLoopbackIP],
		CreatedAt:  inst.CreatedAt,
		Endpoints:  map[string]string{},
	}
	if n := labels[driver.LabelName]; n != "" {
		out.Name = n
	}
	if inst.Type == string(api.InstanceTypeVM) {
		out.Type = driver.TypeVM
	}
	if t, err := time.Parse(time.RFC3339, labels[driver.LabelExpiresAt]); err == nil {
		out.ExpiresAt = t
	}
	out.Status = status(inst, out.ExpiresAt, time.Now())
	if inst.State != nil {
		out.IPAddress = ipv4(inst.State)
	}
	d.fillEndpoints(&out, inst)
	return out
}

// status maps Incus' state. Past its deadline an instance is expired even
// while Incus still reports it running: the agent (PID 1) is stopping it,
// and Incus' view of an instance in its last second flips between running
// and stopped from one call to the next. One that never ran (no recorded
// power state) is "created".
func status(inst *api.InstanceFull, expires, now time.Time) string {
	if !expires.IsZero() && !now.Before(expires) && inst.StatusCode != api.Error {
		return driver.StatusExpired
	}
	switch inst.StatusCode {
	case api.Running, api.Frozen, api.Freezing:
		return driver.StatusRunning
	case api.Stopped:
		if inst.Config["volatile.last_state.power"] == "" {
			return driver.StatusCreated
		}
		return driver.StatusStopped
	}
	return driver.StatusUnknown
}

// ipv4 picks the first global IPv4 address of a non-loopback interface.
func ipv4(st *api.InstanceState) string {
	for _, name := range []string{devNIC} {
		if addr := globalAddr(st.Network[name]); addr != "" {
			return addr
		}
	}
	for name, n := range st.Network {
		if name == "lo" {
			continue
		}
		if addr := globalAddr(n); addr != "" {
			return addr
		}
	}
	return ""
}

func globalAddr(n api.InstanceStateNetwork) string {
	for _, a := range n.Addresses {
		if a.Family == "inet" && a.Scope == "global" {
			return a.Address
		}
	}
	return ""
}

// StartInstance starts a stopped instance and, on a VM, re-launches its
// lifetime watcher (containers arm theirs as they start).
func (d *Driver) StartInstance(ctx context.Context, id string) error {
	c, id, err := d.instanceClient(ctx, id)
	if err != nil {
		return err
	}
	inst, _, err := c.GetInstance(id)
	if err != nil {
		return d.errf(err, "instance %q", id)
	}
	if inst.StatusCode == api.Running {
		return nil
	}
	if err := d.start(ctx, c, id); err != nil {
		return err
	}
	if inst.Type != string(api.InstanceTypeVM) {
		return nil
	}
	deadline, _ := time.Parse(time.RFC3339, inst.Config[labelKey(driver.LabelExpiresAt)])
	return d.startWatcher(ctx, c, driver.InstanceSpec{Name: id, Type: driver.TypeVM}, deadline)
}

// UpdateInstance replaces the limit keys in place (live on running containers).
func (d *Driver) UpdateInstance(ctx context.Context, id string, limits driver.Limits) error {
	c, id, err := d.instanceClient(ctx, id)
	if err != nil {
		return err
	}
	inst, etag, err := c.GetInstance(id)
	if err != nil {
		return d.errf(err, "instance %q", id)
	}
	typ := driver.TypeContainer
	if inst.Type == string(api.InstanceTypeVM) {
		typ = driver.TypeVM
	}
	lim, err := limitsConfig(typ, limits)
	if err != nil {
		return d.errf(err, "instance %q", id)
	}
	put := inst.Writable()
	for _, k := range limitKeys {
		delete(put.Config, k)
	}
	for k, v := range lim {
		put.Config[k] = v
	}
	op, err := c.UpdateInstance(id, put, etag)
	if err == nil {
		err = op.WaitContext(ctx)
	}
	return d.errf(err, "update limits of instance %q", id)
}

// forget drops what the driver remembers about an instance's contents.
func (d *Driver) forget(name string) {
	d.agentIn.Delete(name)
	d.workdirs.Range(func(k, _ any) bool {
		if key, ok := k.(string); ok && strings.HasPrefix(key, name+"\x00") {
			d.workdirs.Delete(k)
		}
		return true
	})
}
