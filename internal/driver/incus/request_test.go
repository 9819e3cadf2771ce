package incus

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

func basePlan(spec driver.InstanceSpec) instancePlan {
	return instancePlan{
		Spec: spec, ImageFP: "abc123", Pool: "default", Network: "incusbr0", BridgeNetwork: "lxdbr0",
		Labels: map[string]string{driver.LabelManagedBy: driver.ManagedByValue, "role": "worker"},
	}
}

// The exact request for a VM: it cannot run on the test machines, so this
// is where VM support is checked.
func TestBuildVMRequest(t *testing.T) {
	spec := driver.InstanceSpec{
		Name: "b-vm1", Type: driver.TypeVM, CPUs: 1.5, MemoryBytes: 1 << 30, DiskBytes: 10 << 30,
		Env:     map[string]string{"TASK": "demo"},
		Network: driver.NetworkIsolated,
		Ports:   []driver.PortSpec{{Name: "http", Port: 8080, Protocol: "tcp"}},
		Mounts:  []driver.Mount{{Volume: "data", Target: "/data", ReadOnly: true}},
		User:    "1000", Workdir: "/w",
	}
	p := basePlan(spec)
	p.Ports = []publishedPort{{PortSpec: spec.Ports[0], ListenIP: "127.0.0.2", HostPort: 8080}}
	req, err := buildInstance(p)
	if err != nil {
		t.Fatal(err)
	}
	want := api.InstancesPost{
		Name:   "b-vm1",
		Type:   api.InstanceTypeVM,
		Source: api.InstanceSource{Type: "image", Fingerprint: "abc123"},
		InstancePut: api.InstancePut{
			Profiles: []string{"default"},
			Config: map[string]string{
				"user.sandbox.managed-by": driver.ManagedByValue,
				"user.role":               "worker",
				"limits.cpu":              "2", // VMs take a count: rounded up
				"limits.memory":           "1073741824",
				"environment.TASK":        "demo",
				keyUser:                   "1000",
				keyWorkdir:                "/w",
			},
			Devices: map[string]map[string]string{
				"root": {"type": "disk", "path": "/", "pool": "default", "size": "10737418240"},
				"eth0": {"type": "nic", "network": "incusbr0", "name": "eth0"},
				"sandbox-vol-0": {
					"type": "disk", "pool": "default", "source": "data", "path": "/data", "readonly": "true",
				},
				// No proxy device: VM ports are reached on the VM's address.
			},
		},
	}
	if !reflect.DeepEqual(req, want) {
		t.Errorf("VM request:\n got %+v\nwant %+v", req, want)
	}
}

func TestVMRejects(t *testing.T) {
	for name, spec := range map[string]driver.InstanceSpec{
		"command":    {Type: driver.TypeVM, Command: []string{"sleep", "1"}},
		"pids_limit": {Type: driver.TypeVM, PidsLimit: 10},
		"read-only":  {Type: driver.TypeVM, Security: driver.Security{ReadOnlyRootfs: true}},
		"bad type":   {Type: "pod"},
		"user name":  {User: "www-data"},
		"network":    {Network: "host"},
	} {
		if _, err := buildInstance(basePlan(spec)); !errors.Is(err, driver.ErrUnsupported) {
			t.Errorf("%s: err = %v, want ErrUnsupported", name, err)
		}
	}
}

func TestLimitsConfig(t *testing.T) {
	cases := []struct {
		typ  string
		l    driver.Limits
		want map[string]string
	}{
		{driver.TypeContainer, driver.Limits{CPUs: 0.5, PidsLimit: driver.PidsUnlimited}, map[string]string{"limits.cpu.allowance": "50ms/100ms"}},
		{driver.TypeContainer, driver.Limits{CPUs: 1.25, PidsLimit: driver.PidsUnlimited}, map[string]string{"limits.cpu.allowance": "125ms/100ms"}},
		{driver.TypeContainer, driver.Limits{CPUs: 2, PidsLimit: driver.PidsUnlimited}, map[string]string{"limits.cpu": "2"}},
		{driver.TypeContainer, driver.Limits{MemoryBytes: 256 << 20, PidsLimit: 64},
			map[string]string{"limits.memory": "268435456", "limits.processes": "64"}},
		{driver.TypeVM, driver.Limits{CPUs: 0.5}, map[string]string{"limits.cpu": "1"}},
		{driver.TypeContainer, driver.Limits{PidsLimit: driver.PidsUnlimited}, map[string]string{}},
		// A container without pids_limit gets the default; a VM does not.
		{driver.TypeContainer, driver.Limits{}, map[string]string{"limits.processes": "4096"}},
		{driver.TypeVM, driver.Limits{}, map[string]string{}},
	}
	for _, c := range cases {
		got, err := limitsConfig(c.typ, c.l)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("limitsConfig(%s, %+v) = %v, %v; want %v", c.typ, c.l, got, err, c.want)
		}
	}
}

func TestCommandRawLXC(t *testing.T) {
	deadline := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	spec := driver.InstanceSpec{Command: []string{"sleep", "3600"}, User: "1000:1001", Workdir: "/srv",
		Security: driver.Security{Init: true, NoNewPrivileges: true, CapDrop: []string{"NET_RAW", "CAP_MKNOD"}, CapAdd: []string{"MKNOD"}}}
	raw, err := rawLXC(spec, deadline)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"lxc.init.cmd = /.sandbox/sandbox-agent init --deadline 2030-01-02T03:04:05.000Z --grace 10s -- sleep 3600\n",
		"lxc.signal.halt = SIGTERM\n",
		"lxc.mount.auto = cgroup:mixed:force\n",
		"lxc.environment = PATH=" + defaultPath + "\n",
		"lxc.init.cwd = /srv\n",
		"lxc.init.uid = 1000\n",
		"lxc.init.gid = 1001\n",
		"lxc.no_new_privs = 1\n",
		"lxc.cap.drop = net_raw\n", // MKNOD is added back
	} {
		if !strings.Contains(raw, line) {
			t.Errorf("raw.lxc lacks %q:\n%s", line, raw)
		}
	}
}

// LXC splits lxc.init.cmd at spaces, so such commands reach the agent init
// through an argv file (no shell needed in the image).
func TestCommandWithSpacesUsesArgvFile(t *testing.T) {
	spec := driver.InstanceSpec{Command: []string{"sh", "-c", "echo 'a b' && sleep 1"}}
	if !agentInit(spec) {
		t.Error("a command with spaces needs the agent init")
	}
	raw, err := rawLXC(spec, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(raw, "lxc.init.cmd = /.sandbox/sandbox-agent init --grace 10s --argv-file "+commandArgvFile+"\n") {
		t.Errorf("raw.lxc does not read the argv file:\n%s", raw)
	}
	_, files := prestart(spec, time.Time{})
	if len(files) != 1 || files[0].Path != commandArgvFile {
		t.Fatalf("prestart files %+v, want the argv file", files)
	}
	want := `["sh","-c","echo 'a b' \u0026\u0026 sleep 1"]` + "\n"
	if string(files[0].Content) != want {
		t.Errorf("argv file:\n%s\nwant:\n%s", files[0].Content, want)
	}
}

// Lifetime without command: a detached `agent poweroff`, launched by the
// container's LXC start hook (so on every start, whoever makes it), which
// needs CAP_SYS_BOOT even when the user drops every capability.
func TestWatcherRequest(t *testing.T) {
	deadline := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	want := []string{"/.sandbox/sandbox-agent", "service", "--log", watcherLog, "--pidfile", watcherPidFile, "--",
		"/.sandbox/sandbox-agent", "poweroff", "--at", "2030-01-02T03:04:05.000Z"}
	if got := watcherCommand(deadline); !reflect.DeepEqual(got, want) {
		t.Errorf("watcherCommand = %q\nwant %q", got, want)
	}
	hook := "lxc.hook.version = 1\nlxc.hook.start = " + lifetimeHook + "\n"
	spec := driver.InstanceSpec{Lifetime: time.Hour, Security: driver.Security{CapDrop: []string{"ALL"}}}
	raw, err := rawLXC(spec, deadline)
	if err != nil || raw != hook+"lxc.cap.keep = sys_boot\n" {
		t.Errorf("raw.lxc = %q, %v; want the start hook and sys_boot kept", raw, err)
	}
	spec.Security = driver.Security{CapDrop: []string{"SYS_BOOT", "NET_RAW"}}
	if raw, _ := rawLXC(spec, deadline); raw != hook+"lxc.cap.drop = net_raw\n" {
		t.Errorf("raw.lxc = %q; want sys_boot not dropped", raw)
	}
	dirs, files := prestart(spec, deadline)
	wantScript := "#!/bin/sh\n# Written by terraform-provider-sandbox: arms the lifetime watcher on every start.\nexec " +
		strings.Join(want, " ") + "\n"
	if len(files) != 1 || files[0].Path != lifetimeHook || files[0].Mode != 0o755 || string(files[0].Content) != wantScript ||
		!reflect.DeepEqual(dirs, []string{runDir}) {
		t.Errorf("prestart = %q, %+v; want %s (0755) holding\n%s", dirs, files, lifetimeHook, wantScript)
	}
	// A VM has no LXC: its watcher is started through its guest agent.
	if _, files := prestart(driver.InstanceSpec{Type: driver.TypeVM, Lifetime: time.Hour}, deadline); len(files) != 0 {
		t.Errorf("VM prestart files %+v", files)
	}
	if _, err := buildInstance(basePlan(driver.InstanceSpec{Type: driver.TypeVM, Lifetime: time.Hour})); err != nil {
		t.Errorf("VM with a lifetime: %v", err)
	}
}

func TestNetworkModes(t *testing.T) {
	for mode, want := range map[string]map[string]string{
		driver.NetworkNone:     {"type": "none"},
		driver.NetworkIsolated: {"type": "nic", "network": "incusbr0", "name": "eth0"},
		"":                     {"type": "nic", "network": "incusbr0", "name": "eth0"},
		driver.NetworkBridge:   {"type": "nic", "network": "lxdbr0", "name": "eth0"},
	} {
		got, err := nicDevice(mode, "incusbr0", "lxdbr0")
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("nicDevice(%q) = %v, %v; want %v", mode, got, err, want)
		}
	}
}

func TestContainerPortsAndAgent(t *testing.T) {
	spec := driver.InstanceSpec{Name: "b-c", Command: []string{"httpd", "-f"}, Security: driver.Security{Init: true},
		Ports: []driver.PortSpec{{Name: "http", Port: 8080, Protocol: "tcp"}, {Name: "dns", Port: 53, Protocol: "udp"}}}
	p := basePlan(spec)
	p.AgentHostPath = "/usr/bin/sandbox-agent"
	p.Ports = []publishedPort{
		{PortSpec: spec.Ports[0], ListenIP: "127.0.0.7", HostPort: 8080},
		{PortSpec: spec.Ports[1], ListenIP: "127.0.0.1", HostPort: 21000},
	}
	req, err := buildInstance(p)
	if err != nil {
		t.Fatal(err)
	}
	wantDevs := map[string]map[string]string{
		"sandbox-port-http": {"type": "proxy", "listen": "tcp:127.0.0.7:8080", "connect": "tcp:127.0.0.1:8080", "bind": "host"},
		"sandbox-port-dns":  {"type": "proxy", "listen": "udp:127.0.0.1:21000", "connect": "udp:127.0.0.1:53", "bind": "host"},
		"sandbox-agent":     {"type": "disk", "source": "/usr/bin/sandbox-agent", "path": "/.sandbox/sandbox-agent", "readonly": "true"},
	}
	for name, want := range wantDevs {
		if !reflect.DeepEqual(req.Devices[name], want) {
			t.Errorf("device %s = %v, want %v", name, req.Devices[name], want)
		}
	}
	if req.Type != api.InstanceTypeContainer || req.Config[keyCommand] != "1" {
		t.Errorf("type %q command key %q", req.Type, req.Config[keyCommand])
	}
}

func TestStatus(t *testing.T) {
	now := time.Now()
	mk := func(code api.StatusCode, power string) *api.InstanceFull {
		return &api.InstanceFull{Instance: api.Instance{StatusCode: code, InstancePut: api.InstancePut{
			Config: map[string]string{"volatile.last_state.power": power}}}}
	}
	cases := []struct {
		inst    *api.InstanceFull
		expires time.Time
		want    string
	}{
		{mk(api.Running, "RUNNING"), time.Time{}, driver.StatusRunning},
		{mk(api.Stopped, "STOPPED"), time.Time{}, driver.StatusStopped},
		{mk(api.Stopped, ""), time.Time{}, driver.StatusCreated},
		{mk(api.Stopped, "STOPPED"), now.Add(-time.Second), driver.StatusExpired},
		{mk(api.Stopped, "STOPPED"), now.Add(time.Hour), driver.StatusStopped},
		{mk(api.Running, "RUNNING"), now.Add(-time.Second), driver.StatusExpired}, // being stopped by the agent
		{mk(api.Error, ""), time.Time{}, driver.StatusUnknown},
	}
	for i, c := range cases {
		if got := status(c.inst, c.expires, now); got != c.want {
			t.Errorf("case %d: status = %q, want %q", i, got, c.want)
		}
	}
}

func TestEngineName(t *testing.T) {
	if got := engineName("gpu", "worker-0"); got != "gpu-worker-0" {
		t.Errorf("engineName = %q", got)
	}
	long := engineName(strings.Repeat("b", 40), strings.Repeat("n", 40))
	if len(long) > maxNameLen || !strings.HasPrefix(long, "bbbb") {
		t.Errorf("long engineName %q (%d chars)", long, len(long))
	}
	if long == engineName(strings.Repeat("b", 40), strings.Repeat("n", 41)) {
		t.Error("truncated names collide")
	}
}

func TestCommandWithoutInit(t *testing.T) {
	spec := driver.InstanceSpec{Command: []string{"sleep", "1"}}
	raw, err := rawLXC(spec, time.Time{})
	if err != nil || !strings.HasPrefix(raw, "lxc.init.cmd = sleep 1\n") || agentInit(spec) {
		t.Errorf("security.init = false: raw.lxc %q, %v; want the command itself as PID 1", raw, err)
	}
	spec.Lifetime = time.Minute // the deadline needs the agent anyway
	if !agentInit(spec) {
		t.Error("lifetime without the agent")
	}
}

func TestSecurityLines(t *testing.T) {
	cases := []struct {
		sec  driver.Security
		want []string
	}{
		{driver.Security{}, nil},
		{driver.Security{ReadOnlyRootfs: true, CapDrop: []string{"ALL"}, CapAdd: []string{"NET_BIND_SERVICE"}},
			[]string{"lxc.rootfs.options = ro", "lxc.mount.entry = tmpfs .sandbox/run tmpfs rw,nosuid,nodev,mode=0755 0 0", "lxc.cap.keep = net_bind_service"}},
		{driver.Security{CapDrop: []string{"ALL"}}, []string{"lxc.cap.keep = none"}},
	}
	for _, c := range cases {
		if got := securityLines(c.sec); !reflect.DeepEqual(got, c.want) {
			t.Errorf("securityLines(%+v) = %q, want %q", c.sec, got, c.want)
		}
	}
	// A system container gets the hardening too, without a command.
	raw, _ := rawLXC(driver.InstanceSpec{Security: driver.Security{NoNewPrivileges: true}}, time.Time{})
	if raw != "lxc.no_new_privs = 1\n" {
		t.Errorf("system container raw.lxc %q", raw)
	}
}

// VM ports are not proxied: the endpoint is the VM's own address and port.
func TestVMEndpoints(t *testing.T) {
	d := &Driver{cfg: driver.IncusConfig{AdvertiseHost: "127.0.0.1"}}
	out := driver.Instance{Type: driver.TypeVM, IPAddress: "10.123.45.7", Endpoints: map[string]string{},
		Labels: map[string]string{driver.LabelPorts: portsLabel([]driver.PortSpec{{Name: "http", Port: 8080}, {Name: "dns", Port: 53, Protocol: "udp"}})}}
	d.fillEndpoints(&out, &api.InstanceFull{})
	want := map[string]string{"http": "10.123.45.7:8080", "dns": "10.123.45.7:53"}
	if !reflect.DeepEqual(out.Endpoints, want) {
		t.Errorf("VM endpoints %v, want %v", out.Endpoints, want)
	}
	// No address yet (booting): no endpoints rather than wrong ones.
	out = driver.Instance{Type: driver.TypeVM, Endpoints: map[string]string{}, Labels: out.Labels}
	d.fillEndpoints(&out, &api.InstanceFull{})
	if len(out.Endpoints) != 0 {
		t.Errorf("VM without an address: endpoints %v", out.Endpoints)
	}
}

// A VM's lifetime is kept by the watcher inside it (startWatcher), not by
// raw.lxc, which VMs do not take; nor do they get the agent bind mount.
func TestVMLifetimeRequest(t *testing.T) {
	spec := driver.InstanceSpec{Name: "b-vm2", Type: driver.TypeVM, Lifetime: time.Hour,
		Security: driver.Security{NoNewPrivileges: true, CapDrop: []string{"ALL"}}}
	req, err := buildInstance(basePlan(spec))
	if err != nil {
		t.Fatal(err)
	}
	if raw, ok := req.Config["raw.lxc"]; ok {
		t.Errorf("VM request has raw.lxc %q", raw)
	}
	if _, ok := req.Devices[devAgent]; ok {
		t.Error("VM request bind-mounts the agent")
	}
	if !needsWatcher(spec) {
		t.Error("a VM's lifetime needs the watcher")
	}
	// Limits updated in place keep the VM rules.
	lim, err := limitsConfig(driver.TypeVM, driver.Limits{CPUs: 2.5, MemoryBytes: 2 << 30})
	if err != nil || !reflect.DeepEqual(lim, map[string]string{"limits.cpu": "3", "limits.memory": "2147483648"}) {
		t.Errorf("VM limits %v, %v", lim, err)
	}
	if _, err := limitsConfig(driver.TypeVM, driver.Limits{PidsLimit: 5}); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("VM pids limit: %v", err)
	}
}

func TestTransportOf(t *testing.T) {
	for addr, want := range map[string]string{
		"": transportUnix, "unix:///var/lib/incus/unix.socket": transportUnix, "/run/incus/unix.socket": transportUnix,
		"https://srv:8443": transportHTTPS, "ssh://root@srv:22": transportSSH, "ssh://srv/run/incus/unix.socket": transportSSH,
	} {
		if got, err := transportOf(addr); err != nil || got != want {
			t.Errorf("transportOf(%q) = %q, %v; want %q", addr, got, err, want)
		}
	}
	for _, bad := range []string{"tcp://srv:8443", "srv:8443"} {
		if _, err := transportOf(bad); err == nil {
			t.Errorf("transportOf(%q) accepted", bad)
		}
	}
}
