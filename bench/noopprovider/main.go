// Command noopprovider is a Terraform provider that does nothing: its
// resources only echo their configuration into state. `make bench` runs the
// same commands on a fleet of its resources to measure what Terraform and
// the plugin protocol cost by themselves (starting the plugin several times
// per command, the graph walks, the state), the floor under any provider's
// time. It is a measuring aid, never published.
package main

import (
	"context"
	"log"
	"os"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

func main() {
	// As the sandbox provider does: the SDK's own loggers are off when
	// Terraform is not logging (they cost CPU on every call).
	for _, k := range []string{"TF_LOG_SDK", "TF_LOG_SDK_PROTO", "TF_LOG_SDK_FRAMEWORK", "TF_LOG_PROVIDER"} {
		_ = os.Setenv(k, "OFF")
	}
	err := providerserver.Serve(context.Background(), func() provider.Provider { return noop{} },
		providerserver.ServeOpts{Address: "registry.terraform.io/sandboxfleet/noop"})
	if err != nil {
		log.Fatal(err)
	}
}

type noop struct{}

func (noop) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "noop"
}

func (noop) Schema(context.Context, provider.SchemaRequest, *provider.SchemaResponse) {}

func (noop) Configure(context.Context, provider.ConfigureRequest, *provider.ConfigureResponse) {}

func (noop) DataSources(context.Context) []func() datasource.DataSource { return nil }

// Resources: noop_scope stands for a backend, noop_item for an instance
// that depends on it (the same graph shape as the sandbox fleets).
func (noop) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{
		func() resource.Resource { return item{typeName: "scope"} },
		func() resource.Resource { return item{typeName: "item"} },
	}
}

// item is either resource: a name, an optional parent, a computed id.
type item struct{ typeName string }

type itemModel struct {
	ID     types.String `tfsdk:"id"`
	Name   types.String `tfsdk:"name"`
	Parent types.String `tfsdk:"parent"`
}

func (r item) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_" + r.typeName
}

func (item) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	resp.Schema = schema.Schema{Attributes: map[string]schema.Attribute{
		"id": schema.StringAttribute{Computed: true,
			PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		"name":   schema.StringAttribute{Required: true},
		"parent": schema.StringAttribute{Optional: true},
	}}
}

func (item) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var m itemModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &m)...)
	m.ID = m.Name
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}

func (item) Read(context.Context, resource.ReadRequest, *resource.ReadResponse) {}

func (item) Update(_ context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	resp.State.Raw = req.Plan.Raw
}

func (item) Delete(context.Context, resource.DeleteRequest, *resource.DeleteResponse) {}
