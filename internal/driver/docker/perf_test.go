package docker_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// TestCreateOverhead compares 50 creates at parallelism 10 through the
// driver with raw create+start calls. Slow; runs only with SANDBOX_PERF=1.
func TestCreateOverhead(t *testing.T) {
	if os.Getenv("SANDBOX_PERF") == "" {
		t.Skip("SANDBOX_PERF is not set")
	}
	const n, par = 50, 10
	d, backend := openNamed(t, driver.DockerConfig{})
	if err := d.EnsureScope(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	for round := 0; round < 2; round++ {
		raw, drv := createRound(t, d, backend, n, par)
		t.Logf("round %d: raw %v, driver %v, ratio %.2f", round, raw, drv, float64(drv)/float64(raw))
	}
}

func createRound(t *testing.T, d driver.Driver, backend string, n, par int) (time.Duration, time.Duration) {
	cli := rawClient(t)
	raw := timeParallel(t, n, par, func(i int) error {
		ctx := context.Background()
		c, err := cli.ContainerCreate(ctx, &container.Config{Image: fixture.image, Cmd: []string{"sleep", "3600"},
			Labels: driver.ScopeLabels(backend)}, &container.HostConfig{NetworkMode: container.NetworkMode("sandbox-" + backend)}, nil, nil, fmt.Sprintf("%s-raw%d", backend, i))
		if err != nil {
			return err
		}
		return cli.ContainerStart(ctx, c.ID, container.StartOptions{})
	})
	removeContainers(t, backend)
	drv := timeParallel(t, n, par, func(i int) error {
		_, err := d.CreateInstance(context.Background(), driver.InstanceSpec{Name: fmt.Sprintf("d%d", i), Image: fixture.image,
			Command: []string{"sleep", "3600"}, Running: true, Security: driver.Security{Init: true, NoNewPrivileges: true}})
		return err
	})
	removeContainers(t, backend)
	return raw, drv
}

func removeContainers(t *testing.T, backend string) {
	cli := rawClient(t)
	list, err := cli.ContainerList(context.Background(), container.ListOptions{All: true, Filters: backendFilter(backend)})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list {
		_ = cli.ContainerRemove(context.Background(), c.ID, container.RemoveOptions{Force: true})
	}
}

func timeParallel(t *testing.T, n, par int, fn func(i int) error) time.Duration {
	t.Helper()
	start := time.Now()
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				t.Error(err)
			}
		}(i)
	}
	wg.Wait()
	return time.Since(start)
}
