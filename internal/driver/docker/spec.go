package docker

// observedSpec reads back, for import, what a container was created with:
// the inverse of plan (instance.go) as far as the engine reports it.

import (
	"context"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

func (d *Driver) observedSpec(ctx context.Context, c container.InspectResponse) *driver.InstanceSpec {
	if c.Config == nil {
		return nil
	}
	spec := &driver.InstanceSpec{
		Name:    c.Config.Labels[driver.LabelName],
		Type:    driver.TypeContainer,
		Image:   c.Config.Image,
		Labels:  c.Config.Labels,
		Workdir: c.Config.WorkingDir,
		User:    c.Config.User,
		Ports:   portsFromLabel(c.Config.Labels[driver.LabelPorts]),
	}
	var imgEnv []string
	var imgCmd []string
	if cli, err := d.api(); err == nil {
		if ii, err := cli.ImageInspect(ctx, c.Image); err == nil && ii.Config != nil {
			imgEnv = ii.Config.Env
			imgCmd = append(append([]string{}, ii.Config.Entrypoint...), ii.Config.Cmd...)
			// Podman reports "/" for an image without a working directory.
			if ii.Config.WorkingDir == spec.Workdir || (spec.Workdir == "/" && ii.Config.WorkingDir == "") {
				spec.Workdir = ""
			}
			if ii.Config.User == spec.User {
				spec.User = ""
			}
		}
	}
	for _, kv := range c.Config.Env {
		if slices.Contains(imgEnv, kv) {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		if spec.Env == nil {
			spec.Env = map[string]string{}
		}
		spec.Env[k] = v
	}
	spec.Command = commandOf(c.Config.Entrypoint, c.Config.Cmd)
	if slices.Equal(spec.Command, imgCmd) {
		spec.Command = nil
	}
	if hc := c.HostConfig; hc != nil {
		spec.CPUs = float64(hc.NanoCPUs) / 1e9
		spec.MemoryBytes = hc.Memory
		if hc.PidsLimit != nil {
			spec.PidsLimit = *hc.PidsLimit
		}
		spec.Network = d.networkOf(c)
		for _, m := range hc.Mounts {
			if m.Type != mount.TypeVolume || strings.HasPrefix(m.Target, "/.sandbox") || !strings.HasPrefix(m.Source, d.backend+"-") {
				continue // the agent's and the state directory's volumes
			}
			spec.Mounts = append(spec.Mounts, driver.Mount{Volume: strings.TrimPrefix(m.Source, d.backend+"-"), Target: m.Target, ReadOnly: m.ReadOnly})
		}
	}
	spec.Running = c.State != nil && c.State.Running
	return spec
}

// commandOf is the user's command from a container's Entrypoint and Cmd:
// under the agent as init, what follows its "--".
func commandOf(entrypoint, cmd []string) []string {
	if len(entrypoint) > 1 && entrypoint[0] == agent.PathInInstance && entrypoint[1] == "init" {
		if i := slices.Index(entrypoint, "--"); i >= 0 {
			return append([]string{}, entrypoint[i+1:]...)
		}
		return nil
	}
	return append(append([]string{}, entrypoint...), cmd...)
}

// portsFromLabel decodes driver.LabelPorts ("name=port/proto,...").
func portsFromLabel(s string) []driver.PortSpec {
	var out []driver.PortSpec
	for _, item := range strings.Split(s, ",") {
		name, rest, ok := strings.Cut(item, "=")
		if !ok {
			continue
		}
		port, proto, _ := strings.Cut(rest, "/")
		n := 0
		for _, r := range port {
			if r < '0' || r > '9' {
				n = -1
				break
			}
			n = n*10 + int(r-'0')
		}
		if n <= 0 {
			continue
		}
		if proto == "" {
			proto = "tcp"
		}
		out = append(out, driver.PortSpec{Name: name, Port: n, Protocol: proto})
	}
	return out
}

// networkOf is the network mode of a container, judged by the networks it is
// attached to rather than by NetworkMode, which Podman reports as "bridge"
// for a container on a user-defined network.
func (d *Driver) networkOf(c container.InspectResponse) string {
	if c.HostConfig != nil && string(c.HostConfig.NetworkMode) == "none" {
		return driver.NetworkNone
	}
	if c.NetworkSettings != nil {
		if _, ok := c.NetworkSettings.Networks[d.networkName()]; ok {
			return driver.NetworkIsolated
		}
	}
	if c.HostConfig != nil && string(c.HostConfig.NetworkMode) == d.networkName() {
		return driver.NetworkIsolated
	}
	return driver.NetworkBridge
}
