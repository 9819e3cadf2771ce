package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/tarball"
)

// networkName is the backend's user-defined bridge network.
func (d *Driver) networkName() string { return "sandbox-" + d.backend }

// objectName is the engine name of a backend's container or volume.
func (d *Driver) objectName(name string) string { return d.backend + "-" + name }

// EnsureScope creates the backend network if missing. Concurrent callers in
// this process wait for one creation; across processes the engine's
// duplicate-name check (which the client always requests) makes the loser
// fail with a conflict, which counts as success.
func (d *Driver) EnsureScope(ctx context.Context) error {
	d.scopeMu.Lock()
	defer d.scopeMu.Unlock()
	if d.scopeReady {
		return nil
	}
	cli, err := d.api()
	if err != nil {
		return err
	}
	name := d.networkName()
	if _, err := cli.NetworkInspect(ctx, name, network.InspectOptions{}); err == nil {
		d.scopeReady = true
		return nil
	} else if !errors.Is(d.wrap(err, ""), driver.ErrNotFound) {
		return d.wrap(err, "network %q", name)
	}
	create := func() error {
		_, err := cli.NetworkCreate(ctx, name, network.CreateOptions{
			Driver:   "bridge",
			Internal: d.dc.Internal,
			Labels:   driver.ObjectLabels(d.backend, d.cfg.Labels, nil),
		})
		return err
	}
	err = create()
	for try := 1; try < 5 && podmanInterfaceRace(err); try++ { // podman.go
		time.Sleep(time.Duration(try) * 200 * time.Millisecond)
		err = create()
	}
	if err != nil && !isConflict(err) {
		return d.wrap(err, "create network %q", name)
	}
	d.scopeReady = true
	return nil
}

// ScopeExists reports whether the backend network is on the engine. It also
// forgets a cached "scope ready", so EnsureScope recreates a network that was
// deleted outside Terraform.
func (d *Driver) ScopeExists(ctx context.Context) (bool, error) {
	cli, err := d.api()
	if err != nil {
		return false, err
	}
	_, err = cli.NetworkInspect(ctx, d.networkName(), network.InspectOptions{})
	if err == nil {
		return true, nil
	}
	if err = d.wrap(err, "network %q", d.networkName()); !errors.Is(err, driver.ErrNotFound) {
		return false, err
	}
	d.scopeMu.Lock()
	d.scopeReady = false
	d.scopeMu.Unlock()
	return false, nil
}

// isConflict reports an "already exists" answer from the engine.
func isConflict(err error) bool {
	return err != nil && cerrdefs.IsConflict(podmanError(err)) // podmanError: podman.go
}

// DeleteScope removes the backend network; a missing one counts as done.
func (d *Driver) DeleteScope(ctx context.Context) error {
	cli, err := d.api()
	if err != nil {
		return err
	}
	d.scopeMu.Lock()
	defer d.scopeMu.Unlock()
	d.scopeReady = false
	name := d.networkName()
	err = cli.NetworkRemove(ctx, name)
	// dockerd 20.10 sometimes keeps a network's endpoint count after every
	// container on it is gone (moby#42119), most often after many
	// concurrent removals: the count can catch up, so a network that no
	// container uses is tried again for a few seconds before giving up.
	stale := hasActiveEndpoints(err) && unused(ctx, cli, name)
	for deadline := time.Now().Add(staleEndpointWait); stale && hasActiveEndpoints(err) && time.Now().Before(deadline); {
		select {
		case <-ctx.Done():
			return d.wrap(ctx.Err(), "delete network %q", name)
		case <-time.After(250 * time.Millisecond):
		}
		err = cli.NetworkRemove(ctx, name)
	}
	switch {
	case err == nil || errors.Is(d.wrap(err, ""), driver.ErrNotFound):
		return nil
	case stale && hasActiveEndpoints(err):
		return driver.WithAdvice(d.wrap(err, "delete network %q: no container uses it, but dockerd still counts an endpoint on it "+
			"(a dockerd bug, moby#42119, seen with 20.10 after many concurrent removals)", name),
			fmt.Sprintf("Only a restart of dockerd clears the count. Restart dockerd and run Terraform again, or leave the empty "+
				"network behind with `terraform state rm` of this backend and remove it later with `docker network rm %s`.", name))
	case hasActiveEndpoints(err) || isConflict(err):
		return d.wrap(fmt.Errorf("%w (%v)", driver.ErrInUse, err), "delete network %q: containers are still attached", name)
	}
	return d.wrap(err, "delete network %q", name)
}

// staleEndpointWait is how long DeleteScope waits for dockerd's endpoint
// count of an unused network to catch up.
const staleEndpointWait = 3 * time.Second

func hasActiveEndpoints(err error) bool {
	return err != nil && strings.Contains(err.Error(), "has active endpoints")
}

// unused reports whether no container (any state, any owner) is on the
// network; false when that cannot be told.
func unused(ctx context.Context, cli *client.Client, network string) bool {
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("network", network))})
	return err == nil && len(list) == 0
}

// CreateVolume creates the named volume and seeds it from SourceDir. A
// volume of that name that already exists is reported, not adopted.
func (d *Driver) CreateVolume(ctx context.Context, spec driver.VolumeSpec) (driver.Volume, error) {
	cli, err := d.api()
	if err != nil {
		return driver.Volume{}, err
	}
	name := d.objectName(spec.Name)
	if _, err := cli.VolumeInspect(ctx, name); err == nil {
		return driver.Volume{}, fmt.Errorf("docker backend %q: volume %q: %w", d.backend, name, driver.ErrAlreadyExists)
	}
	labels := driver.ObjectLabels(d.backend, nil, spec.Labels)
	labels[driver.LabelName] = spec.Name
	if err := d.createVolume(ctx, name, labels); err != nil {
		return driver.Volume{}, err
	}
	if spec.SourceDir != "" {
		if err := d.seedFromDir(ctx, name, spec.SourceDir); err != nil {
			_ = cli.VolumeRemove(context.WithoutCancel(ctx), name, true)
			return driver.Volume{}, err
		}
	}
	return driver.Volume{Name: spec.Name, Labels: labels}, nil
}

func (d *Driver) createVolume(ctx context.Context, name string, labels map[string]string) error {
	cli, err := d.api()
	if err != nil {
		return err
	}
	_, err = cli.VolumeCreate(ctx, volume.CreateOptions{Name: name, Driver: "local", Labels: labels})
	return d.wrap(err, "create volume %q", name)
}

// seedFromDir copies the directory's contents (not the directory itself)
// into the volume's root.
func (d *Driver) seedFromDir(ctx context.Context, name, dir string) error {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return fmt.Errorf("docker backend %q: volume %q: source %s is not a readable directory (%v)", d.backend, name, dir, err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarball.WriteDir(pw, dir, nil, nil)) }()
	defer pr.Close()
	return d.seedVolume(ctx, name, pr)
}

// InspectVolume finds a volume of this backend by its user-facing name.
func (d *Driver) InspectVolume(ctx context.Context, name string) (driver.Volume, error) {
	cli, err := d.api()
	if err != nil {
		return driver.Volume{}, err
	}
	v, err := cli.VolumeInspect(ctx, d.objectName(name))
	if err != nil {
		return driver.Volume{}, d.wrap(err, "volume %q", d.objectName(name))
	}
	return driver.Volume{Name: name, Labels: v.Labels}, nil
}

// DeleteVolume removes the volume; not found counts as done.
func (d *Driver) DeleteVolume(ctx context.Context, name string) error {
	cli, err := d.api()
	if err != nil {
		return err
	}
	err = cli.VolumeRemove(ctx, d.objectName(name), false)
	if err != nil && !errors.Is(d.wrap(err, ""), driver.ErrNotFound) {
		return d.wrap(err, "delete volume %q", d.objectName(name))
	}
	return nil
}

// scopeFilter selects this backend's objects in list calls.
func (d *Driver) scopeFilter() filters.Args {
	f := filters.NewArgs()
	for k, v := range driver.ScopeLabels(d.backend) {
		f.Add("label", k+"="+v)
	}
	return f
}
