package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// ScopeExists follows the backend directory: made by EnsureScope, gone when
// removed behind the driver's back.
func TestScopeExists(t *testing.T) {
	root := t.TempDir()
	dv, err := Open(context.Background(), driver.Config{Driver: driver.Local, Name: "scope",
		Local: &driver.LocalConfig{Root: root, Isolation: driver.IsolationNone}})
	if err != nil {
		t.Fatal(err)
	}
	d := dv.(*Driver)
	ctx := context.Background()
	check := func(want bool) {
		t.Helper()
		if got, err := d.ScopeExists(ctx); err != nil || got != want {
			t.Fatalf("ScopeExists = %v, %v; want %v", got, err, want)
		}
	}
	check(false)
	if err := d.EnsureScope(ctx); err != nil {
		t.Fatal(err)
	}
	check(true)
	if err := os.RemoveAll(filepath.Join(root, "scope")); err != nil {
		t.Fatal(err)
	}
	check(false)
}
