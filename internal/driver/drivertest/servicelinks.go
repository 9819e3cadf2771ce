package drivertest

import (
	"path"
	"strings"
	"testing"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/initplan"
)

// sandboxUser is the non-root user who plants the links.
const sandboxUser = "65534:65534"

// testServiceStateLinks is the attack of a non-root sandbox user on the
// agent's state directory (sticky world-writable on every backend that
// lets a user's service start): links planted where the agent, as root,
// writes a service's log and pid file, pointing at root's files. Those
// files must stay as they were.
func testServiceStateLinks(t *testing.T, s *suite) {
	sc := s.open(t)
	in := sc.create(t, sc.spec("links"))
	dir := "/tmp/" + uniqueName("victims")
	sc.sh(t, in.ID, "mkdir -p "+initplan.StateDir+" && chmod 1777 "+initplan.StateDir+
		" && mkdir -p "+dir+" && for f in log pid tmp; do echo original > "+dir+"/$f && chmod 600 "+dir+"/$f; done")
	victimsUntouched := func(how string) {
		t.Helper()
		for _, f := range []string{"log", "pid", "tmp"} {
			out := sc.sh(t, in.ID, "stat -c '%u:%g %a %h' "+dir+"/"+f+" && cat "+dir+"/"+f)
			if out != "0:0 600 1\noriginal\n" {
				t.Errorf("%s: %s/%s behind a planted link changed: %q", how, dir, f, out)
			}
		}
	}
	plant := func(links map[string]string) {
		t.Helper()
		var script []string
		for at, target := range links {
			script = append(script, "ln -s "+target+" "+at)
		}
		res := sc.exec(t, in.ID, driver.ExecSpec{Command: []string{"sh", "-c", strings.Join(script, " && ")}, User: sandboxUser})
		if res.ExitCode != 0 {
			t.Fatalf("user %s cannot plant links in %s: exit %d %s", sandboxUser, initplan.StateDir, res.ExitCode, res.Stderr)
		}
	}
	service := func(name string) initplan.Plan {
		plan, err := initplan.Expand(initplan.Input{Name: name, Service: &initplan.Service{
			Command: []string{"sh", "-c", "echo service-output; exec sleep 600"},
			User:    sandboxUser,
			Timeout: 30 * time.Second,
		}})
		if err != nil {
			t.Fatal(err)
		}
		return plan
	}

	logged := uniqueName("logged")
	plant(map[string]string{path.Join(initplan.StateDir, logged+".log"): dir + "/log"})
	// The agent's refusal names the symbolic link; Incus replaces the
	// stderr of an exit 127 with "Command not found", so only the failure
	// itself is required here (the agent's own test checks the words).
	if _, err := initplan.Run(ctx(t), sc.d, in.ID, service(logged)); err == nil {
		t.Errorf("a service whose log is a planted symlink started")
	}
	victimsUntouched("symlink at the log")
	logPath := path.Join(initplan.StateDir, logged+".log")
	sc.expectOutput(t, in.ID, "[ -L "+logPath+" ] && echo still-the-link", "still-the-link\n")

	pidded := uniqueName("pidded")
	pidFile := path.Join(initplan.StateDir, pidded+".pid")
	plant(map[string]string{pidFile: dir + "/pid", pidFile + ".tmp": dir + "/tmp"})
	if _, err := initplan.Run(ctx(t), sc.d, in.ID, service(pidded)); err != nil {
		t.Errorf("a service whose pid file is a planted symlink: %v, want it started with a pid file of its own", err)
	}
	victimsUntouched("symlink at the pid file")
	sc.expectOutput(t, in.ID, "[ -f "+pidFile+" ] && [ ! -L "+pidFile+" ] && kill $(cat "+pidFile+") && echo replaced", "replaced\n")
}
