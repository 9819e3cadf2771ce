package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	incus "github.com/lxc/incus/v6/client"
)

// apiTrace is a Docker API proxy on a unix socket that counts the calls
// going through it and their engine time, per endpoint. `-trace` runs a
// fleet through it to show what the provider asks the engine for.
type apiTrace struct {
	sock  string
	srv   *http.Server
	mu    sync.Mutex
	calls map[string]*callStat
}

type callStat struct {
	n     int
	total time.Duration
	max   time.Duration
}

func startTrace(dir, kind, target string) (*apiTrace, error) {
	t := &apiTrace{sock: filepath.Join(dir, kind+"-trace.sock"), calls: map[string]*callStat{}}
	ln, err := net.Listen("unix", t.sock)
	if err != nil {
		return nil, err
	}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker"
		},
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", target)
		}},
		FlushInterval: -1,
		ErrorLog:      nil,
	}
	t.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		proxy.ServeHTTP(w, r)
		t.record(r.Method+" "+normalisePath(r.URL.Path), time.Since(start))
	}), ErrorLog: nil}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

func (t *apiTrace) record(key string, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.calls[key]
	if s == nil {
		s = &callStat{}
		t.calls[key] = s
	}
	s.n++
	s.total += d
	s.max = max(s.max, d)
}

// take returns the counts since the last take and resets them.
func (t *apiTrace) take() map[string]*callStat {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.calls
	t.calls = map[string]*callStat{}
	return c
}

func (t *apiTrace) close() { _ = t.srv.Close(); _ = os.Remove(t.sock) }

var (
	apiVersion = regexp.MustCompile(`^/v?[0-9.]+`)
	imageRef   = regexp.MustCompile(`^/images/.+/(json|history|push|tag)$`)
)

// normalisePath replaces object names and IDs by {id}.
func normalisePath(p string) string {
	p = apiVersion.ReplaceAllString(p, "")
	if m := imageRef.FindStringSubmatch(p); m != nil {
		return "/images/{ref}/" + m[1]
	}
	seg := strings.Split(strings.Trim(p, "/"), "/")
	if len(seg) >= 2 {
		switch seg[0] {
		case "containers", "networks", "volumes", "exec", "images", "instances", "operations", "projects", "profiles":
			switch seg[1] {
			case "json", "create", "prune", "load", "search", "build":
			default:
				seg[1] = "{id}"
			}
		}
	}
	return "/" + strings.Join(seg, "/")
}

// traceFleet runs a fleet of n through the proxy and prints the calls of
// each terraform command. kind is "docker" or "incus".
func traceFleet(ctx context.Context, b *bench, kind string, n int, w io.Writer) error {
	target, backend := "/var/run/docker.sock", "bench-trace-"+b.runID
	if kind == "incus" {
		target = "/var/lib/incus/unix.socket"
	}
	if _, err := os.Stat(target); err != nil {
		return skipf("%s is not there", target)
	}
	t, err := startTrace(b.tmp, kind, target)
	if err != nil {
		return err
	}
	defer t.close()
	var hcl string
	switch kind {
	case "docker":
		cli, err := dockerClient(ctx, localSocket)
		if err != nil {
			return skipf("dockerd does not answer: %v", err)
		}
		if err := b.ensureDockerImage(ctx, cli, "the local dockerd"); err != nil {
			return err
		}
		b.sweepProviderDocker(cli, backend)
		hcl = dockerBackendHCL(backend, fmt.Sprintf("    host = %q", "unix://"+t.sock))
	case "incus":
		hcl = incusHCL(backend, fmt.Sprintf(`{ project = "default", address = %q }`, "unix://"+t.sock))
		b.onCleanup("incus instances "+backend+"-*", func(ctx context.Context) error {
			c, err := incus.ConnectIncusUnixWithContext(ctx, "", nil)
			if err != nil {
				return err
			}
			defer c.Disconnect()
			return incusSweep(ctx, c, backend+"-", b.o.parallelism)
		})
	}
	wd, err := b.newWorkdir(kind+"-trace", hcl)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%s API calls of the provider for a fleet of %d (through a counting proxy; times include the proxy)\n", kind, n)
	for _, step := range []struct{ cmd, label string }{{"apply", "apply"}, {"plan", "re-plan"}, {"destroy", "destroy"}} {
		args := []string{"-auto-approve"}
		if step.cmd == "plan" {
			args = []string{"-detailed-exitcode"}
		}
		t.take()
		r, err := wd.run(ctx, step.cmd, n, args...)
		if err != nil {
			return err
		}
		if r.exitCode != 0 && (step.cmd != "plan" || r.exitCode != 2) {
			return r.must(step.cmd)
		}
		calls := t.take()
		keys := make([]string, 0, len(calls))
		total := 0
		for k, s := range calls {
			keys = append(keys, k)
			total += s.n
		}
		sort.Slice(keys, func(i, j int) bool { return calls[keys[i]].total > calls[keys[j]].total })
		fmt.Fprintf(w, "%s (%s wall, %d calls):\n", step.label, secs(r.wall), total)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, k := range keys {
			s := calls[k]
			fmt.Fprintf(tw, "  %s\t%d\tsum %s\tmax %s\n", k, s.n, secs(s.total), secs(s.max))
		}
		tw.Flush()
	}
	return nil
}
