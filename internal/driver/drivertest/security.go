package drivertest

import (
	"strconv"
	"strings"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// testExecPrivileges: a command run with Exec is held like the sandbox's own
// processes. With NoNewPrivileges it has no_new_privs, and it never holds a
// capability (bounding, permitted or effective) that PID 1 lacks: entering a sandbox
// must not be a way around its hardening.
func testExecPrivileges(t *testing.T, s *suite) {
	sc := s.open(t)
	spec := sc.spec("privs")
	spec.Security = driver.Security{NoNewPrivileges: true, CapDrop: []string{"ALL"}, CapAdd: []string{"NET_BIND_SERVICE"}}
	in := sc.create(t, spec)
	const fields = "grep -E '^(NoNewPrivs|CapPrm|CapEff|CapBnd):' "
	pid1 := procStatus(t, sc.sh(t, in.ID, fields+"/proc/1/status"))
	for _, script := range []string{fields + "/proc/self/status", "exec " + fields + "/proc/self/status"} {
		self := procStatus(t, sc.sh(t, in.ID, script))
		if self["NoNewPrivs"] != 1 {
			t.Errorf("%s: an exec has NoNewPrivs %d, want 1 (PID 1 has %d)", script, self["NoNewPrivs"], pid1["NoNewPrivs"])
		}
		for _, c := range []string{"CapBnd", "CapPrm", "CapEff"} {
			if extra := self[c] &^ pid1[c]; extra != 0 {
				t.Errorf("%s: an exec's %s %016x holds %016x that PID 1's (%016x) does not", script, c, self[c], extra, pid1[c])
			}
		}
	}
}

// procStatus parses "Key:\tvalue" lines of /proc/PID/status: NoNewPrivs in
// decimal, capability sets in hexadecimal.
func procStatus(t *testing.T, out string) map[string]uint64 {
	t.Helper()
	m := map[string]uint64{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		base := 16
		if k == "NoNewPrivs" {
			base = 10
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), base, 64)
		if err != nil {
			t.Fatalf("parse %q: %v", line, err)
		}
		m[k] = n
	}
	if len(m) != 4 {
		t.Fatalf("want NoNewPrivs, CapPrm, CapEff and CapBnd in %q", out)
	}
	return m
}
