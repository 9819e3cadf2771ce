#!/usr/bin/env bash
# Stops the test cluster scripts/setup-kubernetes.sh started and gives the
# host back as it found it: no process, mount, bridge, cgroup, network
# namespace or state of the cluster is left, host paths the kubelet created
# are removed, and ip_forward is what it was. The certificates, images and
# logs under $SANDBOX_TEST_DIR/kube stay for the next start. Safe to run when
# nothing (or only part of it) runs.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd /

# shellcheck source=scripts/kubernetes-common.sh
. "$REPO/scripts/kubernetes-common.sh"

# stop_pid PID: SIGTERM, then SIGKILL after 15 s.
stop_pid() {
	kill -TERM "$1" 2>/dev/null || return 0
	local i
	for i in $(seq 150); do
		kill -0 "$1" 2>/dev/null || return 0
		sleep 0.1
	done
	log "pid $1 ignored SIGTERM for 15s: killing it"
	kill -KILL "$1" 2>/dev/null || true
}

# stop_daemon NAME: stop the daemon recorded in run/NAME.pid.
stop_daemon() {
	local pid
	pid=$(cat "$RUN/$1.pid" 2>/dev/null) || return 0
	if kill -0 "$pid" 2>/dev/null; then
		log "stopping $1 (pid $pid)"
		stop_pid "$pid"
	fi
	rm -f "$RUN/$1.pid"
}

# remove_pods has our containerd stop and remove every pod sandbox, which
# also releases their network namespaces and bridge addresses through CNI.
remove_pods() {
	local pid
	pid=$(cat "$RUN/containerd.pid" 2>/dev/null) || return 0
	kill -0 "$pid" 2>/dev/null || return 0
	[ -x "$HELPERS/crirm" ] || return 0
	"$HELPERS/crirm" -endpoint "unix://$CTRD_SOCK" >&2 || log "removing the pods failed: cleaning up by hand"
}

# kill_leftovers kills what removing the pods missed: shims of our containerd
# (their command line names our socket) and processes in the Pods' cgroups.
kill_leftovers() {
	local pid argv tasks
	for pid in /proc/[0-9]*; do
		# Builtins only: thousands of processes, and a fork each is slow.
		mapfile -d '' argv 2>/dev/null <"$pid/cmdline" || continue
		[ ${#argv[@]} -gt 0 ] && [ "${argv[0]}" != "${argv[0]%containerd-shim-runc-v2}" ] || continue
		case " ${argv[*]} " in
		*" -address $CTRD_SOCK "*)
			log "killing a leftover shim (pid ${pid#/proc/})"
			kill -KILL "${pid#/proc/}" 2>/dev/null || true
			;;
		esac
	done
	for tasks in $(find /sys/fs/cgroup -path '*/kubepods/*' -name tasks 2>/dev/null); do
		for pid in $(cat "$tasks" 2>/dev/null); do
			log "killing leftover pod process $pid"
			kill -KILL "$pid" 2>/dev/null || true
		done
	done
}

unmount_all() {
	local mountpoint
	# Deepest first; the kubelet root's own bind mount goes last.
	for mountpoint in $(awk '{print $5}' /proc/self/mountinfo |
		grep -E "^($CTRD_STATE|$CTRD_ROOT|$KUBELET_ROOT|/run/sandbox-kube)(/|$)" | sort -r); do
		umount "$mountpoint" 2>/dev/null || umount -l "$mountpoint"
	done
}

remove_cgroups() {
	local top
	# cgroup v1: one kubepods per hierarchy; v2: one in the unified tree.
	for top in $(find /sys/fs/cgroup -maxdepth 2 -type d -name kubepods 2>/dev/null); do
		find "$top" -depth -type d -exec rmdir {} \; 2>/dev/null || true
		[ ! -d "$top" ] || log "WARNING: $top is still there (a process in it?)"
	done
}

# restore_host removes the host paths the kubelet or libcni created and
# turns ip_forward back off when the CNI bridge plugin turned it on.
restore_host() {
	local before=$KUBE_DIR/host-before p
	find /var/log/containers -maxdepth 1 -lname "$POD_LOGS/*" -delete 2>/dev/null || true
	rm -f /var/lib/cni/results/sandbox-kube-* /var/lib/kubelet/device-plugins/kubelet.sock
	[ -s "$before" ] || return 0
	for p in "${HOST_PATHS[@]}"; do
		grep -qx "existed=$p" "$before" || rmdir "$p" 2>/dev/null || true
	done
	if grep -qx 'ip_forward=0' "$before" && [ "$(cat /proc/sys/net/ipv4/ip_forward)" = 1 ]; then
		log "turning net.ipv4.ip_forward back off"
		echo 0 >/proc/sys/net/ipv4/ip_forward
	fi
	rm -f "$before"
}

main() {
	[ "$(id -u)" = 0 ] || die "run as root"
	local start=$SECONDS
	# The tests must not find a cluster that is going away.
	rm -f "$ENV_FILE"
	# The kubelet first, or it restarts the Pods removed below.
	stop_daemon kubelet
	remove_pods
	local name
	for name in kube-scheduler kube-controller-manager kube-apiserver containerd etcd; do
		stop_daemon "$name"
	done
	kill_leftovers
	unmount_all
	if ip link show "$BRIDGE" >/dev/null 2>&1; then
		ip link del "$BRIDGE"
	fi
	remove_cgroups
	restore_host
	rm -rf "$CTRD_ROOT" "$KUBELET_ROOT" "$KUBE_DIR/etcd" /run/sandbox-kube "$POD_LOGS" "$RUN"
	log "stopped in $((SECONDS - start))s"
}

main "$@"
