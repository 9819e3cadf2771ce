package provider

// The protocol 6 server: the plugin framework's, with fast paths for the
// calls a fleet makes hundreds of times per command.
//
// The framework walks every attribute of every instance several times per
// call (decoding into the model, defaults, plan modifiers, semantic
// equality), even when nothing changed. For sandbox_instance the server
// answers three cases itself, each exactly where the framework would return
// what Terraform sent:
//
//   - Read of a sandbox whose observed values (status, addresses, endpoints,
//     ...) are those in state: the state as it was (refreshInstance decides,
//     the same function the framework's Read uses).
//   - Plan whose proposed state is its refreshed state byte for byte, whose
//     configuration leaves out no attribute whose prior value differs from
//     the schema's default (Terraform proposes the prior value of an Optional
//     and Computed attribute left out; the framework plans its default), whose
//     sandbox runs as `running` asks and that has no file copied from a local
//     `source` (hashed at plan time): the prior state. ModifyPlan would have
//     nothing to start, stop or report.
//   - Plan of a destroy: null, as the framework plans it (ModifyPlan returns
//     at once on a destroy).
//
// Everything else (creates, changes, drift, errors, a provider that is not
// configured yet) goes through the framework.

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"sync/atomic"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// NewServer returns the constructor of the provider's protocol 6 server,
// for main (tf6server.Serve) and the acceptance tests alike.
func NewServer(version string) func() (tfprotov6.ProviderServer, error) {
	return func() (tfprotov6.ProviderServer, error) {
		prov := &sandboxProvider{version: version}
		fw, err := providerserver.NewProtocol6WithError(prov)()
		if err != nil {
			return nil, err
		}
		return newServer(fw, prov), nil
	}
}

func newServer(fw tfprotov6.ProviderServer, prov *sandboxProvider) *server {
	ctx := context.Background()
	sch := instanceSchema(ctx)
	attrTypes := map[string]attr.Type{}
	for name, a := range sch.Attributes {
		attrTypes[name] = a.GetType()
	}
	return &server{
		ProviderServer: fw, prov: prov, instanceType: sch.Type().TerraformType(ctx), instanceAttrTypes: attrTypes,
		instanceDefaults: schemaDefaults(ctx, sch.Attributes, path.Empty()),
	}
}

// instanceTypeName is sandbox_instance's type name on the wire.
const instanceTypeName = "sandbox_instance"

type server struct {
	tfprotov6.ProviderServer
	prov              *sandboxProvider // nil in tests of the plan fast path alone
	instanceType      tftypes.Type
	instanceAttrTypes map[string]attr.Type
	instanceDefaults  *defaultsTree

	// How often each fast path answered, for the tests.
	fastReads, fastPlans, fastDestroys atomic.Int64
}

func (s *server) PlanResourceChange(ctx context.Context, req *tfprotov6.PlanResourceChangeRequest) (*tfprotov6.PlanResourceChangeResponse, error) {
	if req.TypeName == instanceTypeName {
		switch {
		case s.instanceDestroyed(req):
			s.fastDestroys.Add(1)
			return &tfprotov6.PlanResourceChangeResponse{PlannedState: req.ProposedNewState, PlannedPrivate: req.PriorPrivate}, nil
		case s.instanceUnchanged(req):
			s.fastPlans.Add(1)
			return &tfprotov6.PlanResourceChangeResponse{PlannedState: req.PriorState, PlannedPrivate: req.PriorPrivate}, nil
		}
	}
	return s.ProviderServer.PlanResourceChange(ctx, req)
}

func (s *server) ReadResource(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	if req.TypeName == instanceTypeName && s.readUnchanged(ctx, req) {
		s.fastReads.Add(1)
		return &tfprotov6.ReadResourceResponse{NewState: req.CurrentState, Private: req.Private, NewIdentity: req.CurrentIdentity}, nil
	}
	return s.ProviderServer.ReadResource(ctx, req)
}

// instanceDestroyed reports the plan of a destroy: a prior state and a null
// proposed state. Nothing is decoded: a plan that is not a destroy goes on to
// instanceUnchanged, which decodes the prior state once.
func (s *server) instanceDestroyed(req *tfprotov6.PlanResourceChangeRequest) bool {
	return isNull(req.ProposedNewState) && req.PriorState != nil && !isNull(req.PriorState)
}

// isNull reports a value that is null on the wire (MessagePack nil, which is
// how Terraform sends a null object).
func isNull(v *tfprotov6.DynamicValue) bool {
	return v != nil && bytes.Equal(v.MsgPack, msgpackNil)
}

var msgpackNil = []byte{0xc0}

// readUnchanged reports whether a refresh observes nothing new: the sandbox
// is still in its backend's list and every observed value equals the one in
// state, with no diagnostic to give.
func (s *server) readUnchanged(ctx context.Context, req *tfprotov6.ReadResourceRequest) bool {
	if s.prov == nil || req.CurrentState == nil {
		return false
	}
	data := s.prov.data.Load()
	if data == nil {
		return false // not configured: the framework reports it
	}
	v, err := req.CurrentState.Unmarshal(s.instanceType)
	if err != nil || !v.IsKnown() || v.IsNull() {
		return false
	}
	state, err := s.refreshModel(ctx, v)
	if err != nil {
		return false
	}
	gone, changed, diags := data.refreshInstance(ctx, &state)
	return !gone && !changed && len(diags) == 0
}

// refreshModel decodes from a raw state only the attributes refreshInstance
// reads and writes (instanceModel.refreshFields): the full decoding into the
// model is most of what the fast Read saves.
func (s *server) refreshModel(ctx context.Context, v tftypes.Value) (instanceModel, error) {
	var m instanceModel
	var attrs map[string]tftypes.Value
	if err := v.As(&attrs); err != nil {
		return m, err
	}
	for name, field := range m.refreshFields() {
		typ, ok := s.instanceAttrTypes[name]
		if !ok {
			return m, fmt.Errorf("no attribute %q in the instance schema", name)
		}
		val, err := typ.ValueFromTerraform(ctx, attrs[name])
		if err != nil {
			return m, err
		}
		dst, src := reflect.ValueOf(field).Elem(), reflect.ValueOf(val)
		if src.Type() != dst.Type() {
			return m, fmt.Errorf("attribute %q decodes to %s, the model holds %s", name, src.Type(), dst.Type())
		}
		dst.Set(src)
	}
	return m, nil
}

// instanceUnchanged reports whether the plan of an instance is its prior
// state: the proposed state (configuration over prior state) is the prior
// state, byte for byte, the schema's defaults would change nothing in it,
// and the sandbox's observed status is what `running` asks for, so there is
// nothing to start or stop and no warning to give.
func (s *server) instanceUnchanged(req *tfprotov6.PlanResourceChangeRequest) bool {
	prior, proposed := req.PriorState, req.ProposedNewState
	if prior == nil || proposed == nil || req.Config == nil || len(prior.MsgPack) == 0 || !bytes.Equal(prior.MsgPack, proposed.MsgPack) {
		return false
	}
	v, err := prior.Unmarshal(s.instanceType)
	if err != nil || !v.IsKnown() || v.IsNull() {
		return false
	}
	config, err := req.Config.Unmarshal(s.instanceType)
	if err != nil || !s.instanceDefaults.holds(config, v) {
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

// hasFileSource reports whether a `files` value has an entry with `source`
// or with a `source_hash` left from one (the hash is planned null without).
func hasFileSource(files tftypes.Value) bool {
	var list []tftypes.Value
	if files.IsNull() || !files.IsKnown() || files.As(&list) != nil {
		return !files.IsNull()
	}
	for _, f := range list {
		var attrs map[string]tftypes.Value
		if f.As(&attrs) != nil || !attrs["source"].IsNull() || !attrs["source_hash"].IsNull() {
			return true
		}
	}
	return false
}
