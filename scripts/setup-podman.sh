#!/usr/bin/env bash
# Starts Podman's Docker-compatible API for the Podman tests, as root, without
# systemd: `podman system service` on unix:///run/sandbox-podman/podman.sock.
# Idempotent: a service that already answers is reused; the package, the
# configuration and the busybox image are only made when missing.
#
# Podman keeps to itself next to the running dockerd:
#   - storage /var/lib/containers (dockerd: /var/lib/docker), its own conmon
#     and runc processes, no containerd;
#   - netavark networks on 10.88.0.0/16 (the default "podman" network) and
#     new networks from 10.90.0.0/16 in /24s (SANDBOX_PODMAN_SUBNET_POOL),
#     away from dockerd's 172.17.0.0/12 and 192.168.0.0/16 pools, the TLS
#     dockerd's 10.213.0.0/16 and incusbr0's 10.123.45.0/24. netavark adds
#     its own NETAVARK_* iptables chains (iptables-nft, like dockerd's) and
#     accepts its subnets in FORWARD, where dockerd has set the policy to DROP;
#     dockerd's chains and rules are never touched;
#   - cgroupfs and a file events log: there is no systemd or journald.
# The settings live in /etc/containers/containers.conf.d/50-sandbox-test.conf,
# so the podman CLI and the service agree.
#
# Files: /var/log/sandbox-podman.log (service log), /run/sandbox-podman/
#   (socket, pid file), $SANDBOX_TEST_DIR/env.d/podman.sh (exports
#   SANDBOX_TEST_PODMAN_HOST and SANDBOX_TEST_PODMAN_IMAGE; env.sh sources it).
# Image: sandbox-fixture/busybox:latest in Podman's storage, FROM scratch +
#   busybox-static (no registry is reachable).
# Stop it: kill "$(cat /run/sandbox-podman/podman.pid)".
set -euo pipefail
# Daemons started here keep this script's working directory; a checkout
# or worktree removed later would leave them (and the containers they
# spawn: conmon fails with "Failed to get working directory") broken.
cd /

BASE=${SANDBOX_TEST_DIR:-/var/lib/sandbox-test}
RUN_DIR=/run/sandbox-podman
SOCK=$RUN_DIR/podman.sock
PIDFILE=$RUN_DIR/podman.pid
LOG=/var/log/sandbox-podman.log
CONF=/etc/containers/containers.conf.d/50-sandbox-test.conf
POOL=${SANDBOX_PODMAN_SUBNET_POOL:-10.90.0.0/16}
IMAGE=sandbox-fixture/busybox:latest
TIMEOUT=${SETUP_TIMEOUT:-60}

log() { echo "setup-podman: $*" >&2; }
die() { echo "setup-podman: ERROR: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "run as root (rootful podman, packages)"

install_packages() {
	if command -v podman >/dev/null && [ -x /usr/lib/podman/netavark ] && [ -x /bin/busybox ]; then
		return 0
	fi
	[ "${SANDBOX_SKIP_APT:-}" = 1 ] && die "podman, netavark or busybox-static is missing (SANDBOX_SKIP_APT=1)"
	log "installing podman (with netavark, aardvark-dns, catatonit)"
	local apt=(apt-get -o DPkg::Lock::Timeout=600 -qq)
	command -v podman >/dev/null || "${apt[@]}" update </dev/null
	# No recommends: they pull buildah, fuse-overlayfs, slirp4netns and dbus,
	# none of which rootful podman needs here. catatonit is the --init binary.
	DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y --no-install-recommends \
		podman netavark aardvark-dns catatonit busybox-static </dev/null >/dev/null
}

write_config() {
	local NOFILE NPROC
	NOFILE=$(ulimit -Hn)
	NPROC=$(ulimit -Hu)
	[ "$NOFILE" = unlimited ] && NOFILE=1048576
	# The service itself runs with at most 32768 processes (observed on
	# podman 4.3), and runc, its child, cannot go above that.
	{ [ "$NPROC" = unlimited ] || [ "$NPROC" -gt 32768 ]; } && NPROC=32768
	install -d -m 0755 "$(dirname "$CONF")"
	cat >"$CONF.new" <<EOF
# Written by scripts/setup-podman.sh (terraform-provider-sandbox tests).
[containers]
# Rootful podman raises RLIMIT_NOFILE (and NPROC) of every container to
# 1048576/4194304, which runc cannot do under a lower hard limit (a machine
# whose own limits are capped): containers would not start ("error setting
# rlimit type 7"). Keep the limits this machine allows.
default_ulimits = [ "nofile=$NOFILE:$NOFILE", "nproc=$NPROC:$NPROC" ]

[engine]
# No systemd on these machines.
cgroup_manager = "cgroupfs"
events_logger = "file"

[network]
# netavark, not the CNI plugins (the package's 87-podman-bridge.conflist
# would otherwise select CNI, whose plugins are not installed).
network_backend = "netavark"
default_subnet = "10.88.0.0/16"
default_subnet_pools = [{ base = "$POOL", size = 24 }]
EOF
	if cmp -s "$CONF.new" "$CONF"; then
		rm -f "$CONF.new"
		return 1
	fi
	mv "$CONF.new" "$CONF"
	return 0
}

answers() { curl -fsS --max-time 5 --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1; }

service_pid() {
	local pid
	pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
	[ -n "$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] &&
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF "$SOCK" && echo "$pid"
}

# cwd_gone PID: the process's working directory was deleted (it was started
# from a checkout or worktree removed since).
cwd_gone() { case "$(readlink "/proc/$1/cwd" 2>/dev/null)" in *" (deleted)") return 0 ;; esac; return 1; }

start_service() {
	local changed=$1 pid
	if pid=$(service_pid); then
		if [ "$changed" = 1 ] || cwd_gone "$pid"; then
			# The service reads containers.conf at start only; conmon, its
			# child, cannot start containers from a deleted directory.
			log "restarting podman service (pid $pid): its configuration changed or its working directory was deleted"
			kill "$pid"
			for _ in $(seq 50); do service_pid >/dev/null || break; sleep 0.1; done
		elif answers; then
			return 0
		fi
	elif answers; then
		# A service this script did not start (another pid file, or by
		# hand): use it, never remove its socket.
		[ "$changed" = 1 ] && log "WARNING: the podman service on $SOCK was not started here and keeps its old configuration; restart it to apply $CONF"
		return 0
	fi
	if ! service_pid >/dev/null; then
		install -d -m 0755 "$RUN_DIR"
		rm -f "$SOCK"
		log "starting podman system service on unix://$SOCK (log: $LOG)"
		setsid podman system service --time=0 "unix://$SOCK" >>"$LOG" 2>&1 </dev/null &
		echo $! >"$PIDFILE"
	fi
	local deadline=$((SECONDS + TIMEOUT))
	until answers; do
		if [ $SECONDS -ge $deadline ]; then
			tail -n 20 "$LOG" >&2 || true
			die "podman service did not answer on $SOCK within ${TIMEOUT}s (see $LOG)"
		fi
		sleep 0.2
	done
}

# busybox_image builds the fixture image once (rebuilt when busybox changes).
busybox_image() {
	local stamp have tmp
	stamp=$(sha256sum /bin/busybox | cut -c1-16)
	have=$(podman image inspect -f '{{ index .Labels "sandbox.fixture.stamp" }}' "$IMAGE" 2>/dev/null || true)
	[ "$have" = "$stamp" ] && return 0
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' RETURN
	cp /bin/busybox "$tmp/busybox"
	cat >"$tmp/Dockerfile" <<EOF
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
LABEL sandbox.fixture.stamp=$stamp
EOF
	log "building $IMAGE in podman storage"
	podman build -q --network none -t "$IMAGE" "$tmp" >/dev/null
}

write_env() {
	install -d -m 0755 "$BASE/env.d"
	cat >"$BASE/env.d/podman.sh.new" <<EOF
# Written by scripts/setup-podman.sh.
export SANDBOX_TEST_PODMAN_HOST=unix://$SOCK
export SANDBOX_TEST_PODMAN_IMAGE=$IMAGE
EOF
	mv "$BASE/env.d/podman.sh.new" "$BASE/env.d/podman.sh"
	# The loader (also written by setup-sshd.sh): sources every env.d/*.sh.
	if [ ! -f "$BASE/env.sh" ]; then
		cat >"$BASE/env.sh" <<EOF
# Test environment of terraform-provider-sandbox: . $BASE/env.sh
for f in $BASE/env.d/*.sh; do [ -r "\$f" ] && . "\$f"; done
unset f
EOF
	fi
}

install_packages
changed=0
write_config && changed=1
start_service "$changed"
busybox_image
write_env
log "podman $(podman version -f '{{.Server.Version}}' 2>/dev/null || echo '?') ready on unix://$SOCK; . $BASE/env.sh"
