package acctest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// SweepOnCleanup registers a last-resort sweep of everything the backend
// holds on its engine, run when the test ends, after Terraform's own destroy.
// Normally it finds nothing; when a step or the destroy failed it removes
// what was left (and logs it), so a failing test does not leak containers,
// volumes, images or scopes. It uses the engines' CLIs.
func SweepOnCleanup(t *testing.T, cfg driver.Config) {
	t.Helper()
	t.Cleanup(func() { sweep(t, cfg) })
}

func sweep(t *testing.T, cfg driver.Config) {
	if ok, _ := ScopeExists(cfg); !ok && cfg.Driver != driver.Docker {
		return // incus and local keep everything inside the scope
	}
	switch cfg.Driver {
	case driver.Docker:
		label := "label=" + driver.LabelBackend + "=" + cfg.Name
		docker := func(args ...string) []string { return append(append([]string{"docker"}, dockerCLI(cfg)...), args...) }
		remove(t, fields(docker("ps", "-aq", "--filter", label)...), docker("rm", "-f")...)
		remove(t, fields(docker("volume", "ls", "-q", "--filter", label)...), docker("volume", "rm", "-f")...)
		remove(t, fields(docker("images", "-q", "--filter", label)...), docker("rmi", "-f")...)
		if ok, _ := ScopeExists(cfg); ok {
			remove(t, []string{"sandbox-" + cfg.Name}, docker("network", "rm")...)
		}
	case driver.Incus:
		p := "--project=" + cfg.Incus.Project
		remove(t, fields("incus", "list", p, "-c", "n", "-f", "csv"), "incus", "delete", "--force", p)
		remove(t, fields("incus", "image", "list", p, "-c", "f", "-f", "csv"), "incus", "image", "delete", p)
		for _, v := range fields("incus", "storage", "volume", "list", "default", p, "-c", "tn", "-f", "csv") {
			if name, ok := strings.CutPrefix(v, "custom,"); ok {
				remove(t, []string{name}, "incus", "storage", "volume", "delete", "default", p)
			}
		}
		remove(t, []string{cfg.Incus.Project}, "incus", "project", "delete")
	case driver.Local:
		dir := filepath.Join(cfg.Local.Root, cfg.Name)
		t.Logf("sweep: removing %s, left behind", dir)
		_ = os.RemoveAll(dir)
	}
}

// fields runs a listing command (argv) and returns the words of its output.
func fields(argv ...string) []string {
	out, _ := exec.Command(argv[0], argv[1:]...).Output()
	return strings.Fields(string(out))
}

// remove runs cmd with the objects appended, if there are any.
func remove(t *testing.T, objects []string, cmd ...string) {
	if len(objects) == 0 {
		return
	}
	args := append(cmd[1:], objects...)
	out, err := exec.Command(cmd[0], args...).CombinedOutput()
	t.Logf("sweep: %s %s (left behind): %v %s", cmd[0], strings.Join(args, " "), err, strings.TrimSpace(string(out)))
}
