package drivertest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

func testFiles(t *testing.T, s *suite) {
	sc := s.open(t)
	local := filepath.Join(t.TempDir(), "script.sh")
	if err := os.WriteFile(local, []byte("#!/bin/sh\necho from-source\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	spec := sc.spec("files")
	spec.Files = []driver.File{
		{Path: "/workspace/task.json", Content: []byte(`{"a":1}`), Mode: 0o640},
		{Path: "/opt/drivertest/deep/run.sh", Source: local, Mode: 0o755},
	}
	in := sc.create(t, spec)
	sc.expectOutput(t, in.ID, "cat /workspace/task.json; echo; stat -c %a /workspace/task.json", "{\"a\":1}\n640\n")
	sc.expectOutput(t, in.ID, "/opt/drivertest/deep/run.sh; stat -c %a /opt/drivertest/deep/run.sh", "from-source\n755\n")

	late := []driver.File{{Path: "/tmp/late/late.txt", Content: []byte("late"), Mode: 0o600}}
	if err := sc.d.CopyFiles(ctx(t), in.ID, late); err != nil {
		t.Fatalf("CopyFiles: %v", err)
	}
	sc.expectOutput(t, in.ID, "cat /tmp/late/late.txt; echo; stat -c %a /tmp/late/late.txt", "late\n600\n")
	// Copying again replaces the content.
	late[0].Content = []byte("newer")
	if err := sc.d.CopyFiles(ctx(t), in.ID, late); err != nil {
		t.Fatalf("CopyFiles again: %v", err)
	}
	sc.expectOutput(t, in.ID, "cat /tmp/late/late.txt", "newer")
}

func testVolumes(t *testing.T, s *suite) {
	sc := s.open(t)
	sc.requireCap(t, driver.CapVolumes)
	seedDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(seedDir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"seed.txt": "seed\n", "sub/nested.txt": "nested\n"} {
		if err := os.WriteFile(filepath.Join(seedDir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	seeded := sc.createVolume(t, driver.VolumeSpec{Name: uniqueName("seed"), SourceDir: seedDir})
	// A source that is a symlink to the directory seeds its files too.
	seedLink := filepath.Join(t.TempDir(), "seed-link")
	if err := os.Symlink(seedDir, seedLink); err != nil {
		t.Fatal(err)
	}
	linked := sc.createVolume(t, driver.VolumeSpec{Name: uniqueName("linked"), SourceDir: seedLink})
	scratch := sc.createVolume(t, driver.VolumeSpec{Name: uniqueName("rw")})
	if v, err := sc.d.InspectVolume(ctx(t), seeded.Name); err != nil || v.Name != seeded.Name {
		t.Errorf("InspectVolume(%s) = %+v, %v", seeded.Name, v, err)
	}

	spec := sc.spec("vols")
	spec.Mounts = []driver.Mount{
		{Volume: seeded.Name, Target: "/data", ReadOnly: true},
		{Volume: scratch.Name, Target: "/rw"},
		{Volume: linked.Name, Target: "/linked", ReadOnly: true},
	}
	writer := sc.create(t, spec)
	sc.expectOutput(t, writer.ID, "cat /data/seed.txt /data/sub/nested.txt", "seed\nnested\n")
	sc.expectOutput(t, writer.ID, "cat /linked/seed.txt /linked/sub/nested.txt", "seed\nnested\n")
	if res := sc.exec(t, writer.ID, driver.ExecSpec{Command: []string{"sh", "-c", "echo x > /data/new"}}); res.ExitCode == 0 {
		t.Error("writing to a read-only mount succeeded")
	}
	sc.sh(t, writer.ID, "echo shared > /rw/f")

	// A second instance sees what the first wrote.
	spec2 := sc.spec("vols")
	spec2.Mounts = []driver.Mount{{Volume: scratch.Name, Target: "/again"}}
	reader := sc.create(t, spec2)
	sc.expectOutput(t, reader.ID, "cat /again/f", "shared\n")

	for _, id := range []string{writer.ID, reader.ID} {
		if err := sc.d.DeleteInstance(ctx(t), id); err != nil {
			t.Fatalf("DeleteInstance: %v", err)
		}
	}
	for _, v := range []string{seeded.Name, scratch.Name, linked.Name} {
		if err := sc.d.DeleteVolume(ctx(t), v); err != nil {
			t.Fatalf("DeleteVolume(%s): %v", v, err)
		}
		_, err := sc.d.InspectVolume(ctx(t), v)
		expectNotFound(t, "InspectVolume after delete", err)
		if err := sc.d.DeleteVolume(ctx(t), v); err != nil && !driver.IsNotFound(err) {
			t.Errorf("second DeleteVolume(%s): %v, want nil or ErrNotFound", v, err)
		}
	}
}

func testPorts(t *testing.T, s *suite) {
	sc := s.open(t)
	sc.requireCap(t, driver.CapPorts)
	spec := sc.spec("ports")
	// Free host ports, not fixed ones: on backends that share the host's
	// network (local "bridge") a fixed port collides with whatever else the
	// machine runs, e.g. other test packages running in parallel.
	httpPort, rawPort := freeHostPort(t), freeHostPort(t)
	spec.Command = []string{"sh", "-c", fmt.Sprintf("mkdir -p /www && echo hello-port > /www/index.html && "+
		"httpd -p %d -h /www && exec nc -ll -p %d -e echo hello-nc", httpPort, rawPort)}
	spec.Ports = []driver.PortSpec{
		{Name: "http", Port: httpPort, Protocol: "tcp"},
		{Name: "raw", Port: rawPort, Protocol: "tcp"},
	}
	in := sc.create(t, spec)
	got := sc.inspect(t, in.ID)
	for _, name := range []string{"http", "raw"} {
		if got.Endpoints[name] == "" {
			t.Fatalf("no endpoint for port %q: %v", name, got.Endpoints)
		}
	}
	url := "http://" + got.Endpoints["http"] + "/index.html"
	eventually(t, 30*time.Second, "GET "+url, func() error { return httpBodyIs(url, "hello-port\n") })
	raw := got.Endpoints["raw"]
	eventually(t, 30*time.Second, "nc via "+raw, func() error { return tcpReads(raw, "hello-nc\n") })

	// Listed instances carry the same endpoints.
	if l := sc.listIDs(t)[in.ID]; l.Endpoints["http"] != got.Endpoints["http"] {
		t.Errorf("listed endpoints %v, inspected %v", l.Endpoints, got.Endpoints)
	}
}

func httpBodyIs(url, want string) error {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || string(b) != want {
		return fmt.Errorf("status %d body %q, want 200 %q", resp.StatusCode, b, want)
	}
	return nil
}

// tcpReads connects and expects to read exactly want before EOF.
func tcpReads(addr, want string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil {
		return err
	}
	if string(b) != want {
		return fmt.Errorf("read %q, want %q", b, want)
	}
	return nil
}

func testLifetime(t *testing.T, s *suite) {
	sc := s.open(t)
	sc.requireCap(t, driver.CapLifetime)
	spec := sc.spec("life")
	spec.Lifetime = 2 * time.Second
	start := time.Now()
	in := sc.create(t, spec)
	if in.ExpiresAt.IsZero() {
		t.Error("ExpiresAt is zero for an instance with a lifetime")
	} else if d := in.ExpiresAt.Sub(start); d < time.Second || d > 30*time.Second {
		t.Errorf("ExpiresAt %s is %s after create, want about 2s", in.ExpiresAt, d)
	}
	got := sc.waitStatus(t, in.ID, 60*time.Second, driver.StatusExpired)
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("expired after %s, before its 2s lifetime", took)
	}
	if got.ExpiresAt.IsZero() {
		t.Error("expired instance lost ExpiresAt")
	}
	if l := sc.listIDs(t)[in.ID]; l.Status != driver.StatusExpired {
		t.Errorf("listed status %q, want %q", l.Status, driver.StatusExpired)
	}
}

func testLimits(t *testing.T, s *suite) {
	sc := s.open(t)
	info := sc.info(t)
	if !info.Has(driver.CapMemoryLimit) && !info.Has(driver.CapPidsLimit) {
		t.Skip("backend reports neither memory_limit nor pids_limit")
	}
	spec := sc.spec("limits")
	var want driver.Limits
	if info.Has(driver.CapMemoryLimit) {
		spec.MemoryBytes, want.MemoryBytes = 128<<20, 96<<20
	}
	if info.Has(driver.CapPidsLimit) {
		spec.PidsLimit, want.PidsLimit = 100, 64
	}
	if info.Has(driver.CapCPULimit) {
		spec.CPUs, want.CPUs = 1, 0.5
	}
	in := sc.create(t, spec)
	checkCgroup(t, sc, in.ID, spec.MemoryBytes, spec.PidsLimit)

	if err := sc.d.UpdateInstance(ctx(t), in.ID, want); err != nil {
		t.Fatalf("UpdateInstance(%+v): %v", want, err)
	}
	if st := sc.inspect(t, in.ID).Status; st != driver.StatusRunning {
		t.Fatalf("after update: status %q, want running (updated in place)", st)
	}
	checkCgroup(t, sc, in.ID, want.MemoryBytes, want.PidsLimit)
	// Same process: the instance was not recreated.
	sc.expectOutput(t, in.ID, "echo still-here", "still-here\n")
}

// checkCgroup reads the limits the instance sees (cgroup v2, then v1).
func checkCgroup(t *testing.T, sc *scope, id string, mem, pids int64) {
	t.Helper()
	if mem > 0 {
		got := sc.sh(t, id, "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes")
		if strings.TrimSpace(got) != strconv.FormatInt(mem, 10) {
			t.Errorf("memory limit seen inside: %q, want %d", strings.TrimSpace(got), mem)
		}
	}
	if pids > 0 {
		got := sc.sh(t, id, "cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max")
		if strings.TrimSpace(got) != strconv.FormatInt(pids, 10) {
			t.Errorf("pids limit seen inside: %q, want %d", strings.TrimSpace(got), pids)
		}
	}
}

func testDetachedExec(t *testing.T, s *suite) {
	sc := s.open(t)
	in := sc.create(t, sc.spec("detach"))
	// A unique directory: without isolation /tmp is the host's, shared by runs.
	dir := "/tmp/" + uniqueName("drivertest")
	logPath, ticks := dir+"/service.log", dir+"/ticks"
	sc.sh(t, in.ID, "mkdir -p "+dir)
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), OpTimeout)
		defer cancel()
		_, _ = sc.d.Exec(c, in.ID, driver.ExecSpec{Command: []string{"rm", "-rf", dir}})
	})
	start := time.Now()
	res := sc.exec(t, in.ID, driver.ExecSpec{
		Command: []string{"sh", "-c", "echo started; while :; do echo tick >> " + ticks + "; sleep 0.2; done"},
		Detach:  true,
		LogPath: logPath,
	})
	if res.ExitCode != 0 {
		t.Fatalf("detached exec: exit %d stderr %q", res.ExitCode, res.Stderr)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("detached exec took %s; it should return at once", took)
	}
	eventually(t, 15*time.Second, "service log", func() error {
		res := sc.exec(t, in.ID, driver.ExecSpec{Command: []string{"cat", logPath}})
		if !strings.Contains(string(res.Stdout), "started") {
			return fmt.Errorf("log %q (exit %d) lacks %q", res.Stdout, res.ExitCode, "started")
		}
		return nil
	})
	count := func() int {
		n, _ := strconv.Atoi(strings.TrimSpace(sc.sh(t, in.ID, "wc -l < "+ticks)))
		return n
	}
	first := count()
	time.Sleep(1500 * time.Millisecond)
	if second := count(); second <= first {
		t.Errorf("service stopped after the exec returned: %d ticks, then %d", first, second)
	}
}

func testConcurrentCreates(t *testing.T, s *suite) {
	sc := s.open(t)
	const n = 10
	specs := make([]driver.InstanceSpec, n)
	for i := range specs {
		specs[i] = sc.spec(fmt.Sprintf("conc%d", i))
	}
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range specs {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			in, err := sc.d.CreateInstance(ctx(t), specs[i])
			ids[i], errs[i] = in.ID, err
		}(i)
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("concurrent CreateInstance(%s): %v", specs[i].Name, err)
		}
	}
	list := sc.listIDs(t) // the scope teardown deletes them all
	for i, id := range ids {
		if errs[i] != nil {
			continue
		}
		if in, ok := list[id]; !ok || in.Status != driver.StatusRunning {
			t.Errorf("instance %s: listed=%v status %q, want listed and running", specs[i].Name, ok, in.Status)
		}
	}
	if len(list) != n {
		t.Errorf("ListInstances returns %d instances, want %d", len(list), n)
	}
}

// freeHostPort returns a TCP port nothing on this host listens on right now.
func freeHostPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	defer l.Close()
	addr, ok := l.Addr().(*net.TCPAddr)
	if !ok {
		t.Fatalf("find a free port: %s is not a TCP address", l.Addr())
	}
	return addr.Port
}
