package incus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// projectFeatures make images, profiles and custom volumes per project, so
// each backend is its own scope; networks stay shared.
var projectFeatures = map[string]string{
	"features.images":          "true",
	"features.profiles":        "true",
	"features.storage.volumes": "true",
	"features.storage.buckets": "true",
	"features.networks":        "false",
}

// EnsureScope creates the backend's project (if missing) with a default
// profile holding a root disk and a NIC, so the project is usable from the
// incus CLI too. An existing project is used as it is.
func (d *Driver) EnsureScope(ctx context.Context) error {
	if d.cfg.Project == "default" {
		return nil
	}
	g, err := d.global(ctx)
	if err != nil {
		return err
	}
	if _, _, err := g.GetProject(d.cfg.Project); err == nil {
		return nil
	} else if !api.StatusErrorCheck(err, 404) {
		return d.errf(err, "project %q", d.cfg.Project)
	}
	config := map[string]string{}
	for k, v := range projectFeatures {
		config[k] = v
	}
	labelsToConfig(config, d.objectLabels(nil))
	err = g.CreateProject(api.ProjectsPost{Name: d.cfg.Project, ProjectPut: api.ProjectPut{
		Config: config, Description: "sandbox backend " + d.backend + " (terraform-provider-sandbox)",
	}})
	if err != nil {
		if errors.Is(translate(err), driver.ErrAlreadyExists) {
			return nil // created concurrently
		}
		return d.errf(err, "create project %q", d.cfg.Project)
	}
	return d.errf(d.initProfile(ctx), "project %q: default profile", d.cfg.Project)
}

// initProfile gives the new project's (empty) default profile a root disk in
// the backend's pool and a NIC on its network.
func (d *Driver) initProfile(ctx context.Context) error {
	c, err := d.client(ctx)
	if err != nil {
		return err
	}
	p, etag, err := c.GetProfile("default")
	if err != nil {
		return err
	}
	put := p.Writable()
	if put.Devices == nil {
		put.Devices = map[string]map[string]string{}
	}
	put.Devices[devRoot] = map[string]string{"type": "disk", "path": "/", "pool": d.cfg.StoragePool}
	put.Devices[devNIC] = map[string]string{"type": "nic", "network": d.cfg.Network, "name": devNIC}
	return c.UpdateProfile("default", put, etag)
}

// DeleteScope deletes the project if this backend created it. Incus refuses
// while instances, images or volumes remain, which is reported as an error.
func (d *Driver) DeleteScope(ctx context.Context) error {
	if d.cfg.Project == "default" {
		return nil
	}
	g, err := d.global(ctx)
	if err != nil {
		return err
	}
	p, _, err := g.GetProject(d.cfg.Project)
	if err != nil {
		if api.StatusErrorCheck(err, 404) {
			return nil
		}
		return d.errf(err, "project %q", d.cfg.Project)
	}
	if !d.ours(p.Config) {
		return nil // not created by this backend: leave it
	}
	// Instances left in it: refuse before dropping the image copies, which
	// a backend that stays would otherwise have to copy again.
	c, err := d.client(ctx)
	if err != nil {
		return err
	}
	// A failed list is not fatal: the project's deletion then says why.
	if names, err := c.GetInstanceNames(api.InstanceTypeAny); err == nil && len(names) > 0 {
		return d.errf(fmt.Errorf("%w: instances %s", driver.ErrInUse, strings.Join(names, ", ")),
			"delete project %q", d.cfg.Project)
	}
	if err := d.deleteCopiedImages(ctx); err != nil {
		return err
	}
	err = g.DeleteProject(d.cfg.Project)
	if err != nil && strings.Contains(err.Error(), "Only empty projects can be removed") {
		return d.errf(fmt.Errorf("%w (%v)", driver.ErrInUse, err), "delete project %q: volumes or images are still in it", d.cfg.Project)
	}
	return d.errf(err, "delete project %q", d.cfg.Project)
}

// Info reports the server and its capabilities; VMs only when the server
// runs the qemu driver.
func (d *Driver) Info(ctx context.Context) (driver.Info, error) {
	g, err := d.global(ctx)
	if err != nil {
		return driver.Info{}, err
	}
	srv, _, err := g.GetServer()
	if err != nil {
		return driver.Info{}, d.errf(err, "server info")
	}
	res, err := g.GetServerResources()
	if err != nil {
		return driver.Info{}, d.errf(err, "server resources")
	}
	env := srv.Environment
	info := driver.Info{
		EngineVersion: env.ServerVersion,
		OS:            strings.TrimSpace(env.OSName + " " + env.OSVersion),
		Arch:          env.KernelArchitecture,
		CPUs:          int64(res.CPU.Total),
		MemoryBytes:   int64(res.Memory.Total),
		Capabilities:  capabilities(env.Driver),
	}
	return info, nil
}

// capabilities lists what this driver does on a server with the given
// instance drivers ("lxc | qemu").
func capabilities(drivers string) []string {
	caps := []string{
		driver.CapPull, driver.CapArchive, driver.CapVolumes, driver.CapPorts,
		driver.CapNetworkNone, driver.CapNetworkIso, driver.CapNetworkBrdg,
		driver.CapCPULimit, driver.CapMemoryLimit, driver.CapPidsLimit, driver.CapDiskLimit,
		driver.CapLifetime, driver.CapExec, driver.CapFiles,
		driver.CapLoopbackPort, driver.CapDynamicPort,
	}
	for _, name := range strings.Split(drivers, "|") {
		switch strings.TrimSpace(name) {
		case "lxc":
			caps = append(caps, driver.CapContainers)
		case "qemu":
			caps = append(caps, driver.CapVMs)
		}
	}
	return caps
}

// checkVMs refuses a VM on a server that cannot run them, saying why,
// before anything is created.
func (d *Driver) checkVMs(ctx context.Context) error {
	g, err := d.global(ctx)
	if err != nil {
		return err
	}
	srv, _, err := g.GetServer()
	if err != nil {
		return d.errf(err, "server info")
	}
	if !slices.Contains(capabilities(srv.Environment.Driver), driver.CapVMs) {
		return fmt.Errorf("incus backend %q: type = vm: the server cannot run virtual machines (its instance drivers are %q; VMs need the qemu driver and KVM on the host): %w",
			d.backend, srv.Environment.Driver, driver.ErrUnsupported)
	}
	return nil
}

// serverArch is the server's primary architecture name (for metadata).
func (d *Driver) serverArch(ctx context.Context) (string, error) {
	g, err := d.global(ctx)
	if err != nil {
		return "", err
	}
	srv, _, err := g.GetServer()
	if err != nil {
		return "", err
	}
	if len(srv.Environment.Architectures) == 0 {
		return "", fmt.Errorf("the server reports no architecture")
	}
	return srv.Environment.Architectures[0], nil
}

// deleteCopiedImages removes the images resolveImage copied into the
// project (those without an alias of their own).
func (d *Driver) deleteCopiedImages(ctx context.Context) error {
	c, err := d.client(ctx)
	if err != nil {
		return err
	}
	imgs, err := c.GetImages()
	if err != nil {
		return d.errf(err, "list images of project %q", d.cfg.Project)
	}
	for _, img := range imgs {
		if img.Properties[keyCopied] != "1" || len(img.Aliases) > 0 {
			continue
		}
		op, err := c.DeleteImage(img.Fingerprint)
		if err == nil {
			err = op.WaitContext(ctx)
		}
		if err != nil && !api.StatusErrorCheck(err, 404) {
			return d.errf(err, "delete image %s", img.Fingerprint)
		}
	}
	d.images.clear()
	return nil
}
