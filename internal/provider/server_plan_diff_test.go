package provider

// The unchanged-plan fast path (server.go) against the framework alone, on
// generated requests: whenever the fast path answers, the framework must
// answer the same planned state, no replacement and no diagnostic.
//
// A request is built as Terraform builds it: a prior state and a
// configuration are generated attribute by attribute (left out, set and
// kept, removed, changed; inside nested objects too), and the proposed new
// state is derived from both with Terraform's rules (proposedNew).

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// How an attribute appears in a generated pair (prior state, configuration).
const (
	modeUnset   = iota // left out of both; the prior holds what apply stored
	modeKept           // set, and the configuration keeps it
	modeRemoved        // set before, left out of the configuration now
	modeChanged        // set before and now, to values that may differ
	modeCount
)

var modeNames = [...]string{"unset", "kept", "removed", "changed"}

// choices turns bytes into decisions; past the end every decision is 0, so
// a short input means "everything left as it was".
type choices struct {
	b []byte
	i int
}

func (c *choices) next() byte {
	if c.i >= len(c.b) {
		return 0
	}
	c.i++
	return c.b[c.i-1]
}

func (c *choices) intn(n int) int { return int(c.next()) % n }

// mode picks how an attribute appears; unchanged most of the time, so that
// a generated plan often reaches the fast path's decision.
func (c *choices) mode() int {
	switch b := c.next(); {
	case b < 110:
		return modeUnset
	case b < 220:
		return modeKept
	case b < 238:
		return modeRemoved
	default:
		return modeChanged
	}
}

// planGen generates plan requests for one schema.
type planGen struct {
	ctx   context.Context
	c     *choices
	focus string // the attribute path (elements as [*]) whose mode is forced
	mode  int
	// removedDefaults collects, per generated request, the paths of
	// defaulted attributes that the configuration removed while the prior
	// held something other than the default.
	removedDefaults map[string]bool
}

var stringPool = []string{
	"a", "b", driver.TypeContainer, driver.TypeVM, driver.NetworkIsolated, driver.NetworkBridge, driver.NetworkNone,
	"tcp", "udp", "0644", "0755", "64MiB", "1h", "NET_ADMIN", "SYS_CHROOT",
}

var statusPool = []string{driver.StatusRunning, driver.StatusStopped, driver.StatusExpired, driver.StatusCreated, driver.StatusUnknown}

func (g *planGen) modeFor(p string) int {
	switch {
	case p == g.focus:
		return g.mode
	case strings.HasPrefix(g.focus, p+".") || strings.HasPrefix(g.focus, p+"[*]."):
		return modeKept // the focus lies below: set this one
	}
	return g.c.mode()
}

// value is a random value of type t (null sometimes, when nullable).
func (g *planGen) value(t tftypes.Type, nullable bool) tftypes.Value {
	if nullable && g.c.intn(8) == 0 {
		return tftypes.NewValue(t, nil)
	}
	switch {
	case t.Is(tftypes.String):
		return tftypes.NewValue(t, stringPool[g.c.intn(len(stringPool))])
	case t.Is(tftypes.Bool):
		return tftypes.NewValue(t, g.c.intn(2) == 1)
	case t.Is(tftypes.Number):
		return tftypes.NewValue(t, []int64{0, 1, 2, 64, 4096}[g.c.intn(5)])
	case t.Is(tftypes.List{}):
		et := t.(tftypes.List).ElementType
		elems := []tftypes.Value{}
		for range g.c.intn(3) {
			elems = append(elems, g.value(et, false))
		}
		return tftypes.NewValue(t, elems)
	case t.Is(tftypes.Map{}):
		et := t.(tftypes.Map).ElementType
		elems := map[string]tftypes.Value{}
		for i := range g.c.intn(3) {
			elems[fmt.Sprintf("k%d", i)] = g.value(et, false)
		}
		return tftypes.NewValue(t, elems)
	case t.Is(tftypes.Object{}):
		attrs := map[string]tftypes.Value{}
		for name, at := range t.(tftypes.Object).AttributeTypes {
			attrs[name] = g.value(at, true)
		}
		return tftypes.NewValue(t, attrs)
	}
	panic(fmt.Sprintf("no generator for %s", t))
}

// attrsPair generates (prior, config) objects for attrs.
func (g *planGen) attrsPair(attrs map[string]schema.Attribute, at string) (prior, config tftypes.Value) {
	pv, cv := map[string]tftypes.Value{}, map[string]tftypes.Value{}
	types := map[string]tftypes.Type{}
	for _, name := range sortedNames(attrs) {
		pv[name], cv[name] = g.attrPair(attrs[name], joinPath(at, name))
		types[name] = attrs[name].GetType().TerraformType(g.ctx)
	}
	// A files entry without `source` has no `source_hash` (what apply stores).
	if h, ok := pv["source_hash"]; ok && pv["source"].IsNull() {
		pv["source_hash"] = tftypes.NewValue(h.Type(), nil)
	}
	t := tftypes.Object{AttributeTypes: types}
	return tftypes.NewValue(t, pv), tftypes.NewValue(t, cv)
}

func (g *planGen) attrPair(a schema.Attribute, p string) (prior, config tftypes.Value) {
	t := a.GetType().TerraformType(g.ctx)
	null := tftypes.NewValue(t, nil)
	if a.IsComputed() && !a.IsOptional() && !a.IsRequired() {
		if p == "status" {
			return tftypes.NewValue(t, statusPool[g.c.intn(len(statusPool))]), null
		}
		return g.value(t, true), null
	}
	def, hasDefault := defaultValue(g.ctx, a, path.Empty())
	mode := g.modeFor(p)
	if a.IsRequired() && (mode == modeUnset || mode == modeRemoved) {
		mode = modeKept
	}
	switch mode {
	case modeUnset:
		switch {
		case hasDefault:
			return def, null
		case a.IsComputed():
			return g.value(t, true), null
		}
		return null, null
	case modeRemoved:
		prior = g.value(t, false)
		if hasDefault && !prior.Equal(def) {
			g.removedDefaults[p] = true
		}
		return prior, null
	}
	switch n := a.(type) {
	case schema.SingleNestedAttribute:
		return g.attrsPair(n.Attributes, p)
	case schema.ListNestedAttribute:
		var priors, configs []tftypes.Value
		count := 1 + g.c.intn(2)
		for range count {
			pe, ce := g.attrsPair(n.NestedObject.Attributes, p+"[*]")
			priors, configs = append(priors, pe), append(configs, ce)
		}
		if mode == modeChanged && g.c.intn(2) == 0 {
			pe, ce := g.attrsPair(n.NestedObject.Attributes, p+"[*]")
			if g.c.intn(2) == 0 {
				priors = append(priors, pe)
			} else {
				configs = append(configs, ce)
			}
		}
		return tftypes.NewValue(t, priors), tftypes.NewValue(t, configs)
	}
	v := g.value(t, false)
	if mode == modeChanged {
		return g.value(t, false), v
	}
	return v, v
}

// proposedNew is the proposed new state Terraform sends for a prior state
// and a configuration (its objchange.ProposedNew, for nested attributes).
func proposedNew(ctx context.Context, attrs map[string]schema.Attribute, prior, config tftypes.Value) tftypes.Value {
	var pv, cv map[string]tftypes.Value
	if !prior.IsNull() {
		mustAs(prior, &pv)
	}
	mustAs(config, &cv)
	out := map[string]tftypes.Value{}
	for name, a := range attrs {
		c := cv[name]
		p, ok := pv[name]
		if !ok {
			p = tftypes.NewValue(c.Type(), nil)
		}
		switch {
		case a.IsComputed() && c.IsNull():
			out[name] = p
			if a.IsOptional() && holdsNonComputed(ctx, a, p) {
				out[name] = c
			}
		case !c.IsKnown() || c.IsNull():
			out[name] = c
		default:
			out[name] = proposedNested(ctx, a, p, c)
		}
	}
	return tftypes.NewValue(config.Type(), out)
}

func proposedNested(ctx context.Context, a schema.Attribute, prior, config tftypes.Value) tftypes.Value {
	switch n := a.(type) {
	case schema.SingleNestedAttribute:
		return proposedNew(ctx, n.Attributes, prior, config)
	case schema.ListNestedAttribute:
		var pe, ce []tftypes.Value
		if !prior.IsNull() && prior.IsKnown() {
			mustAs(prior, &pe)
		}
		mustAs(config, &ce)
		out := make([]tftypes.Value, len(ce))
		for i, c := range ce {
			out[i] = c
			if i < len(pe) {
				out[i] = proposedNew(ctx, n.NestedObject.Attributes, pe[i], c)
			}
		}
		return tftypes.NewValue(config.Type(), out)
	}
	return config
}

// holdsNonComputed reports a prior nested value holding a value at an
// attribute that is not computed: the configuration must have set it, so
// Terraform proposes the configuration's null rather than the prior value.
func holdsNonComputed(ctx context.Context, a schema.Attribute, prior tftypes.Value) bool {
	n, ok := a.(schema.SingleNestedAttribute)
	if !ok || prior.IsNull() || !prior.IsKnown() {
		return false
	}
	var pv map[string]tftypes.Value
	mustAs(prior, &pv)
	for name, child := range n.Attributes {
		if !child.IsComputed() && !pv[name].IsNull() {
			return true
		}
		if holdsNonComputed(ctx, child, pv[name]) {
			return true
		}
	}
	return false
}

func mustAs(v tftypes.Value, dst any) {
	if err := v.As(dst); err != nil {
		panic(err)
	}
}

func sortedNames(attrs map[string]schema.Attribute) []string {
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func joinPath(at, name string) string {
	if at == "" {
		return name
	}
	return at + "." + name
}

// attributePaths lists every attribute path of attrs, elements as [*].
func attributePaths(attrs map[string]schema.Attribute, at string) []string {
	var out []string
	for _, name := range sortedNames(attrs) {
		p := joinPath(at, name)
		out = append(out, p)
		switch n := attrs[name].(type) {
		case schema.SingleNestedAttribute:
			out = append(out, attributePaths(n.Attributes, p)...)
		case schema.ListNestedAttribute:
			out = append(out, attributePaths(n.NestedObject.Attributes, p+"[*]")...)
		}
	}
	return out
}

// defaultedPaths lists the attribute paths that have a default.
func defaultedPaths(ctx context.Context, attrs map[string]schema.Attribute, at string) []string {
	var out []string
	for _, name := range sortedNames(attrs) {
		p := joinPath(at, name)
		if _, ok := defaultValue(ctx, attrs[name], path.Empty()); ok {
			out = append(out, p)
		}
		switch n := attrs[name].(type) {
		case schema.SingleNestedAttribute:
			out = append(out, defaultedPaths(ctx, n.Attributes, p)...)
		case schema.ListNestedAttribute:
			out = append(out, defaultedPaths(ctx, n.NestedObject.Attributes, p+"[*]")...)
		}
	}
	return out
}

// planDiff holds the two servers a generated request goes to.
type planDiff struct {
	ctx       context.Context
	attrs     map[string]schema.Attribute
	typ       tftypes.Type
	fast      *server
	framework tfprotov6.ProviderServer
	paths     []string
}

func newPlanDiff(t testing.TB) *planDiff {
	ctx := context.Background()
	framework, err := providerserver.NewProtocol6WithError(&sandboxProvider{version: "test"})()
	if err != nil {
		t.Fatal(err)
	}
	sch := instanceSchema(ctx)
	return &planDiff{
		ctx: ctx, attrs: sch.Attributes, typ: sch.Type().TerraformType(ctx),
		// What the fast path does not answer goes to a recorder: those
		// plans are the framework's by construction.
		fast: newServer(&recordingServer{}, nil), framework: framework, paths: attributePaths(sch.Attributes, ""),
	}
}

// outcome of one generated request.
type planOutcome struct {
	fast            bool            // the fast path answered
	removedDefaults map[string]bool // see planGen
	candidate       bool            // proposed == prior: only the defaults and the status can say no
}

// check generates one request from in (the focus attribute and its mode
// forced) and fails t when the fast path answers what the framework does not.
func (d *planDiff) check(t testing.TB, focus string, mode int, in []byte) planOutcome {
	g := &planGen{ctx: d.ctx, c: &choices{b: in}, focus: focus, mode: mode, removedDefaults: map[string]bool{}}
	prior, config := g.attrsPair(d.attrs, "")
	proposed := proposedNew(d.ctx, d.attrs, prior, config)
	req := &tfprotov6.PlanResourceChangeRequest{
		TypeName:         instanceTypeName,
		PriorState:       dynamic(t, d.typ, prior),
		ProposedNewState: dynamic(t, d.typ, proposed),
		Config:           dynamic(t, d.typ, config),
		PriorPrivate:     []byte(`{"k":"eyJhIjoxfQ=="}`), // k = {"a":1}
	}
	out := planOutcome{removedDefaults: g.removedDefaults, candidate: prior.Equal(proposed)}
	before := d.fast.fastPlans.Load()
	fastResp, err := d.fast.PlanResourceChange(d.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	out.fast = d.fast.fastPlans.Load() > before
	if !out.fast {
		return out // answered by the framework inside the server
	}
	fwResp, err := d.framework.PlanResourceChange(d.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	describe := func() string {
		return fmt.Sprintf("focus %s %s, input %q\nprior:    %s\nconfig:   %s\nproposed: %s",
			focus, modeNames[mode], in, compact(prior), compact(config), compact(proposed))
	}
	if len(fwResp.Diagnostics) > 0 {
		t.Fatalf("the fast path answered a plan on which the framework reports %v\n%s", protoDiagnostics(fwResp.Diagnostics), describe())
	}
	if len(fwResp.RequiresReplace) > 0 {
		t.Fatalf("the fast path answered a plan the framework replaces at %v\n%s", fwResp.RequiresReplace, describe())
	}
	fastPlan, err := fastResp.PlannedState.Unmarshal(d.typ)
	if err != nil {
		t.Fatal(err)
	}
	fwPlan, err := fwResp.PlannedState.Unmarshal(d.typ)
	if err != nil {
		t.Fatal(err)
	}
	if diffs, _ := fastPlan.Diff(fwPlan); len(diffs) > 0 {
		var at []string
		for _, df := range diffs {
			at = append(at, fmt.Sprintf("%s: fast %v, framework %v", df.Path, df.Value1, df.Value2))
		}
		t.Fatalf("the fast plan differs from the framework's:\n  %s\n%s", strings.Join(at, "\n  "), describe())
	}
	if string(fastResp.PlannedPrivate) != string(fwResp.PlannedPrivate) {
		t.Fatalf("planned private state: fast %q, framework %q\n%s", fastResp.PlannedPrivate, fwResp.PlannedPrivate, describe())
	}
	return out
}

// compact prints a value without its types, and only what is not null.
func compact(v tftypes.Value) string {
	switch {
	case !v.IsKnown():
		return "?"
	case v.IsNull():
		return "null"
	}
	var attrs map[string]tftypes.Value
	if v.As(&attrs) == nil {
		var parts []string
		for _, name := range slices.Sorted(maps.Keys(attrs)) {
			if !attrs[name].IsNull() {
				parts = append(parts, name+"="+compact(attrs[name]))
			}
		}
		return "{" + strings.Join(parts, " ") + "}"
	}
	var elems []tftypes.Value
	if v.As(&elems) == nil {
		var parts []string
		for _, e := range elems {
			parts = append(parts, compact(e))
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	// A primitive prints as Type<"value">: keep the value.
	_, val, _ := strings.Cut(v.String(), "<")
	return strings.TrimSuffix(val, ">")
}

func dynamic(t testing.TB, typ tftypes.Type, v tftypes.Value) *tfprotov6.DynamicValue {
	dv, err := tfprotov6.NewDynamicValue(typ, v)
	if err != nil {
		t.Fatal(err)
	}
	return &dv
}

func protoDiagnostics(ds []*tfprotov6.Diagnostic) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Summary+": "+d.Detail)
	}
	return out
}

// biasedBytes is random input whose bytes are mostly below 220 (modes
// "unset" and "kept"), so most requests are unchanged but for a few
// attributes: the plans the fast path must judge.
func biasedBytes(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		if r.Intn(25) == 0 {
			b[i] = byte(r.Intn(256))
		} else {
			b[i] = byte(r.Intn(220))
		}
	}
	return b
}

// The fast path agrees with the framework on thousands of generated plans,
// and the generator reaches every case that matters: for every attribute,
// each of the four modes; for every attribute with a default, a removal
// from an otherwise unchanged configuration (the plans the fast path once
// answered with "no changes").
func TestFastPlanMatchesFramework(t *testing.T) {
	d := newPlanDiff(t)
	r := rand.New(rand.NewSource(1))
	removed := map[string]bool{}
	fast, cases := 0, 0
	for _, p := range d.paths {
		for mode := range modeCount {
			for range 10 {
				out := d.check(t, p, mode, biasedBytes(r, 400))
				cases++
				if out.fast {
					fast++
				}
				if out.candidate && len(out.removedDefaults) == 1 {
					for k := range out.removedDefaults {
						removed[k] = true
					}
				}
			}
		}
	}
	for _, p := range defaultedPaths(d.ctx, d.attrs, "") {
		if !removed[p] {
			t.Errorf("no generated plan removed %s alone (with a prior value other than its default)", p)
		}
	}
	if fast < cases/20 {
		t.Errorf("the fast path answered %d of %d generated plans: the generator no longer reaches it", fast, cases)
	}
	t.Logf("%d generated plans, %d answered by the fast path; %d defaulted attributes removed alone", cases, fast, len(removed))
}

// FuzzFastPlanMatchesFramework explores further (go test -fuzz). Its seeds
// force each attribute (named by its path, elements as [*]) into each mode
// with everything else left as it was; testdata/fuzz holds the plans that
// were once answered wrongly. A focus that names no attribute picks one.
func FuzzFastPlanMatchesFramework(f *testing.F) {
	d := newPlanDiff(f)
	for _, p := range d.paths {
		for mode := range modeCount {
			f.Add(p, uint8(mode), []byte{})
		}
	}
	f.Fuzz(func(t *testing.T, focus string, mode uint8, in []byte) {
		if !slices.Contains(d.paths, focus) {
			focus = d.paths[len(focus)%len(d.paths)]
		}
		d.check(t, focus, int(mode)%modeCount, in)
	})
}
