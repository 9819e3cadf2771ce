package incus

// Published ports are Incus proxy devices: incusd listens on the host and
// forwards each connection to 127.0.0.1:PORT inside the container.
//
//   loopback_ip: one 127.0.0.x per instance (portalloc), same port numbers.
//   dynamic:     one host port per published port, picked here because proxy
//                devices cannot listen on port 0. Candidates come from
//                dynamicPortRange, skipping ports used by this backend's
//                proxy devices and ports reserved by this process; on a local
//                server the port must also be bindable right now.
//
// The listen address is on the Incus host, so loopback_ip is meant for a
// local server; with a remote one, use dynamic (listening on 0.0.0.0) and
// advertise_host (default: the server's host name).

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// dynamicPortRange is where dynamic host ports are picked (below Linux's
// ephemeral range, so outgoing connections never hold them).
var dynamicPortRange = [2]int{20000, 32000}

// allocatePorts assigns host addresses to spec's ports. release returns
// in-process reservations once the instance carries them (or failed).
func (d *Driver) allocatePorts(ctx context.Context, spec driver.InstanceSpec) (ports []publishedPort, loopbackIP string, release func(), err error) {
	release = func() {}
	if spec.Type == driver.TypeVM {
		return nil, "", release, nil // reached on the VM's own address
	}
	existing, err := d.ListInstances(ctx)
	if err != nil {
		return nil, "", release, err
	}
	if d.cfg.PortStrategy == driver.PortStrategyLoopbackIP {
		used := make([]string, 0, len(existing))
		for _, in := range existing {
			used = append(used, in.LoopbackIP)
		}
		addr, rel, err := d.loopback.Reserve(used)
		if err != nil {
			return nil, "", release, err
		}
		for _, p := range spec.Ports {
			ports = append(ports, publishedPort{PortSpec: p, ListenIP: addr.String(), HostPort: p.Port})
		}
		return ports, addr.String(), rel, nil
	}
	return d.dynamicPorts(spec, existing)
}

// dynamicPorts picks one free host port per published port.
func (d *Driver) dynamicPorts(spec driver.InstanceSpec, existing []driver.Instance) ([]publishedPort, string, func(), error) {
	listen := "127.0.0.1"
	if d.remote {
		listen = "0.0.0.0"
	}
	used := map[int]bool{}
	for _, in := range existing {
		for _, ep := range in.Endpoints {
			if _, p, err := net.SplitHostPort(ep); err == nil {
				n, _ := strconv.Atoi(p)
				used[n] = true
			}
		}
	}
	d.portMu.Lock()
	defer d.portMu.Unlock()
	var picked []int
	var out []publishedPort
	for _, p := range spec.Ports {
		hp, err := d.pickPort(listen, p.Protocol, used)
		if err != nil {
			for _, q := range picked {
				delete(d.ports, q)
			}
			return nil, "", func() {}, err
		}
		picked = append(picked, hp)
		d.ports[hp] = true
		out = append(out, publishedPort{PortSpec: p, ListenIP: listen, HostPort: hp})
	}
	release := func() {
		d.portMu.Lock()
		defer d.portMu.Unlock()
		for _, q := range picked {
			delete(d.ports, q)
		}
	}
	return out, "", release, nil
}

// pickPort tries random candidates; portMu is held.
func (d *Driver) pickPort(listen, proto string, used map[int]bool) (int, error) {
	lo, hi := dynamicPortRange[0], dynamicPortRange[1]
	for range 200 {
		p := lo + rand.IntN(hi-lo)
		if used[p] || d.ports[p] {
			continue
		}
		if !d.remote && !bindable(listen, proto, p) {
			continue
		}
		return p, nil
	}
	return 0, fmt.Errorf("no free host port in %d-%d", lo, hi)
}

// bindable checks that a local port is free at this moment.
func bindable(ip, proto string, port int) bool {
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	if proto == "udp" {
		c, err := net.ListenPacket("udp", addr)
		if err != nil {
			return false
		}
		_ = c.Close()
		return true
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// fillEndpoints reads the published ports back from the proxy devices (VMs:
// the instance address and the ports label).
func (d *Driver) fillEndpoints(out *driver.Instance, inst *api.InstanceFull) {
	if out.Type == driver.TypeVM {
		if out.IPAddress == "" {
			return
		}
		for _, p := range parsePortsLabel(out.Labels[driver.LabelPorts]) {
			out.Endpoints[p.Name] = net.JoinHostPort(out.IPAddress, strconv.Itoa(p.Port))
		}
		return
	}
	for name, dev := range inst.Devices {
		if dev["type"] != "proxy" || !strings.HasPrefix(name, devPortPrefix) {
			continue
		}
		ip, port, ok := parseListen(dev["listen"])
		if !ok {
			continue
		}
		out.Endpoints[strings.TrimPrefix(name, devPortPrefix)] = net.JoinHostPort(d.endpointHost(ip), port)
	}
}

// endpointHost is where a listen address is reached from outside.
func (d *Driver) endpointHost(listenIP string) string {
	// loopback_ip on a local server: the sandbox's own 127.x address is its
	// endpoint; an advertise_host (127.0.0.1 by default) would not reach it.
	if ip := net.ParseIP(listenIP); !d.remote && ip != nil && ip.IsLoopback() {
		return listenIP
	}
	if d.cfg.AdvertiseHost != "" {
		return d.cfg.AdvertiseHost
	}
	if listenIP != "0.0.0.0" && listenIP != "::" {
		return listenIP
	}
	if d.remote {
		if u, err := url.Parse(d.cfg.Address); err == nil {
			return u.Hostname()
		}
	}
	return "127.0.0.1"
}

// parseListen splits "tcp:IP:PORT".
func parseListen(s string) (ip, port string, ok bool) {
	_, rest, found := strings.Cut(s, ":")
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, ':')
	if i < 0 {
		return "", "", false
	}
	return strings.Trim(rest[:i], "[]"), rest[i+1:], true
}

// parsePortsLabel reverses portsLabel.
func parsePortsLabel(s string) []driver.PortSpec {
	var out []driver.PortSpec
	for _, part := range strings.Split(s, ",") {
		name, rest, ok := strings.Cut(part, "=")
		if !ok {
			continue
		}
		num, proto, _ := strings.Cut(rest, "/")
		n, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		out = append(out, driver.PortSpec{Name: name, Port: n, Protocol: proto})
	}
	return out
}
