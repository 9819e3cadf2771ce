#!/usr/bin/env bash
# Installs (if missing) and starts incusd without systemd, then prepares what
# the tests expect: storage pool `default` (dir), network `incusbr0`, root and
# eth0 devices on the default profile, and a busybox test image aliased
# sandbox-fixture/busybox. Idempotent: every step checks before it acts, and a
# daemon that is already running is reused.
set -euo pipefail
# Daemons started here keep this script's working directory; a checkout
# or worktree removed later would leave them (and the containers they
# spawn: conmon fails with "Failed to get working directory") broken.
cd /

IMAGE_ALIAS="${SANDBOX_INCUS_IMAGE:-sandbox-fixture/busybox}"
POOL="${SANDBOX_INCUS_POOL:-default}"
NETWORK="${SANDBOX_INCUS_NETWORK:-incusbr0}"
NET_ADDR="${SANDBOX_INCUS_NET_ADDR:-10.123.45.1/24}"
LOG="${SANDBOX_INCUS_LOG:-/var/log/incusd.log}"
APT=(apt-get -o DPkg::Lock::Timeout=600 -y -q)

log() { echo "setup-incus: $*" >&2; }

# Incus is only in bookworm-backports; reuse the main entry's URI and keyring.
add_backports() {
	local f=/etc/apt/sources.list.d/bookworm-backports.sources
	[ -e "$f" ] && return 0
	local main=/etc/apt/sources.list.d/debian.sources
	local uri keyring
	uri=$(awk '/^URIs:/{print $2; exit}' "$main" 2>/dev/null || true)
	keyring=$(awk '/^Signed-By:/{print $2; exit}' "$main" 2>/dev/null || true)
	cat >"$f" <<EOF
Types: deb
URIs: ${uri:-http://deb.debian.org/debian}
Suites: bookworm-backports
Components: main
Signed-By: ${keyring:-/usr/share/keyrings/debian-archive-keyring.gpg}
EOF
	"${APT[@]}" update
}

install_packages() {
	if [ ! -x /usr/libexec/incus/incusd ] || ! command -v incus >/dev/null; then
		log "installing incus from bookworm-backports"
		add_backports
		DEBIAN_FRONTEND=noninteractive "${APT[@]}" install -t bookworm-backports incus
	fi
	if ! dpkg -s busybox-static >/dev/null 2>&1; then
		log "installing busybox-static"
		DEBIAN_FRONTEND=noninteractive "${APT[@]}" install busybox-static
	fi
}

server_answers() { timeout 5 incus query /1.0 >/dev/null 2>&1; }

start_daemon() {
	if server_answers; then
		return 0
	fi
	# The daemon itself, not its children: the `[lxc monitor]` and fork*
	# helpers of running containers are called incusd too, and outlive a
	# daemon that crashed.
	if ! pgrep -f '^(/usr/libexec/incus/|/usr/s?bin/)?incusd( --|$)' >/dev/null; then
		log "starting incusd (log: $LOG)"
		GOTRACEBACK=all setsid /usr/libexec/incus/incusd --group root >>"$LOG" 2>&1 </dev/null &
	fi
	incus admin waitready --timeout=120
}

ensure_pool() {
	incus storage show "$POOL" >/dev/null 2>&1 || incus storage create "$POOL" dir
}

ensure_network() {
	incus network show "$NETWORK" >/dev/null 2>&1 ||
		incus network create "$NETWORK" ipv4.address="$NET_ADDR" ipv4.nat=true ipv6.address=none
}

ensure_profile() {
	local devs
	devs=$(incus profile device list default 2>/dev/null || true)
	grep -qx root <<<"$devs" || incus profile device add default root disk path=/ pool="$POOL"
	grep -qx eth0 <<<"$devs" || incus profile device add default eth0 nic name=eth0 network="$NETWORK"
}

# build_rootfs DIR: busybox with its applets, an init that brings up lo and
# asks DHCP for an address (so instances report an IP), and minimal /etc.
build_rootfs() {
	local r=$1/rootfs applet
	mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,etc/init.d,dev,proc,sys,tmp,run,root,var/log,usr/share/udhcpc}
	chmod 1777 "$r/tmp"
	cp /bin/busybox "$r/bin/busybox"
	for applet in $(/bin/busybox --list-full); do
		[ -e "$r/$applet" ] || ln -s /bin/busybox "$r/$applet"
	done
	ln -sfn ../bin/busybox "$r/sbin/init"
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$r/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$r/etc/group"
	cat >"$r/etc/inittab" <<'EOF'
::sysinit:/etc/init.d/rcS
::shutdown:/bin/umount -a -r
EOF
	cat >"$r/etc/init.d/rcS" <<'EOF'
#!/bin/sh
ip link set lo up
[ -e /sys/class/net/eth0 ] && udhcpc -i eth0 -b -q -s /usr/share/udhcpc/default.script >/dev/null 2>&1 &
exit 0
EOF
	cat >"$r/usr/share/udhcpc/default.script" <<'EOF'
#!/bin/sh
case "$1" in
bound|renew)
	ip addr flush dev "$interface"
	ip addr add "$ip/${mask:-24}" dev "$interface"
	[ -n "$router" ] && ip route replace default via "${router%% *}" dev "$interface"
	[ -n "$dns" ] && { for d in $dns; do echo "nameserver $d"; done >/etc/resolv.conf; }
	;;
esac
exit 0
EOF
	chmod 0755 "$r/etc/init.d/rcS" "$r/usr/share/udhcpc/default.script"
}

build_image_tarball() {
	local dir=$1
	build_rootfs "$dir"
	cat >"$dir/metadata.yaml" <<EOF
architecture: $(uname -m)
creation_date: $(date +%s)
properties:
  description: busybox test fixture for terraform-provider-sandbox
  os: busybox
  release: "1"
EOF
	tar -C "$dir" -czf "$dir/busybox.tar.gz" metadata.yaml rootfs
}

ensure_image() {
	incus image show "$IMAGE_ALIAS" >/dev/null 2>&1 && return 0
	local dir rc=0
	dir=$(mktemp -d)
	log "importing $IMAGE_ALIAS"
	{ build_image_tarball "$dir" && incus image import "$dir/busybox.tar.gz" --alias "$IMAGE_ALIAS"; } || rc=$?
	rm -rf "$dir"
	return "$rc"
}

main() {
	[ "$(id -u)" = 0 ] || { log "must run as root"; exit 1; }
	install_packages
	start_daemon
	ensure_pool
	ensure_network
	ensure_profile
	ensure_image
	log "ready: $(incus version 2>/dev/null | tr '\n' ' ')"
}

main "$@"
