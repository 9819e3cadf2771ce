// Package provider is the terraform-plugin-framework glue of the sandbox
// provider: schemas, models, CRUD wiring and diagnostics. Engine work happens
// in internal/driver and its per-backend packages.
package provider

import (
	"context"
	"os"
	"sync/atomic"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

var _ provider.Provider = (*sandboxProvider)(nil)

// EnvSSHPrivateKey supplies ssh_private_key when the provider block leaves it unset.
const EnvSSHPrivateKey = "SANDBOX_SSH_PRIVATE_KEY"

type sandboxProvider struct {
	version string
	// data is what Configure made, for the server's fast paths (server.go).
	data atomic.Pointer[ProviderData]
}

type providerModel struct {
	Labels        types.Map    `tfsdk:"labels"`
	SSHPrivateKey types.String `tfsdk:"ssh_private_key"`
}

// ProviderData is what every resource receives in Configure: the shared
// driver pool, the provider-level settings and the per-backend snapshots.
type ProviderData struct {
	Pool    *driver.Pool
	Labels  map[string]string
	Secrets driver.Secrets
	Version string

	snapshots *snapshotCache
}

// NewProviderData builds provider data around pool; tests use it directly.
func NewProviderData(pool *driver.Pool, labels map[string]string, secrets driver.Secrets) *ProviderData {
	return &ProviderData{Pool: pool, Labels: labels, Secrets: secrets, snapshots: newSnapshotCache()}
}

func (p *sandboxProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "sandbox"
	resp.Version = p.version
}

func (p *sandboxProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Runs disposable sandboxes (containers, VMs, daemonless processes) on Docker, Incus, " +
			"Kubernetes or the local machine. Backends are declared as `sandbox_backend` resources; every " +
			"other resource reaches its backend through `backend = sandbox_backend.NAME.handle`.",
		Attributes: map[string]schema.Attribute{
			"labels": schema.MapAttribute{
				ElementType: types.StringType,
				Optional:    true,
				Validators:  []validator.Map{labelsValidator{}},
				Description: "Labels added to every object the provider creates (a resource's own labels win on conflict). " +
					"Keys follow the label key rules: an optional DNS prefix and `/`, then up to 63 characters of " +
					"letters, digits, `-`, `_` and `.`; the `sandbox.` prefix is reserved.",
			},
			"ssh_private_key": schema.StringAttribute{
				Optional:  true,
				Sensitive: true,
				Description: "PEM private key used for `ssh://` backends that set no `ssh_key_file` and when no " +
					"ssh-agent offers a key. Defaults to the `" + EnvSSHPrivateKey + "` environment variable. " +
					"Never stored in state.",
			},
		},
	}
}

func (p *sandboxProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	labels := map[string]string{}
	if !cfg.Labels.IsUnknown() {
		resp.Diagnostics.Append(cfg.Labels.ElementsAs(ctx, &labels, false)...)
	}
	secrets := driver.Secrets{SSHPrivateKey: os.Getenv(EnvSSHPrivateKey)}
	if v := cfg.SSHPrivateKey.ValueString(); v != "" {
		secrets.SSHPrivateKey = v
	}
	if resp.Diagnostics.HasError() {
		return
	}
	data := NewProviderData(driver.NewPool(), labels, secrets)
	data.Version = p.version
	p.data.Store(data)
	resp.ResourceData = data
	resp.DataSourceData = data
}

func (p *sandboxProvider) Resources(_ context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		NewBackendResource,
		NewImageResource,
		NewVolumeResource,
		NewInstanceResource,
		NewInitializerResource,
	}
}

func (p *sandboxProvider) DataSources(_ context.Context) []func() datasource.DataSource {
	return nil
}

// configured is embedded by every resource: its Configure keeps the
// provider's data for the CRUD methods.
type configured struct {
	data *ProviderData
}

func (c *configured) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	c.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// providerDataFrom reads the provider's data: nil before the provider is
// configured, an error diagnostic on a wrong type.
func providerDataFrom(data any, diags *diag.Diagnostics) *ProviderData {
	if data == nil {
		return nil
	}
	pd, ok := data.(*ProviderData)
	if !ok {
		diags.AddError("Unexpected Provider Data",
			"The sandbox provider passed an unexpected configuration type to a resource. This is a bug in the provider; please report it.")
		return nil
	}
	return pd
}
