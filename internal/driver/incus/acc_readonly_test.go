package incus_test

import (
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// A read-only root, for a system container and a command: it starts (the
// agent's bind-mount target was made before the first start), the root
// refuses writes, the agent's state directory is a writable tmpfs, and the
// lifetime watcher (which logs there) still stops the system container.
func TestReadOnlyRootfs(t *testing.T) {
	preCheck(t)
	d := scoped(t, nil)
	for name, cmd := range map[string][]string{"sys": nil, "cmd": {"sleep", "600"}} {
		t.Run(name, func(t *testing.T) {
			in, err := d.CreateInstance(testCtx(t), driver.InstanceSpec{
				Name: "ro-" + name, Image: fixtureImage, Running: true, Lifetime: 4 * time.Second,
				Command: cmd, Security: driver.Security{ReadOnlyRootfs: true},
			})
			if err != nil {
				t.Fatal(err)
			}
			res, err := d.Exec(testCtx(t), in.ID, driver.ExecSpec{Command: []string{"sh", "-c",
				"touch /x 2>/dev/null && echo root-rw || echo root-ro; touch /.sandbox/run/y && echo run-rw"}})
			if err != nil || string(res.Stdout) != "root-ro\nrun-rw\n" {
				t.Errorf("exec: %q %q %v", res.Stdout, res.Stderr, err)
			}
			waitStopped(t, d, in.ID, 25*time.Second)
		})
	}
}
