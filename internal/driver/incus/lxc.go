package incus

// The raw.lxc of containers: the user's command as PID 1 (LXC's
// lxc.init.cmd replaces the image's init), the lifetime watcher's start hook
// of system containers, and the hardening of driver.Security, which Incus
// has no keys for.

import (
	"fmt"
	"strings"
	"time"

	"github.com/sandboxfleet/terraform-provider-sandbox/internal/agent"
	"github.com/sandboxfleet/terraform-provider-sandbox/internal/driver"
)

// rawLXC is the raw.lxc of a container: the hardening of spec.Security,
// with a command the command as PID 1, and without one but with a lifetime
// the start hook that arms its watcher. "" when there is nothing to set.
func rawLXC(s driver.InstanceSpec, deadline time.Time) (string, error) {
	sec := s.Security
	var lines []string
	if needsWatcher(s) {
		// The lifetime watcher powers the container off with reboot(2),
		// which needs CAP_SYS_BOOT; in a container it can only end the
		// container itself.
		sec.CapAdd = append(append([]string(nil), sec.CapAdd...), "SYS_BOOT")
		// LXC runs the hook in the container before every start of its
		// init, also one outside Terraform (incus restart, a host reboot):
		// the watcher is armed whoever starts it. Hook version 1 passes
		// LXC's details in the environment instead of appending arguments.
		lines = append(lines, "lxc.hook.version = 1", "lxc.hook.start = "+lifetimeHook)
	}
	lines = append(lines, securityLines(sec)...)
	if commandMode(s) {
		cmd, err := commandLines(s, deadline)
		if err != nil {
			return "", err
		}
		lines = append(cmd, lines...)
	}
	if len(lines) == 0 {
		return "", nil
	}
	return strings.Join(lines, "\n") + "\n", nil
}

// commandLines replace the image's init with the command, behind the agent
// init when agentInit (it forwards signals, reaps zombies, stops everything
// at the deadline and reads a command with spaces from its argv file).
// SIGTERM as the halt signal makes `incus stop` reach it.
func commandLines(s driver.InstanceSpec, deadline time.Time) ([]string, error) {
	argv := s.Command
	switch {
	case needsArgvFile(s.Command):
		argv = agent.InitArgvFileCommand(deadline, stopGrace, commandArgvFile)
	case agentInit(s):
		argv = agent.InitCommandGrace(deadline, stopGrace, argv)
	}
	lines := []string{
		"lxc.init.cmd = " + strings.Join(argv, " "),
		"lxc.signal.halt = SIGTERM",
	}
	// Like Docker, show the instance its own cgroups (read-only above its
	// own): Incus mounts them only for inits that lack CAP_SYS_ADMIN.
	lines = append(lines, "lxc.mount.auto = cgroup:mixed:force")
	// LXC gives init no PATH (a system init sets its own); the command needs one.
	if _, ok := s.Env["PATH"]; !ok {
		lines = append(lines, "lxc.environment = PATH="+defaultPath)
	}
	if s.Workdir != "" {
		if strings.ContainsAny(s.Workdir, " \t\n") {
			return nil, fmt.Errorf("workdir %q: must not contain whitespace with a command on Incus: %w", s.Workdir, driver.ErrUnsupported)
		}
		lines = append(lines, "lxc.init.cwd = "+s.Workdir)
	}
	if s.User != "" {
		uid, gid, err := parseUser(s.User)
		if err != nil {
			return nil, err
		}
		lines = append(lines, fmt.Sprintf("lxc.init.uid = %d", uid), fmt.Sprintf("lxc.init.gid = %d", gid))
	}
	return lines, nil
}

// securityLines apply the hardening to every container, system containers
// included (their init runs fine without the dropped capabilities).
func securityLines(sec driver.Security) []string {
	var lines []string
	if sec.NoNewPrivileges {
		lines = append(lines, "lxc.no_new_privs = 1")
	}
	if sec.ReadOnlyRootfs {
		// The agent's state directory stays writable (services, watcher).
		lines = append(lines, "lxc.rootfs.options = ro",
			"lxc.mount.entry = tmpfs "+strings.TrimPrefix(runDir, "/")+" tmpfs rw,nosuid,nodev,mode=0755 0 0")
	}
	return append(lines, capabilityLines(sec.CapAdd, sec.CapDrop)...)
}

// capabilityLines: drop ALL keeps only CapAdd (lxc.cap.keep); otherwise the
// dropped ones not re-added go (lxc.cap.drop). Adding a capability that was
// not dropped changes nothing: an unprivileged container holds all of them
// inside its user namespace.
func capabilityLines(add, drop []string) []string {
	added := map[string]bool{}
	var keep []string
	for _, c := range add {
		added[capName(c)] = true
		keep = append(keep, capName(c))
	}
	var dropped []string
	for _, c := range drop {
		if capName(c) == "all" {
			if len(keep) == 0 {
				keep = []string{"none"}
			}
			return []string{"lxc.cap.keep = " + strings.Join(keep, " ")}
		}
		if !added[capName(c)] {
			dropped = append(dropped, capName(c))
		}
	}
	if len(dropped) == 0 {
		return nil
	}
	return []string{"lxc.cap.drop = " + strings.Join(dropped, " ")}
}

// capName is LXC's spelling: NET_RAW or CAP_NET_RAW -> net_raw.
func capName(c string) string {
	return strings.ToLower(strings.TrimPrefix(strings.ToUpper(c), "CAP_"))
}

// commandArgvFile is where a command that lxc.init.cmd cannot carry is
// written for the agent init's --argv-file (see needsArgvFile).
const commandArgvFile = "/.sandbox/command.argv"

// needsArgvFile reports whether argv cannot go into lxc.init.cmd as it is:
// LXC splits that line at spaces, without quoting. The agent init then
// reads it from commandArgvFile, so no shell is needed in the image.
func needsArgvFile(argv []string) bool {
	for _, a := range argv {
		if a == "" || strings.ContainsAny(a, " \t\n") {
			return true
		}
	}
	return false
}

// lifetimeHook is the LXC start hook of a system container with a lifetime:
// a script that launches the watcher (watcherCommand) detached and returns.
// LXC checks that the hook is a file in the container, so the command and
// its deadline are written into it (prestart), not onto the hook line.
const lifetimeHook = "/.sandbox/lifetime-hook"

// lifetimeHookScript is that script for a deadline.
func lifetimeHookScript(deadline time.Time) []byte {
	return []byte("#!/bin/sh\n# Written by terraform-provider-sandbox: arms the lifetime watcher on every start.\nexec " +
		strings.Join(watcherCommand(deadline), " ") + "\n")
}

// needsWatcher reports whether the lifetime is kept by a detached
// `agent poweroff` rather than by the agent as PID 1: system containers
// (launched by their start hook) and VMs (by startWatcher), whose image's
// init stays PID 1.
func needsWatcher(s driver.InstanceSpec) bool {
	return s.Lifetime > 0 && !commandMode(s)
}
