package incus

// Pure translation of an InstanceSpec into the Incus create request, so the
// exact request (VMs included, which cannot run on the test machines) is
// unit-tested without a server.

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// Device names the driver owns.
const (
	devRoot       = "root"
	devNIC        = "eth0"
	devAgent      = "sandbox-agent"
	devPortPrefix = "sandbox-port-"
	devVolPrefix  = "sandbox-vol-"
)

// defaultPath is the command's PATH unless env sets one (as Docker does).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// stopGrace is the TERM-to-KILL grace of the agent init at the deadline.
const stopGrace = 10 * time.Second

// instancePlan is everything CreateInstance decided before building the
// request: resolved image, networks, agent placement and published ports.
type instancePlan struct {
	Spec          driver.InstanceSpec
	Labels        map[string]string // all labels, provider's included
	ImageFP       string            // image fingerprint, in the instance's project
	Pool          string
	Network       string // the backend's network (isolated)
	BridgeNetwork string // the engine's default network (bridge)
	AgentHostPath string // bind-mount source for the agent; "" = uploaded
	Deadline      time.Time
	Ports         []publishedPort
}

// publishedPort is a port with the host address it is published on.
type publishedPort struct {
	driver.PortSpec
	ListenIP string
	HostPort int
}

// commandMode reports whether the user's command replaces the image's init
// as PID 1 (an application container); without one the image's init runs.
func commandMode(spec driver.InstanceSpec) bool { return len(spec.Command) > 0 }

// agentInit reports whether the agent runs as PID 1 in front of the command:
// for security.init (reaping, signals), for a lifetime, which it enforces,
// and for a command with spaces, which it reads from its argv file.
func agentInit(spec driver.InstanceSpec) bool {
	return commandMode(spec) && (spec.Security.Init || spec.Lifetime > 0 || needsArgvFile(spec.Command))
}

// buildInstance returns the create request for p.
func buildInstance(p instancePlan) (api.InstancesPost, error) {
	s := p.Spec
	typ, err := instanceType(s.Type)
	if err != nil {
		return api.InstancesPost{}, err
	}
	if err := checkSpec(s); err != nil {
		return api.InstancesPost{}, err
	}
	config := map[string]string{}
	labelsToConfig(config, p.Labels)
	lim, err := limitsConfig(s.Type, driver.Limits{CPUs: s.CPUs, MemoryBytes: s.MemoryBytes, PidsLimit: s.PidsLimit})
	if err != nil {
		return api.InstancesPost{}, err
	}
	for k, v := range lim {
		config[k] = v
	}
	for k, v := range s.Env {
		config["environment."+k] = v
	}
	if s.User != "" {
		config[keyUser] = s.User
	}
	if s.Workdir != "" {
		config[keyWorkdir] = s.Workdir
	}
	if s.Security.Privileged && typ == api.InstanceTypeContainer {
		config["security.privileged"] = "true"
	}
	if commandMode(s) {
		config[keyCommand] = "1"
	}
	if typ == api.InstanceTypeContainer {
		raw, err := rawLXC(s, p.Deadline)
		if err != nil {
			return api.InstancesPost{}, err
		}
		if raw != "" {
			config["raw.lxc"] = raw
		}
	}
	devices, err := buildDevices(p)
	if err != nil {
		return api.InstancesPost{}, err
	}
	return api.InstancesPost{
		Name: s.Name,
		Type: typ,
		Source: api.InstanceSource{
			Type:        "image",
			Fingerprint: p.ImageFP,
		},
		InstancePut: api.InstancePut{
			Config:   config,
			Devices:  devices,
			Profiles: []string{"default"},
		},
	}, nil
}

func instanceType(t string) (api.InstanceType, error) {
	switch t {
	case "", driver.TypeContainer:
		return api.InstanceTypeContainer, nil
	case driver.TypeVM:
		return api.InstanceTypeVM, nil
	}
	return "", fmt.Errorf("instance type %q: want %q or %q: %w", t, driver.TypeContainer, driver.TypeVM, driver.ErrUnsupported)
}

// checkSpec rejects what Incus cannot do for this instance type, with the
// reason, instead of ignoring it.
func checkSpec(s driver.InstanceSpec) error {
	unsupported := func(format string, a ...any) error {
		return fmt.Errorf(format+": %w", append(a, driver.ErrUnsupported)...)
	}
	if s.Type == driver.TypeVM {
		switch {
		case commandMode(s):
			return unsupported("command on a virtual machine: a VM boots its image's own init; run the program from an initializer instead")
		case s.PidsLimit > 0:
			return unsupported("pids_limit on a virtual machine: Incus has no process limit for VMs")
		case s.Security.ReadOnlyRootfs:
			return unsupported("a read-only root filesystem on a virtual machine")
		}
	}
	if s.User != "" {
		if _, _, err := parseUser(s.User); err != nil {
			return err
		}
	}
	return nil
}

// parseUser reads "uid" or "uid:gid"; Incus takes numeric ids only.
func parseUser(u string) (uid, gid uint32, err error) {
	us, gs, hasGroup := strings.Cut(u, ":")
	uid64, err := strconv.ParseUint(us, 10, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("user %q: Incus needs a numeric uid or uid:gid: %w", u, driver.ErrUnsupported)
	}
	gid64 := uid64
	if hasGroup {
		if gid64, err = strconv.ParseUint(gs, 10, 32); err != nil {
			return 0, 0, fmt.Errorf("user %q: Incus needs a numeric gid: %w", u, driver.ErrUnsupported)
		}
	}
	return uint32(uid64), uint32(gid64), nil
}

// limitsConfig maps limits to Incus keys; a zero limit leaves its key out
// (but a container gets driver.DefaultPidsLimit without a pids limit).
// Fractional CPUs become a CFS allowance on containers (VMs only take a
// count, rounded up).
func limitsConfig(typ string, l driver.Limits) (map[string]string, error) {
	out := map[string]string{}
	switch {
	case l.CPUs < 0:
		return nil, fmt.Errorf("cpus %v: must not be negative", l.CPUs)
	case l.CPUs == 0:
	case typ == driver.TypeVM || l.CPUs == math.Trunc(l.CPUs):
		out["limits.cpu"] = strconv.Itoa(int(math.Ceil(l.CPUs)))
	default:
		ms := int(math.Round(l.CPUs * 100))
		if ms < 1 {
			ms = 1
		}
		out["limits.cpu.allowance"] = fmt.Sprintf("%dms/100ms", ms)
	}
	if l.MemoryBytes > 0 {
		out["limits.memory"] = strconv.FormatInt(l.MemoryBytes, 10)
	}
	// A container left without pids_limit gets driver.DefaultPidsLimit
	// (create and update alike, since an update rewrites every limit key).
	if pids := driver.EffectivePidsLimit(l.PidsLimit, typ, true); pids > 0 {
		if typ == driver.TypeVM {
			return nil, fmt.Errorf("pids_limit on a virtual machine: %w", driver.ErrUnsupported)
		}
		out["limits.processes"] = strconv.FormatInt(pids, 10)
	}
	return out, nil
}

// limitKeys are the keys limitsConfig may set (cleared when a limit goes).
var limitKeys = []string{"limits.cpu", "limits.cpu.allowance", "limits.memory", "limits.processes"}

// prestart lists the directories and files to create before the first start:
// the working directory, the command's argv file and the user's files, and
// on a read-only root the agent's state directory (a tmpfs mount point).
func prestart(s driver.InstanceSpec, deadline time.Time) (dirs []string, files []driver.File) {
	if s.Workdir != "" {
		dirs = append(dirs, s.Workdir)
	}
	hook := needsWatcher(s) && s.Type != driver.TypeVM
	if s.Security.ReadOnlyRootfs || hook {
		dirs = append(dirs, runDir)
	}
	if hook {
		files = append(files, driver.File{Path: lifetimeHook, Content: lifetimeHookScript(deadline), Mode: 0o755})
	}
	if commandMode(s) && needsArgvFile(s.Command) {
		files = append(files, driver.File{Path: commandArgvFile, Content: agent.ArgvFileContent(s.Command), Mode: 0o644})
	}
	return dirs, append(files, s.Files...)
}

// buildDevices returns the root disk, the NIC, the agent, volumes and ports.
func buildDevices(p instancePlan) (map[string]map[string]string, error) {
	s := p.Spec
	devs := map[string]map[string]string{}
	root := map[string]string{"type": "disk", "path": "/", "pool": p.Pool}
	if s.DiskBytes > 0 {
		root["size"] = strconv.FormatInt(s.DiskBytes, 10)
	}
	devs[devRoot] = root
	nic, err := nicDevice(s.Network, p.Network, p.BridgeNetwork)
	if err != nil {
		return nil, err
	}
	devs[devNIC] = nic
	if p.AgentHostPath != "" {
		devs[devAgent] = map[string]string{
			"type": "disk", "source": p.AgentHostPath, "path": agent.PathInInstance, "readonly": "true",
		}
	}
	for i, m := range s.Mounts {
		devs[fmt.Sprintf("%s%d", devVolPrefix, i)] = map[string]string{
			"type": "disk", "pool": p.Pool, "source": m.Volume, "path": m.Target,
			"readonly": strconv.FormatBool(m.ReadOnly),
		}
	}
	if s.Type == driver.TypeVM {
		// Proxy devices on VMs need NAT mode and a static NIC address; VM
		// ports are reached on the instance's own address instead.
		return devs, nil
	}
	for _, pp := range p.Ports {
		devs[devPortPrefix+pp.Name] = proxyDevice(pp)
	}
	return devs, nil
}

// nicDevice maps the network mode: none masks the profile's NIC, isolated is
// the backend's network, bridge the engine's default network.
func nicDevice(mode, network, bridge string) (map[string]string, error) {
	switch mode {
	case driver.NetworkNone:
		return map[string]string{"type": "none"}, nil
	case "", driver.NetworkIsolated:
		return map[string]string{"type": "nic", "network": network, "name": devNIC}, nil
	case driver.NetworkBridge:
		return map[string]string{"type": "nic", "network": bridge, "name": devNIC}, nil
	}
	return nil, fmt.Errorf("network %q: want none, isolated or bridge: %w", mode, driver.ErrUnsupported)
}

// proxyDevice forwards HOST_IP:HOST_PORT on the Incus host to the port on
// the instance's loopback (which works with any network mode).
func proxyDevice(pp publishedPort) map[string]string {
	proto := pp.Protocol
	if proto == "" {
		proto = "tcp"
	}
	return map[string]string{
		"type":    "proxy",
		"listen":  fmt.Sprintf("%s:%s:%d", proto, pp.ListenIP, pp.HostPort),
		"connect": fmt.Sprintf("%s:127.0.0.1:%d", proto, pp.Port),
		"bind":    "host",
	}
}

// portsLabel records the ports as "name=port/proto,..." (driver.LabelPorts).
func portsLabel(ports []driver.PortSpec) string {
	parts := make([]string, 0, len(ports))
	for _, p := range ports {
		proto := p.Protocol
		if proto == "" {
			proto = "tcp"
		}
		parts = append(parts, fmt.Sprintf("%s=%d/%s", p.Name, p.Port, proto))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// runDir holds the agent's logs and pid files (initializer services, the
// lifetime watcher); a tmpfs on a read-only root.
const runDir = "/.sandbox/run"

// mountTargets are empty files the bind mounts need in a read-only root,
// where LXC cannot create them at start.
func mountTargets(p instancePlan) []driver.File {
	if !p.Spec.Security.ReadOnlyRootfs || p.AgentHostPath == "" {
		return nil
	}
	return []driver.File{{Path: agent.PathInInstance, Mode: 0o755}}
}

// Where the lifetime watcher (a detached `agent poweroff`) logs and records
// its pid inside the instance.
const (
	watcherLog     = runDir + "/lifetime.log"
	watcherPidFile = runDir + "/lifetime.pid"
)

// watcherCommand is the detached process that stops a system container or
// a VM at its deadline: the agent's `poweroff --at`, which calls
// reboot(LINUX_REBOOT_CMD_POWER_OFF) then (the kernel ends the container's
// PID namespace; a VM powers off). The image's own init stays PID 1.
func watcherCommand(deadline time.Time) []string {
	return agent.ServiceCommand(watcherLog, watcherPidFile, "", agent.PoweroffCommand(deadline))
}
