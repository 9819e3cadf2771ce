package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// Driver converts a backend handle into a driver.Config, attaches the
// provider's labels and secrets, and returns the pooled driver for it. The
// returned driver drops the backend's instance snapshot on every mutation, so
// callers need not remember to.
func (p *ProviderData) Driver(ctx context.Context, handle types.Object) (driver.Driver, driver.Config, diag.Diagnostics) {
	cfg, diags := ConfigFromHandle(ctx, handle)
	if diags.HasError() {
		return nil, cfg, diags
	}
	d, err := p.DriverFor(ctx, &cfg)
	if err != nil {
		diags.Append(driverError("Unable to Connect to Sandbox Backend", cfg, "the backend", err))
	}
	return d, cfg, diags
}

// DriverFor is Driver for a config that is already resolved (sandbox_backend
// itself). It fills cfg's labels and secrets from the provider.
func (p *ProviderData) DriverFor(ctx context.Context, cfg *driver.Config) (driver.Driver, error) {
	cfg.Labels = p.Labels
	cfg.Secrets = p.Secrets
	d, err := p.Pool.Get(ctx, *cfg)
	if err != nil {
		return nil, err
	}
	return &invalidating{Driver: d, key: cfg.Key(), cache: p.snapshots}, nil
}

// secrets are the provider's secrets; none before the provider is configured.
func (p *ProviderData) secrets() driver.Secrets {
	if p == nil {
		return driver.Secrets{}
	}
	return p.Secrets
}

// Instances returns the backend's instances by ID from one ListInstances call
// shared by every concurrent Read of that backend (see snapshotCache). A
// refresh of N instances thus costs a few list calls, not N inspects.
func (p *ProviderData) Instances(ctx context.Context, cfg driver.Config) (map[string]driver.Instance, error) {
	cfg.Labels = p.Labels
	cfg.Secrets = p.Secrets
	return p.snapshots.get(ctx, cfg.Key(), func(ctx context.Context) ([]driver.Instance, error) {
		d, err := p.Pool.Get(ctx, cfg)
		if err != nil {
			return nil, err
		}
		return d.ListInstances(ctx)
	})
}

// InvalidateInstances drops the backend's snapshot; the wrapped driver does
// this itself, this is for changes made some other way.
func (p *ProviderData) InvalidateInstances(cfg driver.Config) {
	p.snapshots.invalidate(cfg.Key())
}

// invalidating wraps a pooled driver so that every call that changes
// instances invalidates the backend's snapshot, before and after the change
// (a List that started during the change must not be cached either).
type invalidating struct {
	driver.Driver
	key   string
	cache *snapshotCache
}

func (d *invalidating) mutate(f func() error) error {
	d.cache.invalidate(d.key)
	defer d.cache.invalidate(d.key)
	return f()
}

func (d *invalidating) CreateInstance(ctx context.Context, spec driver.InstanceSpec) (driver.Instance, error) {
	var inst driver.Instance
	err := d.mutate(func() (err error) { inst, err = d.Driver.CreateInstance(ctx, spec); return err })
	return inst, err
}

func (d *invalidating) StartInstance(ctx context.Context, id string) error {
	return d.mutate(func() error { return d.Driver.StartInstance(ctx, id) })
}

func (d *invalidating) StopInstance(ctx context.Context, id string, grace time.Duration) error {
	return d.mutate(func() error { return d.Driver.StopInstance(ctx, id, grace) })
}

func (d *invalidating) UpdateInstance(ctx context.Context, id string, limits driver.Limits) error {
	return d.mutate(func() error { return d.Driver.UpdateInstance(ctx, id, limits) })
}

func (d *invalidating) DeleteInstance(ctx context.Context, id string) error {
	return d.mutate(func() error { return d.Driver.DeleteInstance(ctx, id) })
}

func (d *invalidating) CopyFiles(ctx context.Context, id string, files []driver.File) error {
	return d.mutate(func() error { return d.Driver.CopyFiles(ctx, id, files) })
}

func (d *invalidating) DeleteScope(ctx context.Context) error {
	return d.mutate(func() error { return d.Driver.DeleteScope(ctx) })
}

// Close is a no-op: the pool owns the connection.
func (d *invalidating) Close() error { return nil }

// ObjectLabels merges the provider-level labels and an object's own labels
// (the object's win) for a driver spec; drivers add the reserved
// sandbox.* labels themselves.
func (p *ProviderData) ObjectLabels(user map[string]string) map[string]string {
	out := make(map[string]string, len(p.Labels)+len(user)+1)
	for k, v := range p.Labels {
		out[k] = v
	}
	for k, v := range user {
		out[k] = v
	}
	return out
}
