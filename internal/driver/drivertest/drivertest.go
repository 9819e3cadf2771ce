// Package drivertest is the conformance suite every driver runs against its
// real engine:
//
//	func TestConformance(t *testing.T) {
//		acctest.PreCheckDocker(t)
//		drivertest.Run(t, drivertest.Harness{
//			Open:  func(t *testing.T) driver.Driver { ... a fresh, uniquely named backend ... },
//			Image: "sandbox-test/busybox:latest",
//			Skip:  map[string]string{drivertest.TestLifetime: "engine cannot stop on its own"},
//		})
//	}
//
// Every subtest opens its own backend scope and deletes what it created at
// cleanup, even on failure. Assertions compare real observed values (exit
// codes, file contents, cgroup limits, HTTP bodies), so a driver that only
// pretends fails.
package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sort"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// Harness is what a driver's test provides.
type Harness struct {
	// Open returns a driver for a fresh, uniquely named backend scope. The
	// suite calls EnsureScope, and at cleanup deletes every instance of the
	// scope, the scope itself, and closes the driver.
	Open func(t *testing.T) driver.Driver
	// Image is a reference on that backend whose rootfs has busybox with at
	// least sh, sleep, cat, nc, httpd, wget, id, stat, pwd and env, and the
	// busybox binary itself on PATH. The agent must be at
	// agent.PathInInstance in its instances (the Initializer subtest).
	Image string
	// Skip maps subtest names (the Test* constants) to why this backend
	// cannot do them; those subtests are skipped with that reason.
	Skip map[string]string
}

// Subtest names, usable as Harness.Skip keys.
const (
	TestInfo              = "Info"
	TestScopeIdempotent   = "ScopeIdempotent"
	TestLifecycle         = "Lifecycle"
	TestExecEnv           = "ExecEnv"
	TestExecOutput        = "ExecOutputBounded"
	TestExecPrivileges    = "ExecPrivileges"
	TestFiles             = "Files"
	TestCreateStopped     = "CreateStopped"
	TestExited            = "Exited"
	TestVolumes           = "Volumes"
	TestPorts             = "Ports"
	TestLifetime          = "Lifetime"
	TestLimits            = "Limits"
	TestCreateFailure     = "CreateFailure"
	TestDetachedExec      = "DetachedExec"
	TestConcurrentCreates = "ConcurrentCreates"
	TestInitializer       = "Initializer"
	TestServiceLinks      = "ServiceStateLinks"
)

// OpTimeout bounds each engine call of the suite.
const OpTimeout = 2 * time.Minute

type subtest struct {
	name string
	fn   func(t *testing.T, s *suite)
}

var subtests = []subtest{
	{TestInfo, testInfo},
	{TestScopeIdempotent, testScopeIdempotent},
	{TestLifecycle, testLifecycle},
	{TestExecEnv, testExecEnv},
	{TestExecOutput, testExecOutputBounded},
	{TestExecPrivileges, testExecPrivileges},
	{TestFiles, testFiles},
	{TestCreateStopped, testCreateStopped},
	{TestExited, testExited},
	{TestVolumes, testVolumes},
	{TestPorts, testPorts},
	{TestLifetime, testLifetime},
	{TestLimits, testLimits},
	{TestCreateFailure, testCreateFailure},
	{TestDetachedExec, testDetachedExec},
	{TestConcurrentCreates, testConcurrentCreates},
	{TestInitializer, testInitializer},
	{TestServiceLinks, testServiceStateLinks},
}

// suite carries the harness into subtests.
type suite struct {
	h Harness
}

// Run runs every subtest against the harness's backend.
func Run(t *testing.T, h Harness) {
	if h.Open == nil || h.Image == "" {
		t.Fatal("drivertest: Harness.Open and Harness.Image are required")
	}
	checkSkipKeys(t, h.Skip)
	s := &suite{h: h}
	for _, st := range subtests {
		t.Run(st.name, func(t *testing.T) {
			if reason, ok := h.Skip[st.name]; ok {
				t.Skip(reason)
			}
			st.fn(t, s)
		})
	}
}

// checkSkipKeys fails on a misspelled Skip key, which would silently run a
// subtest the backend meant to skip (or hide that it skips nothing).
func checkSkipKeys(t *testing.T, skip map[string]string) {
	t.Helper()
	known := map[string]bool{}
	for _, st := range subtests {
		known[st.name] = true
	}
	var bad []string
	for k := range skip {
		if !known[k] {
			bad = append(bad, k)
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Fatalf("drivertest: unknown Skip keys %q", bad)
	}
}

// ctx returns a context bounded by OpTimeout and the test's deadline.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), OpTimeout)
	t.Cleanup(cancel)
	return c
}

// uniqueName returns a DNS-label name unlikely to collide across runs.
func uniqueName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}
