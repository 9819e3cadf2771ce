package incus

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// A server that stops answering fails the request after the limit, saying
// which server and what to check, instead of hanging the run.
func TestAnsweredGivesUpOnAHungServer(t *testing.T) {
	d := &Driver{backend: "b", cfg: driver.IncusConfig{Address: "https://incus.example:8443"}}
	hung := make(chan struct{})
	defer close(hung)
	start := time.Now()
	err := d.answered(context.Background(), "list instances", 50*time.Millisecond, func() error { <-hung; return nil })
	if !errors.Is(err, driver.ErrUnavailable) || !strings.Contains(err.Error(), "list instances") ||
		!strings.Contains(err.Error(), "https://incus.example:8443") || !strings.Contains(err.Error(), "incus info") {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("gave up after %s", time.Since(start))
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := d.answered(ctx, "x", time.Hour, func() error { <-hung; return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	want := errors.New("server said no")
	if err := d.answered(context.Background(), "x", time.Hour, func() error { return want }); !errors.Is(err, want) {
		t.Errorf("answer: %v", err)
	}
}
