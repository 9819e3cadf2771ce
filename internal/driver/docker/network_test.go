package docker_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// serveOK runs busybox httpd on port 8080, answering "ok".
var serveOK = []string{"sh", "-c", "mkdir -p /tmp/www && echo ok >/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"}

// A sandbox on its backend's network (network = "isolated", the default)
// reaches the backend's other sandboxes (and finds them by name), and neither a sandbox of
// another backend (by address or name) nor one on the engine's default
// bridge, though both answer from the host.
func TestIsolatedNetworkKeepsBackendsApart(t *testing.T) {
	ours, theirs := openBackend(t, driver.DockerConfig{}), openBackend(t, driver.DockerConfig{})
	create := func(d driver.Driver, name, network string, cmd []string) driver.Instance {
		t.Helper()
		inst, err := d.CreateInstance(ctxT(t), driver.InstanceSpec{Name: name, Image: fixture.image, Command: cmd, Network: network, Running: true})
		if err != nil {
			t.Fatal(err)
		}
		if inst.IPAddress == "" {
			t.Fatalf("%s has no address: %+v", name, inst)
		}
		return inst
	}
	client := create(ours, "client", "", []string{"sleep", "600"})
	sibling := create(ours, "sibling", driver.NetworkIsolated, serveOK)
	other := create(theirs, "other", driver.NetworkIsolated, serveOK)
	bridged := create(theirs, "bridged", driver.NetworkBridge, serveOK)

	// Every server answers (from the host), so a failed probe below is the
	// network's doing, not a server that is not up yet.
	for _, srv := range []driver.Instance{sibling, other, bridged} {
		waitFor(t, 30*time.Second, "httpd of "+srv.Name+" at "+srv.IPAddress, func() (bool, string) {
			return answersOK(srv.IPAddress)
		})
	}
	run := func(cmd ...string) driver.ExecResult {
		res, err := ours.Exec(ctxT(t), client.ID, driver.ExecSpec{Command: cmd})
		if err != nil {
			t.Fatalf("exec %v: %v", cmd, err)
		}
		return res
	}
	// busybox nc by address: the static busybox's wget crashes without the
	// glibc NSS modules the image lacks; its nslookup has its own resolver.
	get := func(ip string) (ok bool, out string) {
		res := run("sh", "-c", `printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 3 "$0" 8080`, ip)
		out = string(res.Stdout) + string(res.Stderr)
		return res.ExitCode == 0 && strings.Contains(out, "200 OK"), out
	}
	if res := run("nslookup", "sibling"); res.ExitCode != 0 || !strings.Contains(string(res.Stdout), sibling.IPAddress) {
		t.Errorf("the backend's other sandbox has no name on its network: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if ok, out := get(sibling.IPAddress); !ok {
		t.Fatalf("a sandbox cannot reach its backend's other sandbox: %q", out)
	}
	for _, srv := range []driver.Instance{other, bridged} {
		if ok, out := get(srv.IPAddress); ok {
			t.Errorf("a sandbox reached %s (%s) outside its backend's network: %q", srv.Name, srv.IPAddress, out)
		}
	}
	if res := run("nslookup", "other"); strings.Contains(string(res.Stdout), other.IPAddress) {
		t.Errorf("another backend's sandbox has a name on this backend's network: %q", res.Stdout)
	}
}

func answersOK(ip string) (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ip+":8080/", nil)
	if err != nil {
		return false, err.Error()
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false, err.Error()
	}
	defer resp.Body.Close()
	body := readAll(resp.Body)
	return resp.StatusCode == http.StatusOK && body == "ok\n", resp.Status + " " + body
}
