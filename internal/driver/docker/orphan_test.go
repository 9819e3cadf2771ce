package docker_test

import (
	"errors"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// A never-started container of the same backend and name (what a create
// cut off by a dead connection leaves) is replaced by the next create; a
// started one is not.
func TestInterruptedCreateIsReplaced(t *testing.T) {
	d, name := openNamed(t, driver.DockerConfig{})
	cli := rawClient(t)
	labels := driver.ObjectLabels(name, nil, nil)
	labels[driver.LabelName] = "cut"
	if _, err := cli.ContainerCreate(ctxT(t), &container.Config{Image: fixture.image, Cmd: []string{"sleep", "60"}, Labels: labels},
		nil, nil, nil, name+"-cut"); err != nil {
		t.Fatal(err)
	}
	spec := driver.InstanceSpec{Name: "cut", Image: fixture.image, Command: []string{"sleep", "60"}, Running: true}
	inst, err := d.CreateInstance(ctxT(t), spec)
	if err != nil || !inst.Running() {
		t.Fatalf("create over an interrupted one: %+v, %v", inst, err)
	}
	if _, err := d.CreateInstance(ctxT(t), spec); !errors.Is(err, driver.ErrAlreadyExists) {
		t.Fatalf("create over a running one: %v, want ErrAlreadyExists", err)
	}
}
