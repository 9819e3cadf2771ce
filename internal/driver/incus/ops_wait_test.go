package incus

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	incus "github.com/lxc/incus/v6/client"
	"github.com/lxc/incus/v6/shared/api"
)

// waitServer answers the two endpoints waitOperation uses the way a given
// incusd release does, for the release this machine does not run (the
// acceptance tests run the installed 6.0.4). The first `running` waits find
// the operation still running; then it ends with failMsg ("" = success).
type waitServer struct {
	legacy  bool // 6.0.4: a wait that times out, and a failure, answer as errors
	running int
	failMsg string
	gone    bool // the operation vanishes instead of ending

	mu    sync.Mutex
	waits int
}

const testOpID = "7c1d9a2e-0000-4000-8000-000000000001"

func (s *waitServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	final := s.waits >= s.running
	status := "running"
	switch {
	case final && s.gone:
		status = ""
	case final && s.failMsg != "":
		status = "failure"
	case final:
		status = "success"
	}
	switch { //nolint:staticcheck // the cases below test more than the path
	case r.URL.Path == "/1.0/operations":
		md := map[string][]string{}
		if status != "" {
			md[status] = []string{"/1.0/operations/" + testOpID}
		}
		writeJSON(w, api.ResponseRaw{Type: api.SyncResponse, StatusCode: 200, Metadata: md})
	case r.URL.Path == "/1.0/operations/"+testOpID+"/wait":
		s.waits++
		op := api.Operation{ID: testOpID, Description: "Starting instance", Status: "Running", StatusCode: api.Running}
		switch {
		case status == "":
			w.WriteHeader(http.StatusNotFound)
			writeJSON(w, api.ResponseRaw{Type: api.ErrorResponse, Code: 404, Error: "Operation not found"})
		case s.legacy && status == "running":
			writeJSON(w, api.ResponseRaw{Type: api.ErrorResponse, Code: 500, Error: "context deadline exceeded"})
		case s.legacy && status == "failure":
			writeJSON(w, api.ResponseRaw{Type: api.ErrorResponse, Code: 500, Error: s.failMsg})
		default:
			if status == "success" { //nolint:staticcheck // two outcomes and a default read clearer as ifs
				op.Status, op.StatusCode = "Success", api.Success
			} else if status == "failure" {
				op.Status, op.StatusCode, op.Err = "Failure", api.Failure, s.failMsg
			}
			writeJSON(w, api.ResponseRaw{Type: api.SyncResponse, StatusCode: 200, Metadata: op})
		}
	default:
		http.NotFound(w, r)
	}
}

// writeJSON answers 200 with v, as incusd's wait does even for its errors
// (it writes the header before waiting).
func writeJSON(w http.ResponseWriter, v any) {
	_ = json.NewEncoder(w).Encode(v)
}

func (s *waitServer) client(t *testing.T) incus.InstanceServer {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "incus.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	c, err := incus.ConnectIncusUnixWithContext(context.Background(), sock, &incus.ConnectionArgs{SkipGetServer: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// An operation still running when a wait times out is waited for again,
// whichever way the server answers that wait; its own failure comes back as
// the operation's failure, naming it; one that vanished says so.
func TestWaitOperationAcrossReleases(t *testing.T) {
	for _, tc := range []struct {
		name    string
		srv     *waitServer
		wantErr string // "" = success
	}{
		{"6.0.4 running then success", &waitServer{legacy: true, running: 3}, ""},
		{"6.0.5 running then success", &waitServer{running: 3}, ""},
		{"6.0.4 running then failure", &waitServer{legacy: true, running: 2, failMsg: "Failed to run: forkstart"},
			"Starting instance (operation " + testOpID + ") failed after"},
		{"6.0.5 running then failure", &waitServer{running: 2, failMsg: "Failed to run: forkstart"},
			"Starting instance (operation " + testOpID + ") failed after"},
		{"6.0.4 vanished", &waitServer{legacy: true, running: 1, gone: true}, "vanished from the Incus server"},
		{"6.0.5 vanished", &waitServer{running: 1, gone: true}, "vanished from the Incus server"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Driver{backend: "b"}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			op, err := d.waitOperation(ctx, tc.srv.client(t), &api.Operation{ID: testOpID, Description: "Starting instance"})
			if tc.wantErr == "" {
				if err != nil || op == nil || op.StatusCode != api.Success {
					t.Fatalf("op %+v, err %v; want success", op, err)
				}
			} else if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v; want %q", err, tc.wantErr)
			}
			if tc.srv.failMsg != "" {
				var failed *opFailure
				if !errors.As(err, &failed) || failed.Msg != tc.srv.failMsg {
					t.Errorf("err = %#v; want the operation's own failure %q", err, tc.srv.failMsg)
				}
			}
			if tc.srv.waits < tc.srv.running {
				t.Errorf("gave up after %d waits; the operation ran for %d", tc.srv.waits, tc.srv.running)
			}
		})
	}
}

// When ctx ends while the operation still runs, the error says which
// operation, for how long, and what the last wait answered.
func TestWaitOperationOutlivesContext(t *testing.T) {
	srv := &waitServer{legacy: true, running: 1 << 30}
	d := &Driver{backend: "b"}
	ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	_, err := d.waitOperation(ctx, srv.client(t), &api.Operation{ID: testOpID, Description: "Stopping instance"})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "Stopping instance (operation "+testOpID+") still running after") ||
		!strings.Contains(err.Error(), "the last wait answered: context deadline exceeded") {
		t.Fatalf("err = %v", err)
	}
}

// A delete gives the instance its own grace: the agent's and an image
// init's act on the stop signal; a bare command as PID 1 is forced at once.
func TestDeleteGrace(t *testing.T) {
	for _, tc := range []struct {
		name, typ, raw string
		want           time.Duration
	}{
		{"system container", "container", "", stopGrace},
		{"hardened system container", "container", "lxc.no_new_privs = 1\n", stopGrace},
		{"agent init", "container", "lxc.init.cmd = /.sandbox/sandbox-agent init --grace 10s -- sleep 3600\nlxc.signal.halt = SIGTERM\n", stopGrace + 2*time.Second},
		{"bare command", "container", "lxc.init.cmd = sleep 3600\nlxc.signal.halt = SIGTERM\n", 0},
		{"vm", "virtual-machine", "", stopGrace},
	} {
		inst := &api.Instance{Type: tc.typ, InstancePut: api.InstancePut{Config: map[string]string{"raw.lxc": tc.raw}}}
		if got := deleteGrace(inst); got != tc.want {
			t.Errorf("%s: grace %s, want %s", tc.name, got, tc.want)
		}
	}
}
