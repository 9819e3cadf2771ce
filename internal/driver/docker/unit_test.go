package docker

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/initplan"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/tarball"
)

func TestStateDirMatchesInitplan(t *testing.T) {
	if stateDir != initplan.StateDir {
		t.Fatalf("stateDir %q, initplan.StateDir %q", stateDir, initplan.StateDir)
	}
}

func TestParseEndpoint(t *testing.T) {
	t.Setenv("DOCKER_HOST", "")
	cases := []struct {
		host, remote string
		local, bad   bool
	}{
		{host: "", local: true},
		{host: "unix:///run/x.sock", local: true},
		{host: "tcp://10.0.0.1:2376"},
		{host: "ssh://u@h", remote: "/var/run/docker.sock"},
		{host: "ssh://u@h:2222/run/user/1000/docker.sock", remote: "/run/user/1000/docker.sock"},
		{host: "http://h", bad: true},
		{host: "tcp://", bad: true},
	}
	for _, c := range cases {
		ep, err := parseEndpoint(&driver.DockerConfig{Host: c.host})
		if (err != nil) != c.bad {
			t.Errorf("%q: err %v", c.host, err)
			continue
		}
		if !c.bad && (ep.local != c.local || ep.remote != c.remote) {
			t.Errorf("%q: %+v", c.host, ep)
		}
	}
}

func TestAdvertiseHost(t *testing.T) {
	for host, want := range map[string]string{"unix:///x.sock": "127.0.0.1", "tcp://d.example:2376": "d.example", "ssh://u@gpu-1:22": "gpu-1"} {
		ep, err := parseEndpoint(&driver.DockerConfig{Host: host})
		if err != nil {
			t.Fatal(err)
		}
		if got := ep.advertiseHost(&driver.DockerConfig{}); got != want {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
		if got := ep.advertiseHost(&driver.DockerConfig{AdvertiseHost: "192.0.2.1"}); got != "192.0.2.1" {
			t.Errorf("override: %q", got)
		}
	}
}

func TestPlainTCPPolicy(t *testing.T) {
	for host, ok := range map[string]bool{"tcp://127.0.0.1:2375": true, "tcp://localhost:2375": true, "tcp://[::1]:2375": true, "tcp://192.0.2.1:2375": false} {
		ep, _ := parseEndpoint(&driver.DockerConfig{Host: host})
		_, err := tcpTLS(ep, &driver.DockerConfig{})
		if (err == nil) != ok {
			t.Errorf("%s: %v", host, err)
		}
		if _, err := tcpTLS(ep, &driver.DockerConfig{AllowInsecureTCP: true}); err != nil {
			t.Errorf("%s with allow_insecure_tcp: %v", host, err)
		}
	}
	ep, _ := parseEndpoint(&driver.DockerConfig{Host: "tcp://192.0.2.1:2376"})
	if _, err := tcpTLS(ep, &driver.DockerConfig{TLSCertFile: "c.pem", TLSKeyFile: "k.pem"}); err == nil {
		t.Error("TLS without a CA accepted")
	}
}

func TestTCPAddrDefaultPort(t *testing.T) {
	u, _ := url.Parse("tcp://h")
	if got := tcpAddr(u, true); got != "h:2376" {
		t.Error(got)
	}
	if got := tcpAddr(u, false); got != "h:2375" {
		t.Error(got)
	}
	u, _ = url.Parse("tcp://h:1234")
	if got := tcpAddr(u, true); got != "h:1234" {
		t.Error(got)
	}
}

func TestStatus(t *testing.T) {
	past, future := time.Now().Add(-time.Second), time.Now().Add(time.Hour)
	cases := []struct {
		state   string
		code    int
		expires time.Time
		want    string
	}{
		{"running", 0, past, driver.StatusRunning},
		{"created", 0, time.Time{}, driver.StatusCreated},
		{"exited", 0, time.Time{}, driver.StatusStopped},
		{"exited", 124, past, driver.StatusExpired},
		{"exited", 124, future, driver.StatusStopped},
		{"exited", 124, time.Time{}, driver.StatusStopped},
		{"exited", 137, past, driver.StatusStopped},
		{"weird", 0, time.Time{}, driver.StatusUnknown},
	}
	for _, c := range cases {
		if got := status(c.state, c.code, c.expires); got != c.want {
			t.Errorf("%s/%d: %s, want %s", c.state, c.code, got, c.want)
		}
	}
}

func TestExitCodeFromStatus(t *testing.T) {
	for s, want := range map[string]int{"Exited (124) 3 seconds ago": 124, "Exited (0) About a minute ago": 0, "Up 2 minutes": 0, "Created": 0} {
		if got := exitCodeFromStatus(s); got != want {
			t.Errorf("%q: %d", s, got)
		}
	}
}

func tarNames(t *testing.T, r io.Reader) []string {
	t.Helper()
	var names []string
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
	}
	sort.Strings(names)
	return names
}

func TestTarDirHonoursDockerignore(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"Dockerfile": "x", ".dockerignore": "*.log\nnode_modules\nDockerfile\nkeep/**\n!keep/yes.txt\n",
		"a.txt": "a", "b.log": "b", "node_modules/m.js": "m", "keep/no.txt": "n", "keep/yes.txt": "y",
	} {
		p := filepath.Join(dir, name)
		_ = os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pm, err := tarball.ReadDockerignore(dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tarball.WriteDir(&buf, dir, pm, map[string]bool{"Dockerfile": true, ".dockerignore": true}); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(tarNames(t, &buf), " ")
	if want := ".dockerignore Dockerfile a.txt keep/ keep/yes.txt"; got != want {
		t.Errorf("tar has %q, want %q", got, want)
	}
}

func TestTarInstanceFiles(t *testing.T) {
	if _, err := tarInstanceFiles([]driver.File{{Path: "relative/x"}}); err == nil {
		t.Error("relative path accepted")
	}
	buf, err := tarInstanceFiles([]driver.File{{Path: "/a/b/c.sh", Content: []byte("x"), Mode: 0o750}, {Path: "/d", Content: nil}})
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(buf)
	modes := map[string]int64{}
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		modes[h.Name] = h.Mode
	}
	if modes["a/b/c.sh"] != 0o750 || modes["d"] != 0o644 || len(modes) != 2 {
		t.Errorf("modes %v", modes)
	}
}

func TestReadBuildStream(t *testing.T) {
	ok := `{"stream":"Step 1/2\n"}{"aux":{"ID":"sha256:abc"}}`
	if id, err := readBuildStream(strings.NewReader(ok)); err != nil || id != "sha256:abc" {
		t.Errorf("%q %v", id, err)
	}
	bad := `{"stream":"compiling\n"}{"stream":"oops: detail\n"}{"errorDetail":{"message":"step failed"},"error":"step failed"}`
	_, err := readBuildStream(strings.NewReader(bad))
	if err == nil || !strings.Contains(err.Error(), "step failed") || !strings.Contains(err.Error(), "oops: detail") {
		t.Errorf("err = %v", err)
	}
}

func TestOpenRejectsUnknownPortStrategy(t *testing.T) {
	_, err := Open(t.Context(), driver.Config{Name: "b", Docker: &driver.DockerConfig{Host: "unix:///x", PortStrategy: "random"}})
	if !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("err = %v", err)
	}
}

func TestLoopbackIPRefusedOnRemoteEngine(t *testing.T) {
	dr, err := Open(t.Context(), driver.Config{Name: "b", Docker: &driver.DockerConfig{Host: "ssh://u@gpu-1", PortStrategy: driver.PortStrategyLoopbackIP}})
	if err != nil {
		t.Fatal(err)
	}
	d := dr.(*Driver)
	p := &createPlan{cfg: &container.Config{Labels: map[string]string{}}, host: &container.HostConfig{}}
	err = d.planPorts(t.Context(), p, driver.InstanceSpec{Name: "x", Ports: []driver.PortSpec{{Name: "http", Port: 80}}})
	if !errors.Is(err, driver.ErrUnsupported) {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
}

func TestCommandOfStripsTheAgent(t *testing.T) {
	cases := []struct {
		ep, cmd, want []string
	}{
		{[]string{agent.PathInInstance, "init", "--deadline", "x", "--", "sleep", "1"}, nil, []string{"sleep", "1"}},
		{[]string{agent.PathInInstance, "init"}, nil, nil},
		{[]string{"/bin/sh", "-c"}, []string{"echo"}, []string{"/bin/sh", "-c", "echo"}},
	}
	for _, c := range cases {
		if got := commandOf(c.ep, c.cmd); !slices.Equal(got, c.want) {
			t.Errorf("commandOf(%q, %q) = %q, want %q", c.ep, c.cmd, got, c.want)
		}
	}
	if !withAgent([]string{agent.PathInInstance, "init", "--", "x"}) || withAgent([]string{"sleep"}) {
		t.Error("withAgent")
	}
}

func TestPortsFromLabelForImport(t *testing.T) {
	got := portsFromLabel("http=8080/tcp,dns=53/udp,bad=x/tcp")
	want := []driver.PortSpec{{Name: "http", Port: 8080, Protocol: "tcp"}, {Name: "dns", Port: 53, Protocol: "udp"}}
	if !slices.Equal(got, want) {
		t.Errorf("got %v", got)
	}
}

func TestPodmanInterfaceRace(t *testing.T) {
	race := errors.New(`Error response from daemon: route ip+net: no such network interface`)
	if !podmanInterfaceRace(race) || podmanInterfaceRace(nil) || podmanInterfaceRace(errors.New("network already exists")) {
		t.Error("podmanInterfaceRace does not tell Podman's vanished-interface answer from others")
	}
}
