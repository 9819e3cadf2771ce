// Package testgate reads the acceptance-test gates (SANDBOX_ACC_DOCKER, ...)
// the same way everywhere: driver tests, sshconn and acctest's prechecks.
//
// A gate unset or set to 0, false or no (any case) is off: the test skips and
// says which gate would run it. Any other value is on: the engine must answer,
// and a test whose engine does not answer fails with a hint on how to start it.
// It imports nothing but the standard library.
package testgate

import (
	"os"
	"strings"
	"testing"
)

// Enabled reports whether the gate variable name is on.
func Enabled(name string) bool {
	switch strings.ToLower(strings.TrimSpace(os.Getenv(name))) {
	case "", "0", "false", "no", "off":
		return false
	}
	return true
}

// Skip skips t unless the gate name is on.
func Skip(t testing.TB, name string) {
	t.Helper()
	if !Enabled(name) {
		t.Skipf("%s is unset or off: skipping (set %s=1 to run this test)", name, name)
	}
}

// Require skips t unless the gate name is on; with it on, probe (may be nil)
// must succeed, else t fails with its error and hint (what to start or
// install).
func Require(t testing.TB, name string, probe func() error, hint string) {
	t.Helper()
	Skip(t, name)
	if probe == nil {
		return
	}
	if err := probe(); err != nil {
		if hint != "" {
			t.Fatalf("%s is set but %v\n%s", name, err, hint)
		}
		t.Fatalf("%s is set but %v", name, err)
	}
}
