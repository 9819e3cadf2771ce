package docker

import (
	"context"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// removeInterrupted removes the container name when it is what an
// interrupted create left behind: a container of this backend and instance
// name that was never started, while the create now asks for a running one.
// That happens when the connection to a remote engine dies between create and
// start (an sshd that went away): the clean-up then cannot reach the engine
// either, and the apply that failed recorded nothing in state. Removing it
// lets the next apply converge. It reports whether it removed one; any other
// container of that name stays ErrAlreadyExists.
func (d *Driver) removeInterrupted(ctx context.Context, cli *client.Client, name string, spec driver.InstanceSpec) bool {
	if !spec.Running {
		return false
	}
	c, err := cli.ContainerInspect(ctx, name)
	if err != nil || c.ContainerJSONBase == nil || c.State == nil || c.Config == nil {
		return false
	}
	l := c.Config.Labels
	owned := l[driver.LabelManagedBy] == driver.ManagedByValue && l[driver.LabelBackend] == d.backend && l[driver.LabelName] == spec.Name
	if !owned || !neverStarted(c.State) {
		return false
	}
	return cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}) == nil
}

// neverStarted reports a container in the "created" state that has no start
// time: it never ran, so nothing can depend on it.
func neverStarted(s *container.State) bool {
	return s.Status == "created" && (s.StartedAt == "" || s.StartedAt == "0001-01-01T00:00:00Z")
}
