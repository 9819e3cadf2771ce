// Package local is the daemonless backend (driver "local"), the provider's
// embedded default: sandboxes are directories and processes on this host,
// isolated with bubblewrap (isolation "bwrap") or not at all ("none").
//
// # Layout
//
// The engine is the file system, <root>/<backend>/:
//
//	images/<sha256 hex>/rootfs/     an extracted archive; the hex is the image ID
//	images/refs/<escaped name>.json a name -> ID reference (two names share a rootfs)
//	images/host/rootfs/             mount points for the "host" image
//	volumes/<name>/data/            a volume (volume.json holds its labels)
//	instances/<name>/state.json     spec, labels, user, cgroups, tracked pid, times
//	instances/<name>/workspace/     the writable working directory (bound at workdir)
//	instances/<name>/upper/         the instance's own rootfs layer (overlayfs upper)
//	instances/<name>/console.log    stdout and stderr of the command
//	instances/<name>/exit.json      the launcher's record of how the last run ended
//	instances/<name>/pending/       files waiting for the next start
//
// state.json is replaced atomically (temp file + rename) under an flock of
// instances/<name>/lock, so provider processes running at the same time do
// not corrupt it. ListInstances reads the state files and checks liveness in
// /proc: no process is started however many instances there are.
// Instance IDs are "<backend>.<name>.<hash of the backend directory>"
// (also the cgroup name); every call also accepts the bare name.
//
// # Images
//
// Only `archive` images exist: a plain rootfs tarball (gzip or not) or a
// `docker save` tarball, whose layers are flattened with their whiteouts.
// Extraction resolves every path with openat2(RESOLVE_IN_ROOT), so no entry
// (.., absolute names, symlinks to /) lands outside the rootfs. The image ID
// is "sha256:" + the sha256 of the archive. `pull` and `build` return
// ErrUnsupported: there is no registry client and no builder. The reference
// "host" (or "") is no rootfs at all: the host's /usr, /bin, /sbin, /lib*
// and /etc are bound read-only. Images belong to the engine, not to the
// scope: DeleteScope keeps the backend directory while images are named.
//
// # Isolation "bwrap"
//
// An instance's process tree is, from the outside in: a /bin/sh that moves
// itself into the instance's cgroups (so nothing escapes them), `unshare
// --mount` + a mount of the instance's overlay rootfs (lower: the image,
// upper: instances/<name>/upper) that exists only in that private mount
// namespace and vanishes with the sandbox, and bwrap with new PID, IPC, UTS
// and cgroup namespaces (and network, see below), --new-session, --as-pid-1,
// a clean environment, the workspace bound at workdir, volumes bound at
// their targets (ro or rw), a fresh /proc and /dev, the instance's own
// cgroups read-only under /sys/fs/cgroup, and the agent bound read-only at
// /.sandbox/sandbox-agent. PID 1 is `sandbox-agent init [--deadline]
// [--user] -- CMD`. The tree is started detached (setsid, stdin /dev/null,
// output to console.log) and outlives the provider process.
//
// bwrap reports its child's pid (--info-fd); the driver tracks that pid
// together with its start time from /proc/<pid>/stat, so a recycled pid is
// never taken for the sandbox nor signalled. bwrap writes the exit code to
// exit.json (--json-status-fd) when the sandbox ends, with no provider
// running: exit 124 from the agent means "expired". The lifetime is enforced
// by the agent's --deadline, also without the provider.
//
// Writable rootfs: the overlay gives every instance a private, writable
// root (like a container's writable layer) at the cost of one mount, never
// a copy. Without overlayfs (not root), the image's top-level entries are
// bound read-only on bwrap's tmpfs root and /tmp is a tmpfs; writes outside
// the workspace, volumes and /tmp then fail.
//
// Files: the sandbox is started with --block-fd: once bwrap has built it the
// driver writes the instance's files through /proc/<pid>/root (resolved in
// that root, so symlinks inside cannot reach the host) and only then lets
// the command run. Files land exactly where the sandbox sees the path (the
// workspace, a volume, the overlay), and are in place before the command
// starts. CopyFiles writes into a running sandbox the same way and stages
// files for the next start when it is stopped.
//
// Exec enters the namespaces of the sandbox's PID 1 with nsenter (mount,
// UTS, IPC, network, PID, root, working directory) after joining the
// instance's cgroups; `sandbox-agent exec` then gives the command what
// nsenter does not: PID 1's no_new_privs and capabilities (read from
// /proc/<pid>/status) and the user, so an exec is held like the command. Every exec therefore shares one network and PID
// namespace: a service started by one exec (Detach, through `sandbox-agent
// service`, pid in LogPath + ".pid") is reached by a probe from the next,
// also with network "none" or "isolated". Output and exit code are captured;
// cancelling the context kills the exec's process group.
//
// Users: `user` ("uid[:gid]" or names from the image's /etc/passwd and
// /etc/group; ids 0 to driver.MaxUserID) makes the agent start the command
// as that user (init stays root to signal and reap); execs default to it and
// may name another user (the agent's exec --user). There is no user
// namespace, as with Docker's default: the uid is the host's (bwrap 0.8
// maps a single id, and a mapped range would need id-mapped mounts of the
// image and the workspace). Root in the sandbox keeps Docker's default
// capability set; Security.CapAdd/CapDrop adjust it and Privileged keeps all.
// The workspace is owned by the instance user, and so are files the driver
// writes for it.
//
// Hardening (hardening.go): an unprivileged sandbox runs under the default
// seccomp filter of internal/seccomp (bwrap --seccomp for PID 1; the
// agent's exec --seccomp for execs, which nsenter would otherwise leave
// unfiltered), a privileged one under none, as on Docker. Every launch and
// exec starts from an anonymous session keyring of its own, not the
// provider's, and every exec in a session of its own, with no controlling
// terminal (no TIOCSTI into the provider's terminal). Instance directories
// are 0700: root in the sandbox can leave set-uid files and device nodes in
// the workspace or the upper layer; bwrap's binds are nosuid and nodev
// inside, and no other host user can reach their host paths.
//
// Network: "none" and "isolated" are both a private network namespace with
// only loopback ("isolated" cannot reach other sandboxes either: there is no
// bridge); "bridge" shares the host's network. Ports need "bridge" (the
// default when ports are set) and are reached at 127.0.0.1:<port>; a port
// already in use on the host fails the create.
//
// Limits use cgroups, when the provider runs as root: one cgroup per
// instance and controller (cgroup v1, below the provider's own cgroup) or
// one in <v2 root>/sandbox-local (cgroup v2, controllers delegated to it).
// pids_limit -> pids.max (it counts threads, the agent's included: at
// least 16; a start returns only once init has made all its threads and
// named itself agent.ReadyName, so nothing can use up the limit while the
// Go runtime of init may still need a thread), memory
// -> memory limit with no extra swap, cpus -> CFS quota. Info reports only
// the limits this host lets the driver enforce, and a limit that cannot be
// enforced fails the create with ErrUnsupported rather than being ignored.
// There is no disk limit. RLIMIT_NPROC is not used: it counts every process
// of the uid on the host, not the sandbox's.
//
// Stop sends SIGTERM to PID 1 (the agent forwards it), SIGKILL after the
// grace, then kills whatever is left in the cgroups. Delete kills at once and
// removes the cgroups and the directory. A failed create removes everything
// it made.
//
// Rootless (the provider not root): bwrap makes a user namespace in which
// the sandbox is root (the caller outside); exec enters it too. There is no
// overlayfs and no cgroups: the image's top-level entries are bound
// read-only on a tmpfs root (workspace, volumes and /tmp stay writable),
// Info reports no limits, and `user` is refused. bwrap always sets
// no_new_privs, so set-uid programs do not gain privileges in a sandbox.
//
// # Isolation "none"
//
// Plain processes, no namespaces: `sandbox-agent init` runs detached in the
// instance's workspace under a /bin/sh that records its exit code in
// exit.json. The workdir is the workspace's host path; files and volumes can
// only be placed under the workdir (volumes appear there as symlinks;
// read_only cannot be enforced). The image must be "host"; the network is
// the host's ("bridge"). Cgroups still apply when the provider is root. A
// non-root `user` needs <root> to be traversable (mode 0711) by that user;
// its instance directory lets the user's group traverse it (0710). The
// wrapper (root) writes where SBX_EXIT and SBX_CGROUPS say: its own values
// come after the user's env, and env names starting with
// driver.ReservedEnvPrefix are refused.
package local
