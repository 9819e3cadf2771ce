package incus

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"

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

// Every request of the client is bounded the same way at the transport: a
// server that accepts the connection and never answers fails the call with
// ErrUnavailable and what to check.
func TestTransportGivesUpOnAHungServer(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "incus.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, conn) }() // reads, never answers
		}
	}()
	c, err := incus.ConnectIncusUnixWithContext(context.Background(), sock, &incus.ConnectionArgs{SkipGetServer: true})
	if err != nil {
		t.Fatal(err)
	}
	hc, err := c.GetHTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	boundAnswers(hc.Transport.(*http.Transport), 100*time.Millisecond)
	d := &Driver{backend: "b"}
	start := time.Now()
	_, err = c.GetInstances(api.InstanceTypeAny)
	err = d.errf(err, "list instances")
	if !errors.Is(err, driver.ErrUnavailable) || !strings.Contains(err.Error(), "incus info") || !strings.Contains(err.Error(), `incus backend "b"`) {
		t.Fatalf("err = %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("gave up after %s", time.Since(start))
	}
}

// incusd's own deadline in an answer says where to look, without guessing
// at a cause it has no evidence of; our context ending gets no such advice.
func TestServerDeadlineAdvice(t *testing.T) {
	d := &Driver{backend: "b"}
	failed := &opFailure{What: "Starting instance", ID: "42", Took: 61 * time.Second, Msg: "context deadline exceeded"}
	err := d.errf(failed, "start instance %q", "b-x")
	for _, want := range []string{`incus backend "b"`, `start instance "b-x"`, "Starting instance (operation 42) failed after 1m1s",
		"gave up on a deadline of its own", "incus info --show-log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("server's deadline: %v; want %q in it", err, want)
		}
	}
	if !errors.Is(err, driver.ErrUnavailable) || strings.Contains(err.Error(), "overload") {
		t.Errorf("server's deadline: %v", err)
	}
	err = d.errf(context.DeadlineExceeded, "start instance %q", "x")
	if strings.Contains(err.Error(), "deadline of its own") {
		t.Errorf("our deadline: %v", err)
	}
}
