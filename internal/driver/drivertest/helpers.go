package drivertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// scope is one opened backend with everything created in it tracked for
// cleanup.
type scope struct {
	t       *testing.T
	d       driver.Driver
	s       *suite
	mu      sync.Mutex
	volumes []string
}

// open opens a fresh backend scope and registers its teardown: delete every
// instance still listed (even ones a failed create leaked), tracked volumes,
// the scope, then close the driver.
func (s *suite) open(t *testing.T) *scope {
	t.Helper()
	d := s.h.Open(t)
	if d == nil {
		t.Fatal("Harness.Open returned nil")
	}
	sc := &scope{t: t, d: d, s: s}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Logf("cleanup: close driver: %v", err)
		}
	})
	t.Cleanup(sc.teardown)
	if err := d.EnsureScope(ctx(t)); err != nil {
		t.Fatalf("EnsureScope: %v", err)
	}
	return sc
}

func (sc *scope) teardown() {
	c, cancel := context.WithTimeout(context.Background(), OpTimeout)
	defer cancel()
	list, err := sc.d.ListInstances(c)
	if err != nil {
		sc.t.Errorf("cleanup: list instances: %v", err)
	}
	for _, in := range list {
		if err := sc.d.DeleteInstance(c, in.ID); err != nil {
			sc.t.Errorf("cleanup: delete instance %s (%s): %v", in.Name, in.ID, err)
		}
	}
	sc.mu.Lock()
	vols := sc.volumes
	sc.mu.Unlock()
	for _, v := range vols {
		if err := sc.d.DeleteVolume(c, v); err != nil && !driver.IsNotFound(err) {
			sc.t.Errorf("cleanup: delete volume %s: %v", v, err)
		}
	}
	if err := sc.d.DeleteScope(c); err != nil && !driver.IsNotFound(err) {
		sc.t.Errorf("cleanup: delete scope: %v", err)
	}
}

// spec returns a running instance spec on the harness image that stays up.
func (sc *scope) spec(prefix string) driver.InstanceSpec {
	return driver.InstanceSpec{
		Name:    uniqueName(prefix),
		Type:    driver.TypeContainer,
		Image:   sc.s.h.Image,
		Command: []string{"sleep", "3600"},
		Labels:  map[string]string{"drivertest": "yes"},
		Running: true,
	}
}

// create creates an instance and schedules its deletion.
func (sc *scope) create(t *testing.T, spec driver.InstanceSpec) driver.Instance {
	t.Helper()
	in, err := sc.d.CreateInstance(ctx(t), spec)
	if err != nil {
		t.Fatalf("CreateInstance(%s): %v", spec.Name, err)
	}
	if in.ID == "" {
		t.Fatalf("CreateInstance(%s) returned an empty ID", spec.Name)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), OpTimeout)
		defer cancel()
		if err := sc.d.DeleteInstance(c, in.ID); err != nil && !driver.IsNotFound(err) {
			t.Errorf("cleanup: delete instance %s: %v", spec.Name, err)
		}
	})
	return in
}

// createVolume creates a volume and schedules its deletion.
func (sc *scope) createVolume(t *testing.T, spec driver.VolumeSpec) driver.Volume {
	t.Helper()
	sc.mu.Lock()
	sc.volumes = append(sc.volumes, spec.Name)
	sc.mu.Unlock()
	v, err := sc.d.CreateVolume(ctx(t), spec)
	if err != nil {
		t.Fatalf("CreateVolume(%s): %v", spec.Name, err)
	}
	return v
}

// exec runs a command and fails the test if the call itself errors.
func (sc *scope) exec(t *testing.T, id string, spec driver.ExecSpec) driver.ExecResult {
	t.Helper()
	res, err := sc.d.Exec(ctx(t), id, spec)
	if err != nil {
		t.Fatalf("Exec(%q): %v", spec.Command, err)
	}
	return res
}

// sh runs `sh -c script` and requires exit 0; it returns stdout.
func (sc *scope) sh(t *testing.T, id, script string) string {
	t.Helper()
	res := sc.exec(t, id, driver.ExecSpec{Command: []string{"sh", "-c", script}})
	if res.ExitCode != 0 {
		t.Fatalf("sh -c %q: exit %d\nstdout: %s\nstderr: %s", script, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

// expectOutput runs a script and compares its stdout exactly.
func (sc *scope) expectOutput(t *testing.T, id, script, want string) {
	t.Helper()
	if got := sc.sh(t, id, script); got != want {
		t.Errorf("sh -c %q: stdout %q, want %q", script, got, want)
	}
}

// inspect returns the instance, failing on error.
func (sc *scope) inspect(t *testing.T, id string) driver.Instance {
	t.Helper()
	in, err := sc.d.InspectInstance(ctx(t), id)
	if err != nil {
		t.Fatalf("InspectInstance(%s): %v", id, err)
	}
	return in
}

// waitStatus polls until the instance reports one of want.
func (sc *scope) waitStatus(t *testing.T, id string, timeout time.Duration, want ...string) driver.Instance {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		in := sc.inspect(t, id)
		for _, w := range want {
			if in.Status == w {
				return in
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s: status %q after %s, want one of %q", id, in.Status, timeout, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// eventually retries check until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, timeout, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// listIDs lists the scope's instances as a set of IDs.
func (sc *scope) listIDs(t *testing.T) map[string]driver.Instance {
	t.Helper()
	list, err := sc.d.ListInstances(ctx(t))
	if err != nil {
		t.Fatalf("ListInstances: %v", err)
	}
	out := make(map[string]driver.Instance, len(list))
	for _, in := range list {
		out[in.ID] = in
	}
	return out
}

// info returns the backend info, failing on error.
func (sc *scope) info(t *testing.T) driver.Info {
	t.Helper()
	info, err := sc.d.Info(ctx(t))
	if err != nil {
		t.Fatalf("Info: %v", err)
	}
	return info
}

// requireCap skips the test when the backend lacks capability c.
func (sc *scope) requireCap(t *testing.T, c string) {
	t.Helper()
	if !sc.info(t).Has(c) {
		t.Skipf("backend does not report capability %q", c)
	}
}

// expectNotFound checks err wraps driver.ErrNotFound.
func expectNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("%s: got %v, want an error wrapping driver.ErrNotFound", what, err)
	}
}

// labelsInclude reports the first key of want missing or different in got.
func labelsInclude(got, want map[string]string) error {
	var bad []string
	for k, v := range want {
		if got[k] != v {
			bad = append(bad, fmt.Sprintf("%s=%q (have %q)", k, v, got[k]))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("missing labels %s", strings.Join(bad, ", "))
	}
	return nil
}
