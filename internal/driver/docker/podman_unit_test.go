package docker

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/system"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

func TestPodmanErrorMapsConflicts(t *testing.T) {
	internal := func(msg string) error {
		return fmt.Errorf("Error response from daemon: %s: %w", msg, cerrdefs.ErrInternal)
	}
	for msg, conflict := range map[string]bool{
		`container create: the container name "b-x" is already in use by 12ab. You have to remove that container to be able to reuse that name: that name is already in use`: true,
		"network name sandbox-b already used: network already exists":                                                         true,
		"volume with name b-v already exists: volume already exists":                                                          true,
		`"sandbox-b" has associated containers with it. Use -f to forcibly delete containers and pods: network is being used`: true,
		"runc: runc create failed: unable to start container process":                                                         false,
	} {
		err := podmanError(internal(msg))
		if got := cerrdefs.IsConflict(err); got != conflict {
			t.Errorf("%q: conflict=%v, want %v", msg, got, conflict)
		}
		if !errors.Is(err, cerrdefs.ErrInternal) {
			t.Errorf("%q: the original error is lost: %v", msg, err)
		}
	}
	// Docker's own answers and non-500 errors are left alone.
	notFound := fmt.Errorf("no such container: %w", cerrdefs.ErrNotFound)
	if err := podmanError(notFound); !errors.Is(err, notFound) || err.Error() != notFound.Error() {
		t.Errorf("not found changed to %v", err)
	}
	if podmanError(nil) != nil {
		t.Error("nil changed")
	}
	// wrap maps the container-name conflict to ErrAlreadyExists.
	d := &Driver{backend: "b"}
	if err := d.wrap(internal("that name is already in use"), "create container %q", "b-x"); !errors.Is(err, driver.ErrAlreadyExists) {
		t.Errorf("wrap: %v, want ErrAlreadyExists", err)
	}
}

func TestPodmanCapabilities(t *testing.T) {
	all := []string{driver.CapContainers, driver.CapCPULimit, driver.CapMemoryLimit, driver.CapPidsLimit, driver.CapExec}
	cases := []struct {
		name string
		sys  system.Info
		want []string
	}{
		{"rootful v1", system.Info{CgroupVersion: "1", PidsLimit: true, CPUCfsQuota: true, MemoryLimit: true}, all},
		{"rootful v2", system.Info{CgroupVersion: "2", PidsLimit: true, CPUCfsQuota: true}, all},
		{"rootless v1", system.Info{CgroupVersion: "1", PidsLimit: true, CPUCfsQuota: true,
			SecurityOptions: []string{"name=seccomp,profile=default", "name=rootless"}},
			[]string{driver.CapContainers, driver.CapExec}},
		{"no pids controller", system.Info{CgroupVersion: "1", CPUCfsQuota: true},
			[]string{driver.CapContainers, driver.CapCPULimit, driver.CapMemoryLimit, driver.CapExec}},
	}
	for _, c := range cases {
		if got := podmanCapabilities(c.sys, slices.Clone(all)); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestPodmanResources(t *testing.T) {
	b, err := json.Marshal(podmanResources(driver.Limits{CPUs: 0.5, MemoryBytes: 64 << 20, PidsLimit: 32}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"memory":{"limit":67108864,"swap":67108864},"cpu":{"quota":50000,"period":100000},"pids":{"limit":32}}`
	if string(b) != want {
		t.Errorf("got %s\nwant %s", b, want)
	}
	// Zero limits are left alone.
	if b, _ := json.Marshal(podmanResources(driver.Limits{})); string(b) != `{}` {
		t.Errorf("empty limits: %s", b)
	}
}

func TestMissingWorkdirPodman(t *testing.T) {
	res := driver.ExecResult{ExitCode: 127, Stderr: []byte(`Error: runc: exec failed: unable to start container process: chdir to cwd ("/tmp") set in config.json failed: no such file or directory`)}
	if !missingWorkdir(res) {
		t.Error("Podman's answer is not recognised")
	}
}
