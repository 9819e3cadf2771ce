package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

func TestFilesEverywhere(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	if !d.overlay {
		t.Skip("no overlayfs (rootless): the rootfs is read-only")
	}
	ctx := context.Background()
	spec := testSpec("files")
	spec.Running = false
	spec.Files = []driver.File{
		{Path: "/workspace/task.json", Content: []byte("{}")},
		{Path: "/srv/www/index.html", Content: []byte("ok"), Mode: 0o600},
		{Path: "/bin/hello", Content: []byte("#!/bin/sh\necho hello\n"), Mode: 0o755},
	}
	mustCreate(t, d, spec)
	if s := status(t, d, "files"); s != driver.StatusCreated {
		t.Fatalf("created stopped: status %s", s)
	}
	// Staged while stopped, written at start before the command runs.
	if err := d.CopyFiles(ctx, "files", []driver.File{{Path: "/etc/late.conf", Content: []byte("late")}}); err != nil {
		t.Fatal(err)
	}
	if err := d.StartInstance(ctx, "files"); err != nil {
		t.Fatal(err)
	}
	got := sh(t, d, "files", "cat /workspace/task.json /srv/www/index.html /etc/late.conf; stat -c %a /srv/www/index.html; hello")
	if got != "{}oklate600\nhello\n" {
		t.Errorf("files: %q", got)
	}
	// Written into the running sandbox.
	if err := d.CopyFiles(ctx, "files", []driver.File{{Path: "/tmp/live", Content: []byte("live")}}); err != nil {
		t.Fatal(err)
	}
	if got := sh(t, d, "files", "cat /tmp/live"); got != "live" {
		t.Errorf("live file: %q", got)
	}
	// The image is untouched: writes went to the instance's own layer.
	img, _ := d.InspectImage(ctx, testImage)
	if _, err := os.Stat(filepath.Join(d.imageRootfs(img.ID), "srv")); err == nil {
		t.Error("a file of the instance leaked into the image rootfs")
	}
	// A symlink pointing at the host's / cannot redirect a write out of the sandbox.
	sh(t, d, "files", "ln -s / /escape")
	if err := d.CopyFiles(ctx, "files", []driver.File{{Path: "/escape/tmp/local-escape-test", Content: []byte("x")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/tmp/local-escape-test"); err == nil {
		os.Remove("/tmp/local-escape-test")
		t.Fatal("a file written through a symlink escaped to the host")
	}
	if got := sh(t, d, "files", "cat /tmp/local-escape-test"); got != "x" {
		t.Errorf("file through in-sandbox symlink: %q", got)
	}
}

func TestVolumesReadOnly(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	ctx := context.Background()
	src := t.TempDir()
	writeTestFile(t, filepath.Join(src, "seed.txt"), "seed")
	if _, err := d.CreateVolume(ctx, driver.VolumeSpec{Name: "data", SourceDir: src}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateVolume(ctx, driver.VolumeSpec{Name: "out"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.CreateVolume(ctx, driver.VolumeSpec{Name: "out"}); !errors.Is(err, driver.ErrAlreadyExists) {
		t.Errorf("duplicate volume: %v", err)
	}
	spec := testSpec("vols")
	spec.Mounts = []driver.Mount{{Volume: "data", Target: "/data", ReadOnly: true}, {Volume: "out", Target: "/out"}}
	mustCreate(t, d, spec)
	if got := sh(t, d, "vols", "cat /data/seed.txt; echo result > /out/r.txt; touch /data/x 2>/dev/null || echo ro"); got != "seedro\n" {
		t.Errorf("volumes: %q", got)
	}
	b, err := os.ReadFile(filepath.Join(d.volumeData("out"), "r.txt"))
	if err != nil || string(b) != "result\n" {
		t.Errorf("volume content on the host: %q %v", b, err)
	}
	if err := d.DeleteVolume(ctx, "out"); err == nil {
		t.Error("deleting a mounted volume succeeded")
	}
}

func TestNetworkModes(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	ctx := context.Background()
	none := testSpec("netnone")
	none.Network = driver.NetworkNone
	mustCreate(t, d, none)
	if got := sh(t, d, "netnone", "ls /sys/class/net 2>/dev/null || cat /proc/net/dev | tail -n +3 | cut -d: -f1"); strings.TrimSpace(got) != "lo" {
		t.Errorf("network none has interfaces %q, want only lo", got)
	}
	iso := testSpec("netiso")
	iso.Network = driver.NetworkIsolated
	iso.Ports = []driver.PortSpec{{Name: "http", Port: 18080, Protocol: "tcp"}}
	if _, err := d.CreateInstance(ctx, iso); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("ports on an isolated network: %v, want ErrUnsupported", err)
	}
	port := freePort(t)
	br := testSpec("netbridge")
	br.Network = driver.NetworkBridge
	br.Ports = []driver.PortSpec{{Name: "http", Port: port, Protocol: "tcp"}}
	br.Files = []driver.File{{Path: "/www/index.html", Content: []byte("bridge-ok")}}
	br.Command = []string{"httpd", "-f", "-p", strconv.Itoa(port), "-h", "/www"}
	in := mustCreate(t, d, br)
	ep := in.Endpoints["http"]
	if ep != "127.0.0.1:"+strconv.Itoa(port) {
		t.Fatalf("endpoint %q", ep)
	}
	waitFor(t, 10*time.Second, "GET "+ep, func() bool { return httpGet(ep) == "bridge-ok" })
}

// TestServiceAndProbe: a service started by one exec is reached by a probe
// from another exec in an isolated network: every exec shares the
// sandbox's namespaces.
func TestServiceAndProbe(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	ctx := context.Background()
	spec := testSpec("svc")
	spec.Files = []driver.File{{Path: "/srv/index.html", Content: []byte("svc-ok")}}
	mustCreate(t, d, spec)
	probe := agent.ProbeCommand(agent.Probe{Kind: agent.ProbeHTTP, Port: 8080, Path: "/index.html"})
	if res, _ := d.Exec(ctx, "svc", driver.ExecSpec{Command: probe}); res.ExitCode == 0 {
		t.Fatal("probe ready before the service started")
	}
	res, err := d.Exec(ctx, "svc", driver.ExecSpec{Command: []string{"httpd", "-f", "-p", "8080", "-h", "/srv"}, Detach: true, LogPath: "/tmp/httpd.log"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("detach: %+v %v", res, err)
	}
	waitFor(t, 10*time.Second, "probe", func() bool {
		res, err := d.Exec(ctx, "svc", driver.ExecSpec{Command: probe})
		return err == nil && res.ExitCode == 0
	})
	pid := sh(t, d, "svc", "cat /tmp/httpd.log.pid")
	if got := sh(t, d, "svc", "wget -q -O - http://127.0.0.1:8080/index.html"); got != "svc-ok" {
		t.Errorf("wget from a third exec: %q (service pid %s)", got, pid)
	}
	// The host network does not see it.
	if c, err := net.DialTimeout("tcp", "127.0.0.1:8080", 200*time.Millisecond); err == nil {
		c.Close()
		t.Log("something else listens on the host's 8080; skipping the isolation check")
	}
}

func TestLifetimeExpires(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	spec := testSpec("expire")
	spec.Lifetime = time.Second
	in := mustCreate(t, d, spec)
	if in.ExpiresAt.IsZero() || in.Labels[driver.LabelExpiresAt] == "" {
		t.Fatalf("no expiry recorded: %+v", in)
	}
	waitFor(t, 20*time.Second, "expired", func() bool { return status(t, d, "expire") == driver.StatusExpired })
	if err := d.StartInstance(context.Background(), "expire"); err == nil {
		t.Error("starting an expired instance succeeded")
	}
}

func TestPidsLimitEnforced(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	info, _ := d.Info(context.Background())
	if !info.Has(driver.CapPidsLimit) {
		t.Skip("no pids controller on this host (Info does not claim pids_limit)")
	}
	spec := testSpec("pids")
	spec.PidsLimit = 32 // counts threads too: the Go agent has a handful
	spec.MemoryBytes = 64 << 20
	spec.CPUs = 0.5
	mustCreate(t, d, spec)
	// Start more sleepers than the limit allows: forks beyond it fail.
	res, err := d.Exec(context.Background(), "pids", driver.ExecSpec{Command: []string{"sh", "-c", "for i in $(seq 40); do sleep 30 & done; wait"}})
	if err != nil || res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "fork") {
		log, _ := os.ReadFile(filepath.Join(d.instanceDir("pids"), logFile))
		t.Errorf("40 forks under pids_limit 32: %+v %v; console %q", res, err, log)
	}
	st, _ := d.readState("pids")
	if n := len(cgroupPids(st.Cgroups)); n == 0 || n > 32 {
		t.Errorf("%d processes in the instance's cgroups under pids_limit 32", n)
	}
	want := map[string]string{"pids.max": "32", "memory.limit_in_bytes": strconv.Itoa(64 << 20), "cpu.cfs_quota_us": "50000"}
	for _, dir := range st.Cgroups {
		for file, v := range want {
			if b, err := os.ReadFile(filepath.Join(dir, file)); err == nil && strings.TrimSpace(string(b)) != v {
				t.Errorf("%s = %q, want %s", file, b, v)
			}
		}
	}
	if err := d.UpdateInstance(context.Background(), "pids", driver.Limits{PidsLimit: 64}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(d.cg.parent["pids"], d.instanceID("pids"), "pids.max")); strings.TrimSpace(string(b)) != "64" {
		t.Errorf("after update pids.max = %q", b)
	}
}

// TestPidsExhaustedAtStart: a fork bomb run the moment the sandbox is
// created, under the tightest pids limit allowed, cannot take its init down
// (init has all its threads before Create returns), and the sandbox stays
// manageable: exec works once the bomb is over, and Stop stops it. A limit
// too small for init itself is refused, naming the attribute.
func TestPidsExhaustedAtStart(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	info, _ := d.Info(context.Background())
	if !info.Has(driver.CapPidsLimit) {
		t.Skip("no pids controller on this host (Info does not claim pids_limit)")
	}
	ctx := context.Background()
	bomb := `end=$(( $(date +%s) + 2 )); while [ "$(date +%s)" -lt "$end" ]; do (sleep 0.3 &); done 2>/dev/null`
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("bomb-%d", i)
		spec := testSpec(name)
		spec.PidsLimit = minPidsLimit
		mustCreate(t, d, spec)
		st, _ := d.readState(name)
		if got := procComm(st.Pid); got != agent.ReadyName {
			t.Fatalf("Create returned before init was ready: comm %q", got)
		}
		bctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		_, _ = d.Exec(bctx, name, driver.ExecSpec{Command: []string{"sh", "-c", bomb}})
		cancel()
		if s := status(t, d, name); s != driver.StatusRunning {
			log, _ := os.ReadFile(filepath.Join(d.instanceDir(name), logFile))
			t.Fatalf("after the fork bomb the sandbox is %s; console:\n%s", s, log)
		}
		waitFor(t, 10*time.Second, "the bomb's processes to end", func() bool {
			res, err := d.Exec(ctx, name, driver.ExecSpec{Command: []string{"true"}})
			return err == nil && res.ExitCode == 0
		})
		if err := d.StopInstance(ctx, name, 5*time.Second); err != nil {
			t.Fatal(err)
		}
		// bwrap records the exit status once its child is gone; under load the
		// namespace's last processes can take seconds to die (seen in CI).
		waitFor(t, 30*time.Second, "the exit status", func() bool { _, ok := lastExit(d.instanceDir(name)); return ok })
		if code, ok := lastExit(d.instanceDir(name)); !ok || code != 128+int(syscall.SIGTERM) {
			log, _ := os.ReadFile(filepath.Join(d.instanceDir(name), logFile))
			t.Errorf("stopped sandbox exit %d (recorded %v), want %d (sleep ended by TERM); console:\n%s", code, ok, 128+int(syscall.SIGTERM), log)
		}
	}
	spec := testSpec("too-few")
	spec.PidsLimit = 4
	if _, err := d.CreateInstance(ctx, spec); err == nil || !strings.Contains(err.Error(), "pids_limit") {
		t.Errorf("pids_limit 4: %v, want an error naming pids_limit", err)
	}
}

// TestQuickExitIsNotAFailedStart: a command that ends at once (init gets
// ready, runs it and is gone between two looks of the start check) is a
// run that ended by itself, not a failed start. Repeated, since it is a
// race the check must always win.
func TestQuickExitIsNotAFailedStart(t *testing.T) {
	for _, iso := range []string{driver.IsolationBwrap, driver.IsolationNone} {
		d := openTest(t, iso)
		for i := range 20 {
			spec := testSpec(fmt.Sprintf("quick-%d", i))
			spec.Command = []string{"true"}
			if iso == driver.IsolationNone {
				spec.Image = "host"
			}
			mustCreate(t, d, spec)
			waitFor(t, 5*time.Second, "the exit status", func() bool {
				in, err := d.InspectInstance(context.Background(), spec.Name)
				return err == nil && in.Status == driver.StatusStopped && in.ExitCode != nil && *in.ExitCode == 0
			})
		}
	}
}

// TestFailedStartCleansUp: a start that fails (a file cannot be written)
// leaves no directory, process or cgroup behind.
func TestFailedStartCleansUp(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	spec := testSpec("broken")
	spec.Files = []driver.File{{Path: "/proc/sys/kernel/nope", Content: []byte("x")}}
	if _, err := d.CreateInstance(context.Background(), spec); err == nil {
		t.Fatal("create with an unwritable file succeeded")
	}
	if _, err := os.Stat(d.instanceDir("broken")); !os.IsNotExist(err) {
		t.Errorf("instance directory left behind: %v", err)
	}
	if d.cg != nil {
		for _, parent := range d.cg.parent {
			if _, err := os.Stat(filepath.Join(parent, d.instanceID("broken"))); !os.IsNotExist(err) {
				t.Errorf("cgroup left behind in %s", parent)
			}
		}
	}
	spec.Files = nil
	spec.Command = []string{"no-such-command"}
	if _, err := d.CreateInstance(context.Background(), spec); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("create with a missing command: %v", err)
	}
	if _, err := os.Stat(d.instanceDir("broken")); !os.IsNotExist(err) {
		t.Errorf("instance directory left behind: %v", err)
	}
	spec.Command = []string{"sleep", "60"}
	spec.Mounts = []driver.Mount{{Volume: "missing", Target: "/m"}}
	if _, err := d.CreateInstance(context.Background(), spec); !driver.IsNotFound(err) {
		t.Errorf("missing volume: %v, want ErrNotFound", err)
	}
}

// TestPidReuse: a recorded pid now used by an unrelated process is neither
// reported running nor signalled.
func TestPidReuse(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	ctx := context.Background()
	mustCreate(t, d, testSpec("reuse"))
	if err := d.StopInstance(ctx, "reuse", time.Second); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()
	st, err := d.readState("reuse")
	if err != nil {
		t.Fatal(err)
	}
	st.Pid = other.Process.Pid // as if the kernel had recycled the pid
	if err := d.writeState(st); err != nil {
		t.Fatal(err)
	}
	if s := status(t, d, "reuse"); s != driver.StatusStopped {
		t.Errorf("status with a recycled pid: %s", s)
	}
	if err := d.StopInstance(ctx, "reuse", 0); err != nil {
		t.Fatal(err)
	}
	if err := d.DeleteInstance(ctx, "reuse"); err != nil {
		t.Fatal(err)
	}
	if err := other.Process.Signal(syscall.Signal(0)); err != nil {
		t.Errorf("the unrelated process was killed: %v", err)
	}
}

func TestListInstances(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	mustCreate(t, d, testSpec("a"))
	b := testSpec("b")
	b.Running = false
	mustCreate(t, d, b)
	list, err := d.ListInstances(context.Background())
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if list[0].Name != "a" || list[0].Status != driver.StatusRunning || list[1].Status != driver.StatusCreated {
		t.Errorf("list: %+v", list)
	}
}

func TestUserSandbox(t *testing.T) {
	d := openTest(t, driver.IsolationBwrap)
	if os.Geteuid() != 0 {
		t.Skip("rootless: sandboxes run as the caller")
	}
	spec := testSpec("user")
	spec.User = "user"
	spec.Files = []driver.File{{Path: "/workspace/mine.txt", Content: []byte("x")}}
	mustCreate(t, d, spec)
	if got := sh(t, d, "user", "id -u; id -g; echo y >> mine.txt && touch new && stat -c %u new"); got != "1000\n1000\n1000\n" {
		t.Errorf("user sandbox: %q", got)
	}
	res, err := d.Exec(context.Background(), "user", driver.ExecSpec{Command: []string{"id", "-u"}, User: "0"})
	if err != nil || string(res.Stdout) != "0\n" {
		t.Errorf("exec as root: %+v %v", res, err)
	}
	// Execs are held like PID 1 (bwrap gave it no_new_privs and Docker's
	// capability set), as the instance user and as root.
	pid1 := sh(t, d, "user", "grep -E '^(CapPrm|NoNewPrivs):' /proc/1/status")
	if !strings.Contains(pid1, "NoNewPrivs:\t1") || !strings.Contains(pid1, "CapPrm:\t00000000a80425fb") {
		t.Errorf("PID 1: %q, want no_new_privs and Docker's default capabilities", pid1)
	}
	if got := sh(t, d, "user", "grep -E '^(CapPrm|CapEff|NoNewPrivs):' /proc/self/status"); got != "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\n" {
		t.Errorf("exec as the instance user: %q", got)
	}
	res, err = d.Exec(context.Background(), "user", driver.ExecSpec{Command: []string{"grep", "-E", "^(CapPrm|CapEff|CapBnd|NoNewPrivs):", "/proc/self/status"}, User: "0"})
	if want := "CapPrm:\t00000000a80425fb\nCapEff:\t00000000a80425fb\nCapBnd:\t00000000a80425fb\nNoNewPrivs:\t1\n"; err != nil || string(res.Stdout) != want {
		t.Errorf("exec as root: %q %v, want %q", res.Stdout, err, want)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// httpGet returns the body of GET http://addr/ or "".
func httpGet(addr string) string {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintf(c, "GET / HTTP/1.0\r\nHost: x\r\n\r\n")
	b, _ := io.ReadAll(c)
	_, body, _ := strings.Cut(string(b), "\r\n\r\n")
	return body
}
