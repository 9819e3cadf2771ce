package acctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// DebianDockerImage is the Docker image of Debian bookworm with python3,
// python3-venv and gdb that scripts/fixtures.sh builds (debootstrap, cached
// under /var/cache/sandbox-fixtures, so only the first run takes minutes).
const DebianDockerImage = "sandbox-fixture/debian:bookworm"

var (
	debianOnce sync.Once
	debianErr  error
	debianOut  []byte
)

// DebianImage makes sure DebianDockerImage exists on the local Docker
// engine, running `scripts/fixtures.sh debian` once per test process (it
// returns at once when the cached image is current), and returns its name.
func DebianImage(t *testing.T) string {
	t.Helper()
	debianOnce.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			debianErr = err
			return
		}
		cmd := exec.Command(filepath.Join(root, "scripts", "fixtures.sh"), "debian")
		cmd.Env = os.Environ()
		debianOut, debianErr = cmd.CombinedOutput()
	})
	if debianErr != nil {
		t.Fatalf("building the Debian fixture (scripts/fixtures.sh debian): %v\n%s", debianErr, debianOut)
	}
	return DebianDockerImage
}
