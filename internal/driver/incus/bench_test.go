package incus_test

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// TestBenchVsRawClient compares creating and deleting N containers through
// the driver with the same work done directly with the Incus client, 10 at
// a time like terraform's default parallelism. SANDBOX_INCUS_BENCH=N runs it.
func TestBenchVsRawClient(t *testing.T) {
	preCheck(t)
	n, _ := strconv.Atoi(os.Getenv("SANDBOX_INCUS_BENCH"))
	if n <= 0 {
		t.Skip("SANDBOX_INCUS_BENCH=N is not set")
	}
	d := scoped(t, nil)
	// Warm both paths (image copy into the project, connections).
	warm, err := d.CreateInstance(testCtx(t), driver.InstanceSpec{Name: "warm", Image: fixtureImage, Running: true})
	if err != nil {
		t.Fatal(err)
	}
	project := warm.Labels[driver.LabelBackend]
	c := rawClient(t, project)
	fp := rawInstanceImage(t, c, warm.ID)

	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("b%d", i)
	}
	var ids sync.Map
	drvCreate := timeParallel(names, func(name string) error {
		in, err := d.CreateInstance(testCtx(t), driver.InstanceSpec{Name: name, Image: fixtureImage, Running: true})
		ids.Store(name, in.ID)
		return err
	})
	drvDelete := timeParallel(names, func(name string) error {
		id, _ := ids.Load(name)
		return d.DeleteInstance(testCtx(t), id.(string))
	})
	rawCreate := timeParallel(names, func(name string) error {
		op, err := c.CreateInstance(api.InstancesPost{Name: "raw-" + name, Source: api.InstanceSource{Type: "image", Fingerprint: fp},
			Type: api.InstanceTypeContainer, Start: true,
			InstancePut: api.InstancePut{Devices: map[string]map[string]string{
				"root": {"type": "disk", "path": "/", "pool": "default"},
				"eth0": {"type": "nic", "network": "incusbr0", "name": "eth0"}}}})
		if err == nil {
			err = op.Wait()
		}
		return err
	})
	rawDelete := timeParallel(names, func(name string) error {
		op, err := c.UpdateInstanceState("raw-"+name, api.InstanceStatePut{Action: "stop", Force: true}, "")
		if err == nil {
			err = op.Wait()
		}
		if err != nil {
			return err
		}
		op, err = c.DeleteInstance("raw-" + name)
		if err == nil {
			err = op.Wait()
		}
		return err
	})
	t.Logf("%d containers: create driver %s raw %s (%.2fx); delete driver %s raw %s (%.2fx)", n,
		drvCreate, rawCreate, drvCreate.Seconds()/rawCreate.Seconds(),
		drvDelete, rawDelete, drvDelete.Seconds()/rawDelete.Seconds())
}

func rawInstanceImage(t *testing.T, c incus.InstanceServer, name string) string {
	t.Helper()
	inst, _, err := c.GetInstance(name)
	if err != nil {
		t.Fatal(err)
	}
	return inst.Config["volatile.base_image"]
}

// timeParallel runs fn for every name, 10 at a time, and returns the time.
func timeParallel(names []string, fn func(string) error) time.Duration {
	start := time.Now()
	sem := make(chan struct{}, 10)
	var wg sync.WaitGroup
	for _, n := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func(n string) {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(n); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", n, err)
			}
		}(n)
	}
	wg.Wait()
	return time.Since(start)
}
