package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"

	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"
)

const incusImage = "sandbox-fixture/busybox" // made by scripts/setup-incus.sh

// runIncus: fleets of 10 and 30 containers in the default project (where
// setup-incus.sh put the image), beside the same creates, starts and
// deletes through the Incus Go client on one kept-alive connection.
func runIncus(ctx context.Context, b *bench) error {
	if _, err := os.Stat("/var/lib/incus/unix.socket"); err != nil {
		return skipf("incusd is not running (scripts/setup-incus.sh)")
	}
	c, err := incus.ConnectIncusUnixWithContext(ctx, "", nil)
	if err != nil {
		return skipf("incusd does not answer: %v", err)
	}
	defer c.Disconnect()
	// Keep connections alive (the client disables it by default), as the
	// driver does.
	if hc, err := c.GetHTTPClient(); err == nil {
		if t, ok := hc.Transport.(*http.Transport); ok {
			t.DisableKeepAlives, t.MaxIdleConns, t.MaxIdleConnsPerHost = false, 64, 64
		}
	}
	if _, _, err := c.GetImageAlias(incusImage); err != nil {
		return skipf("no image alias %q in the default project (scripts/setup-incus.sh): %v", incusImage, err)
	}
	backend := "bench-" + b.runID
	wd, err := b.newWorkdir("incus", incusHCL(backend, `{ project = "default" }`))
	if err != nil {
		return err
	}
	prefix := backend + "-"
	e := &incusEngine{c: c, par: b.o.parallelism, prov: prefix + "w0", prefix: backend + "-eng-"}
	b.onCleanup("incus instances "+prefix+"*", func(ctx context.Context) error { return incusSweep(ctx, c, prefix, b.o.parallelism) })
	f := &fleet{label: "incus", wd: wd, eng: e}
	if err := b.floor(ctx, f); err != nil {
		return err
	}
	for _, n := range b.sizes(10, 30) {
		m, err := b.measure(ctx, f, n)
		if err != nil {
			return err
		}
		b.addRows("incus", n, m, incusGoal, incusGoal)
	}
	return nil
}

// incusHCL is the configuration of an Incus fleet; attrs is the incus object.
func incusHCL(backend, attrs string) string {
	return fmt.Sprintf(`resource "sandbox_backend" "b" {
  name  = %q
  incus = %s
}

resource "sandbox_instance" "w" {
  count   = var.n
  backend = sandbox_backend.b.handle
  image   = %q
  name    = "w${count.index}"
}
`, backend, attrs, incusImage)
}

type incusEngine struct {
	c      incus.InstanceServer
	par    int
	prov   string // the provider's instance to copy
	prefix string
	req    api.InstancesPost
}

func (e *incusEngine) capture(context.Context) error {
	inst, _, err := e.c.GetInstance(e.prov)
	if err != nil {
		return err
	}
	cfg := map[string]string{}
	for k, v := range inst.Config {
		if strings.HasPrefix(k, "volatile.") || strings.HasPrefix(k, "image.") {
			continue
		}
		cfg[k] = v
	}
	e.req = api.InstancesPost{
		InstancePut: api.InstancePut{Config: cfg, Devices: inst.Devices, Profiles: inst.Profiles, Ephemeral: inst.Ephemeral},
		Source:      api.InstanceSource{Type: "image", Fingerprint: inst.Config["volatile.base_image"]},
		Type:        api.InstanceType(inst.Type),
		Start:       true,
	}
	return nil
}

func (e *incusEngine) name(i int) string { return fmt.Sprintf("%sw%d", e.prefix, i) }

func (e *incusEngine) create(ctx context.Context, n int) error {
	return parallel(ctx, n, e.par, func(ctx context.Context, i int) error {
		req := e.req
		req.Name = e.name(i)
		op, err := e.c.CreateInstance(req)
		if err != nil {
			return err
		}
		return op.WaitContext(ctx)
	})
}

func (e *incusEngine) list(context.Context) (int, error) {
	l, err := e.c.GetInstancesFull(api.InstanceTypeAny)
	n := 0
	for _, in := range l {
		if strings.HasPrefix(in.Name, e.prefix) && in.StatusCode == api.Running {
			n++
		}
	}
	return n, err
}

func (e *incusEngine) remove(ctx context.Context, n int) error {
	return parallel(ctx, n, e.par, func(ctx context.Context, i int) error { return incusDelete(ctx, e.c, e.name(i)) })
}

// incusDelete force-stops and deletes, as the driver does.
func incusDelete(ctx context.Context, c incus.InstanceServer, name string) error {
	op, err := c.UpdateInstanceState(name, api.InstanceStatePut{Action: "stop", Force: true, Timeout: -1}, "")
	if err == nil {
		err = op.WaitContext(ctx)
	}
	if err != nil && !strings.Contains(err.Error(), "already stopped") && !strings.Contains(err.Error(), "not running") {
		return err
	}
	op, err = c.DeleteInstance(name)
	if err == nil {
		err = op.WaitContext(ctx)
	}
	return err
}

func incusSweep(ctx context.Context, c incus.InstanceServer, prefix string, par int) error {
	names, err := c.GetInstanceNames(api.InstanceTypeAny)
	if err != nil {
		return err
	}
	var mine []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			mine = append(mine, n)
		}
	}
	return parallel(ctx, len(mine), par, func(ctx context.Context, i int) error {
		logf("clean-up: deleting incus instance %s", mine[i])
		return incusDelete(ctx, c, mine[i])
	})
}
