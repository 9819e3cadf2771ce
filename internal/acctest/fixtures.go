package acctest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/testgate"
)

// Fixtures are built from local files only: busybox-static for images and
// rootfs tarballs, and the agent from this module's source.

// busyboxPaths are where Debian's busybox-static installs the binary.
var busyboxPaths = []string{"/bin/busybox", "/usr/bin/busybox"}

// Busybox returns the path of a statically linked busybox, or fails.
func Busybox(t *testing.T) string {
	t.Helper()
	for _, p := range busyboxPaths {
		if isStatic(p) {
			return p
		}
	}
	t.Fatalf("no statically linked busybox in %v: run `apt-get install -y busybox-static`", busyboxPaths)
	return ""
}

// isStatic reports whether p is an ELF executable without an interpreter.
func isStatic(p string) bool {
	f, err := elf.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}

// BusyboxDockerfile builds an image of busybox alone, FROM scratch.
const BusyboxDockerfile = `FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
CMD ["/bin/sh"]
`

// BusyboxContext returns a temporary build context: busybox and a
// Dockerfile FROM scratch. It is removed when the test ends.
func BusyboxContext(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	copyFile(t, Busybox(t), filepath.Join(dir, "busybox"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(BusyboxDockerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// BusyboxRootfsTarball returns a temporary .tar.gz of a busybox rootfs:
// bin/busybox with every applet as a symlink, sbin/init, etc/passwd, tmp/.
// It is what local (and, with metadata, incus) archives expect.
func BusyboxRootfsTarball(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "busybox-rootfs.tar.gz")
	WriteBusyboxRootfsTarball(t, p, nil)
	return p
}

// WriteBusyboxRootfsTarball writes the busybox rootfs tarball to p, plus
// extra regular files (path in the rootfs -> content), e.g. to change it.
func WriteBusyboxRootfsTarball(t *testing.T, p string, extra map[string]string) {
	t.Helper()
	bb := Busybox(t)
	applets, err := exec.Command(bb, "--list").Output()
	if err != nil {
		t.Fatalf("%s --list: %v", bb, err)
	}
	content, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	add := func(h *tar.Header, data []byte) {
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"bin/", "sbin/", "etc/", "tmp/", "root/", "proc/", "dev/", "sys/"} {
		mode := int64(0o755)
		if d == "tmp/" {
			mode = 0o1777
		}
		add(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: mode}, nil)
	}
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(content))}, content)
	for _, a := range strings.Fields(string(applets)) {
		if a != "busybox" {
			add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777}, nil)
		}
	}
	add(&tar.Header{Typeflag: tar.TypeSymlink, Name: "sbin/init", Linkname: "../bin/busybox", Mode: 0o777}, nil)
	passwd := []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")
	add(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644, Size: int64(len(passwd))}, passwd)
	for _, name := range sortedKeys(extra) {
		add(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(extra[name]))}, []byte(extra[name]))
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// EnvAgentBinary names the agent binary for drivers (see internal/agent).
const EnvAgentBinary = "SANDBOX_AGENT_BINARY"

var (
	agentOnce sync.Once
	agentPath string
	agentErr  error
)

// AgentBinary builds ./cmd/sandbox-agent once per test process (static,
// CGO_ENABLED=0), sets SANDBOX_AGENT_BINARY for the in-process provider, and
// returns its path. The binary lives at one fixed path under the temporary
// directory, replaced atomically by each build, so test runs (also killed
// ones) leave at most that one file behind.
func AgentBinary(t *testing.T) string {
	t.Helper()
	path, err := BuildAgent()
	if err != nil {
		t.Fatalf("building the sandbox agent: %v", err)
	}
	return path
}

// BuildAgent is AgentBinary for a TestMain: it builds the agent once per
// test process and points SANDBOX_AGENT_BINARY at it, so no instance of the
// package's tests ever gets the test binary itself as its agent.
func BuildAgent() (string, error) {
	agentOnce.Do(func() { agentPath, agentErr = buildAgent() })
	return agentPath, agentErr
}

// MainWithAgent runs a package's tests with SANDBOX_AGENT_BINARY set to a
// fresh agent build whenever acceptance tests may run (TF_ACC or a gate is
// set); a failed build fails the run before any test starts.
//
//	func TestMain(m *testing.M) { os.Exit(acctest.MainWithAgent(m)) }
func MainWithAgent(m *testing.M) int {
	acc := os.Getenv("TF_ACC") != ""
	for _, g := range []string{GateDocker, GateLocal, GateIncus, GateSSH, GateTLS} {
		acc = acc || testgate.Enabled(g)
	}
	if acc {
		if _, err := BuildAgent(); err != nil {
			fmt.Fprintf(os.Stderr, "building the sandbox agent (./cmd/sandbox-agent) for the acceptance tests: %v\n", err)
			return 1
		}
	}
	return m.Run()
}

func buildAgent() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(os.TempDir(), "tf-acc-sandbox-agent")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".build-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.Command("go", "build", "-trimpath", "-o", tmp.Name(), "./cmd/sandbox-agent")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/sandbox-agent: %v\n%s", err, out)
	}
	final := filepath.Join(dir, "sandbox-agent")
	if err := os.Rename(tmp.Name(), final); err != nil {
		return "", err
	}
	return final, os.Setenv(EnvAgentBinary, final)
}

// moduleRoot finds the directory of go.mod above the working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
