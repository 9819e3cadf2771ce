package driver

import (
	"fmt"
	"strings"
)

// StaticCapabilities is what a driver can do by construction, known from its
// name and config alone, before the backend exists or answers. The provider
// checks plans against it (so "this backend cannot run VMs" is a plan error
// on the very first plan); sandbox_backend.capabilities may report more once
// the engine is asked. Keep this table additive.
func StaticCapabilities(driverName string, cfg Config) []string {
	common := []string{CapContainers, CapExec, CapFiles, CapLifetime}
	switch driverName {
	case Docker:
		caps := append(common, CapBuild, CapPull, CapArchive, CapVolumes,
			CapNetworkNone, CapNetworkIso, CapNetworkBrdg,
			CapCPULimit, CapMemoryLimit, CapPidsLimit, CapDynamicPort, CapLoopbackPort,
			// Disk quotas depend on the daemon's storage driver (overlay2 on
			// xfs with pquota): allowed here, checked by the driver at create.
			CapDiskLimit)
		// Docker does not publish the ports of containers on an internal network.
		if cfg.Docker == nil || !cfg.Docker.Internal {
			caps = append(caps, CapPorts)
		}
		return caps
	case Incus:
		return append(common, CapVMs, CapArchive, CapPull, CapVolumes, CapPorts,
			CapNetworkNone, CapNetworkIso, CapNetworkBrdg,
			CapCPULimit, CapMemoryLimit, CapPidsLimit, CapDiskLimit, CapDynamicPort, CapLoopbackPort)
	case Kubernetes:
		return append(common, CapPull, CapPorts, CapNetworkIso,
			CapCPULimit, CapMemoryLimit, CapDiskLimit)
	case Local:
		// Limits use cgroups when the host delegates them: allowed here,
		// checked by the driver at create.
		caps := append(common, CapArchive, CapVolumes, CapPorts, CapNetworkBrdg,
			CapCPULimit, CapMemoryLimit, CapPidsLimit)
		// Without bwrap there are no namespaces: the host's network is shared.
		if cfg.Local == nil || cfg.Local.Isolation != IsolationNone {
			caps = append(caps, CapNetworkNone, CapNetworkIso)
		}
		return caps
	}
	return nil
}

// Problem is one thing an instance asks of a backend that it cannot do,
// attached to the attribute that asks for it.
type Problem struct {
	Attribute string // top-level attribute name, e.g. "ports"
	Summary   string
	Detail    string
	Warning   bool // a warning does not stop the plan
}

// CheckInstance compares an instance spec with the static capabilities of
// its backend. Only what the spec sets is checked; unknown values should be
// left zero by the caller.
func CheckInstance(cfg Config, spec InstanceSpec) []Problem {
	caps := Info{Capabilities: StaticCapabilities(cfg.Driver, cfg)}
	if caps.Capabilities == nil {
		return nil // unknown driver: Open reports it
	}
	var out []Problem
	add := func(attr, sum, format string, a ...any) {
		out = append(out, Problem{Attribute: attr, Summary: sum, Detail: fmt.Sprintf(format, a...)})
	}
	who := fmt.Sprintf("The %s backend %q", cfg.Driver, cfg.Name)
	if spec.Type == TypeVM && !caps.Has(CapVMs) {
		add("type", "Virtual Machines Not Supported", "%s runs containers only; `type = \"vm\"` needs an incus backend. Use `type = \"container\"` or another backend.", who)
	}
	if spec.Network != "" && !caps.Has(networkCap[spec.Network]) {
		add("network", "Network Mode Not Supported", "%s cannot provide `network = %q`.%s", who, spec.Network, networkHint(cfg))
	}
	if len(spec.Ports) > 0 {
		if msg := portsProblem(cfg, caps, spec.Network); msg != "" {
			add("ports", "Ports Cannot Be Published", "%s cannot publish ports here: %s", who, msg)
		}
	}
	limits := []struct {
		attr, cap string
		set       bool
	}{
		{"cpus", CapCPULimit, spec.CPUs != 0},
		{"memory", CapMemoryLimit, spec.MemoryBytes != 0},
		{"pids_limit", CapPidsLimit, spec.PidsLimit > 0},
		{"disk", CapDiskLimit, spec.DiskBytes != 0},
	}
	for _, l := range limits {
		if l.set && !caps.Has(l.cap) {
			add(l.attr, "Limit Not Supported", "%s cannot enforce `%s`. Remove it, or use a backend that supports it.", who, l.attr)
		}
	}
	if len(spec.Mounts) > 0 && !caps.Has(CapVolumes) {
		add("volumes", "Volumes Not Supported", "%s cannot attach volumes.", who)
	}
	if cfg.Driver == Incus {
		out = append(out, incusProblems(who, spec)...)
	}
	if cfg.Driver == Local && cfg.Local != nil && cfg.Local.Isolation == IsolationNone {
		out = append(out, Problem{Attribute: "backend", Warning: true, Summary: "Sandbox Is Not Isolated",
			Detail: who + " has `isolation = \"none\"`: the sandbox runs as plain processes of the provider's user, " +
				"with the host's file system and network. Do not run untrusted code on it; use `isolation = \"bwrap\"`."})
	}
	return out
}

var networkCap = map[string]string{NetworkNone: CapNetworkNone, NetworkIsolated: CapNetworkIso, NetworkBridge: CapNetworkBrdg}

func networkHint(cfg Config) string {
	if cfg.Driver == Local {
		return " Without bwrap isolation the sandbox shares the host's network: use `network = \"bridge\"`."
	}
	return ""
}

// portsProblem says why ports cannot be published, or "".
func portsProblem(cfg Config, caps Info, network string) string {
	switch {
	case network == NetworkNone:
		return "`network = \"none\"` has no network to publish on; use \"isolated\" or \"bridge\""
	case cfg.Driver == Docker && cfg.Docker != nil && cfg.Docker.Internal:
		return "the backend has `internal = true` and Docker does not publish ports of containers on internal networks"
	case cfg.Driver == Local && network != "" && network != NetworkBridge: // "": not known yet
		return "a local sandbox's ports are reached only when it shares the host network; use `network = \"bridge\"`"
	case !caps.Has(CapPorts):
		return "this backend does not publish ports"
	}
	return ""
}

// incusProblems are the attributes Incus cannot map, with the reason. What
// the server itself lacks (VM support) is checked against its reported
// capabilities by the provider when the server answers at plan time, and by
// the driver at apply.
func incusProblems(who string, spec InstanceSpec) []Problem {
	var out []Problem
	add := func(attr, sum, detail string) {
		out = append(out, Problem{Attribute: attr, Summary: sum, Detail: who + " " + detail})
	}
	if spec.Type == TypeVM {
		if len(spec.Command) > 0 {
			add("command", "Command Not Supported on Virtual Machines",
				"cannot run `command` in a virtual machine: a VM boots its image's own init, which cannot be replaced. "+
					"Remove `command` and start the program with a sandbox_initializer `service`, or use `type = \"container\"`.")
		}
		if spec.PidsLimit > 0 {
			add("pids_limit", "Limit Not Supported on Virtual Machines",
				"cannot enforce `pids_limit` in a virtual machine: Incus has no process limit for VMs (limits.processes applies to containers). Remove it, or use `type = \"container\"`.")
		}
		if spec.Security.ReadOnlyRootfs {
			add("security", "Read-Only Root File System Not Supported on Virtual Machines",
				"cannot make a virtual machine's root disk read-only (`security.read_only_rootfs`): the guest mounts its own disk. Set it to false, or use `type = \"container\"`.")
		}
	}
	if spec.User != "" && !numericUser(spec.User) {
		add("user", "User Must Be Numeric on Incus",
			fmt.Sprintf("cannot run as `user = %q`: Incus takes a numeric uid or uid:gid (the provider cannot look names up in the image). Use e.g. \"1000:1000\".", spec.User))
	}
	return out
}

// numericUser reports whether u is "uid" or "uid:gid" in decimal.
func numericUser(u string) bool {
	uid, gid, hasGroup := strings.Cut(u, ":")
	return isDigits(uid) && (!hasGroup || isDigits(gid))
}

func isDigits(s string) bool {
	if s == "" || len(s) > 10 {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
