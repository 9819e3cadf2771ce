package testgate

import (
	"errors"
	"testing"
)

func TestEnabled(t *testing.T) {
	for v, want := range map[string]bool{
		"": false, "0": false, "false": false, "no": false, "NO": false, "False": false, "off": false, " 0 ": false,
		"1": true, "true": true, "yes": true, "anything": true,
	} {
		t.Setenv("SANDBOX_ACC_TESTGATE", v)
		if got := Enabled("SANDBOX_ACC_TESTGATE"); got != want {
			t.Errorf("Enabled with %q = %v, want %v", v, got, want)
		}
	}
}

// recorder stands in for *testing.T to observe Skip and Fatal.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper() {}
func (r *recorder) Skipf(format string, args ...any) {
	r.skipped = format
	panic(r)
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	panic(r)
}

func run(f func(r *recorder)) (r *recorder) {
	r = &recorder{}
	defer func() { _ = recover() }()
	f(r)
	return r
}

func TestRequire(t *testing.T) {
	const gate = "SANDBOX_ACC_TESTGATE"
	probed := false
	probe := func() error { probed = true; return errors.New("nothing answers") }

	t.Setenv(gate, "0")
	if r := run(func(r *recorder) { Require(r, gate, probe, "start it") }); r.skipped == "" || probed {
		t.Errorf("gate 0: skipped=%q probed=%v, want a skip without probing", r.skipped, probed)
	}
	t.Setenv(gate, "1")
	if r := run(func(r *recorder) { Require(r, gate, probe, "start it") }); r.failed == "" || !probed {
		t.Errorf("gate 1, engine down: failed=%q, want a failure", r.failed)
	}
	if r := run(func(r *recorder) { Require(r, gate, func() error { return nil }, "") }); r.failed != "" || r.skipped != "" {
		t.Errorf("gate 1, engine up: %+v", r)
	}
}
