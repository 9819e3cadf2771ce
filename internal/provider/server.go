package provider

// The protocol 6 server: the plugin framework's, with one fast path.
//
// A re-plan of a fleet spends most of the provider's CPU in the framework's
// PlanResourceChange, which walks every attribute of every instance several
// times (defaults, plan modifiers, conversions) even when nothing changed.
// For a sandbox_instance whose proposed state is exactly its refreshed state,
// whose sandbox runs as `running` asks and that has no file copied from a
// local `source` (whose content is hashed at plan time), every one of those
// steps leaves the state as it is and ModifyPlan has nothing to start, stop
// or report, so the server answers with the prior state itself. Everything else (creates,
// changes, a sandbox stopped outside Terraform, an expired one) goes through
// the framework.

import (
	"bytes"
	"context"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// NewServer returns the constructor of the provider's protocol 6 server,
// for main (tf6server.Serve) and the acceptance tests alike.
func NewServer(version string) func() (tfprotov6.ProviderServer, error) {
	return func() (tfprotov6.ProviderServer, error) {
		fw, err := providerserver.NewProtocol6WithError(New(version)())()
		if err != nil {
			return nil, err
		}
		return &server{ProviderServer: fw, instanceType: instanceSchema(context.Background()).Type().TerraformType(context.Background())}, nil
	}
}

// instanceTypeName is sandbox_instance's type name on the wire.
const instanceTypeName = "sandbox_instance"

type server struct {
	tfprotov6.ProviderServer
	instanceType tftypes.Type
}

func (s *server) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	if req.TypeName == instanceTypeName && s.instanceUnchanged(req) {
		return &tfprotov6.PlanResourceChangeResponse{PlannedState: req.PriorState, PlannedPrivate: req.PriorPrivate}, nil
	}
	return s.ProviderServer.PlanResourceChange(ctx, req)
}

// instanceUnchanged reports whether the plan of an instance is its prior
// state: the proposed state (configuration over prior state) is the prior
// state, byte for byte, and the sandbox's observed status is what `running`
// asks for, so there is nothing to start or stop and no warning to give.
func (s *server) instanceUnchanged(req *tfprotov6.PlanResourceChangeRequest) bool {
	prior, proposed := req.PriorState, req.ProposedNewState
	if prior == nil || proposed == nil || len(prior.MsgPack) == 0 || !bytes.Equal(prior.MsgPack, proposed.MsgPack) {
		return false
	}
	v, err := prior.Unmarshal(s.instanceType)
	if err != nil || !v.IsKnown() || v.IsNull() {
		return false
	}
	var attrs map[string]tftypes.Value
	if v.As(&attrs) != nil {
		return false
	}
	if hasFileSource(attrs["files"]) {
		return false // the file's content is hashed at plan time (sourceHashModifier)
	}
	var running *bool
	var status *string
	if attrs["running"].As(&running) != nil || attrs["status"].As(&status) != nil || status == nil {
		return false
	}
	want := running == nil || *running // running defaults to true
	if want {
		return *status == driver.StatusRunning
	}
	return *status != driver.StatusRunning
}

// hasFileSource reports whether a `files` value has an entry with `source`.
func hasFileSource(files tftypes.Value) bool {
	var list []tftypes.Value
	if files.IsNull() || !files.IsKnown() || files.As(&list) != nil {
		return !files.IsNull()
	}
	for _, f := range list {
		var attrs map[string]tftypes.Value
		if f.As(&attrs) != nil || !attrs["source"].IsNull() {
			return true
		}
	}
	return false
}
