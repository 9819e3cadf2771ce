package main

import (
	"testing"
	"time"
)

func TestSubst(t *testing.T) {
	cases := map[string]string{
		"w0":                       "w7",
		"/r/b/instances/w0/rootfs": "/r/b/instances/w7/rootfs",
		"/r/b/instances/w0":        "/r/b/instances/w7",
		"upperdir=/r/b/instances/w0/upper,workdir=x": "upperdir=/r/b/instances/w7/upper,workdir=x",
		"/sys/fs/cgroup/pids/p/b.w0.1a2b":            "/sys/fs/cgroup/pids/p/b.w7.1a2b",
		"w01":                                        "w01",
		"--hostname":                                 "--hostname",
	}
	for in, want := range cases {
		if got := subst(in, 7); got != want {
			t.Errorf("subst(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNormalisePath(t *testing.T) {
	cases := map[string]string{
		"/v1.41/containers/abc/start":                "/containers/{id}/start",
		"/v1.41/containers/json":                     "/containers/json",
		"/v1.41/containers/create":                   "/containers/create",
		"/v1.41/images/sandbox-bench/busybox:1/json": "/images/{ref}/json",
		"/1.0/instances/bench-w1/state":              "/instances/{id}/state",
		"/1.0/operations/0b3f/wait":                  "/operations/{id}/wait",
		"/_ping":                                     "/_ping",
		"/v1.41/networks/sandbox-bench-1":            "/networks/{id}",
	}
	for in, want := range cases {
		if got := normalisePath(in); got != want {
			t.Errorf("normalisePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMedian(t *testing.T) {
	s := time.Second
	if got := median([]time.Duration{3 * s, 1 * s, 2 * s}); got != 2*s {
		t.Errorf("odd: %v", got)
	}
	if got := median([]time.Duration{4 * s, 1 * s, 2 * s, 3 * s}); got != 2500*time.Millisecond {
		t.Errorf("even: %v", got)
	}
	if got := median(nil); got != 0 {
		t.Errorf("empty: %v", got)
	}
}

func TestEmptyNote(t *testing.T) {
	for want, in := range map[string][]bool{"yes": {true, true}, "NO": {false}, "1/2 runs": {true, false}, "?": nil} {
		if got := emptyNote(in); got != want {
			t.Errorf("emptyNote(%v) = %q, want %q", in, got, want)
		}
	}
}
