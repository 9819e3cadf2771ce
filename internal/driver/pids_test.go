package driver

import "testing"

func TestEffectivePidsLimit(t *testing.T) {
	cases := []struct {
		requested int64
		typ       string
		canLimit  bool
		want      int64
	}{
		{0, TypeContainer, true, DefaultPidsLimit}, // unset: the safe default
		{0, "", true, DefaultPidsLimit},            // type defaults to container
		{0, TypeContainer, false, 0},               // the engine cannot limit: none, not an error
		{0, TypeVM, true, 0},                       // VMs take no pids limit
		{PidsUnlimited, TypeContainer, true, PidsUnlimited},
		{100, TypeContainer, true, 100},
		{100, TypeContainer, false, 100}, // an explicit limit is refused elsewhere, never dropped
	}
	for _, c := range cases {
		if got := EffectivePidsLimit(c.requested, c.typ, c.canLimit); got != c.want {
			t.Errorf("EffectivePidsLimit(%d, %q, %v) = %d, want %d", c.requested, c.typ, c.canLimit, got, c.want)
		}
	}
}
