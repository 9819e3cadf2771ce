#!/usr/bin/env bash
# Build the local image fixtures the tests use (no registry is reachable) and
# cache them, so a re-run takes well under a second.
#
#   $SANDBOX_FIXTURE_DIR (default /var/cache/sandbox-fixtures)
#     busybox-rootfs.tar.gz   busybox-static rootfs: bin/ (applets as symlinks),
#                             sbin/init, etc/passwd, tmp/ ... (local / incus archives)
#     debian-bookworm.tar.gz  debootstrap bookworm (minbase + python3, python3-venv, gdb)
#   Docker images (when dockerd answers):
#     sandbox-fixture/busybox:latest     FROM scratch + busybox
#     sandbox-fixture/debian:bookworm    the debootstrap tarball, imported
#
# Usage: scripts/fixtures.sh [debian] [busybox]   (default: debian)
# The Go tests build their busybox fixtures themselves (internal/acctest); the
# busybox artefacts here are for examples and manual runs.
# Environment: SANDBOX_FIXTURE_DIR, DEBIAN_MIRROR (default: the main apt source),
#   FIXTURES_REBUILD=1 to rebuild everything.
set -euo pipefail

DIR=${SANDBOX_FIXTURE_DIR:-/var/cache/sandbox-fixtures}
DEBIAN_PACKAGES=python3,python3-venv,gdb
# Bump when the recipe changes: cached artefacts with another stamp are rebuilt.
RECIPE=1

log() { printf '[fixtures] %s\n' "$*" >&2; }
die() { printf '[fixtures] ERROR: %s\n' "$*" >&2; exit 1; }
now_ms() { date +%s%3N; }

mkdir -p "$DIR"
# One builder at a time (tests and set-up may run this concurrently); the
# second one then finds the cache current.
exec 9>"$DIR/.lock"
flock 9
TMPS=()
trap 'rm -rf "${TMPS[@]}"' EXIT
what=${*:-debian}
have_docker() { timeout 5 docker version >/dev/null 2>&1; }
docker_image_stamp() { docker image inspect -f '{{ index .Config.Labels "sandbox.fixture.stamp" }}' "$1" 2>/dev/null || true; }

# stamp FILE: the recipe and inputs an artefact was built from.
stamp_ok() { [ -f "$1" ] && [ -f "$1.stamp" ] && [ "$(cat "$1.stamp")" = "$2" ] && [ -z "${FIXTURES_REBUILD:-}" ]; }

busybox_bin() {
	local b
	for b in /bin/busybox /usr/bin/busybox; do
		if [ -x "$b" ] && file_is_static "$b"; then echo "$b"; return 0; fi
	done
	die "a static busybox is needed: apt-get install -y busybox-static"
}
file_is_static() { ! LC_ALL=C ldd "$1" >/dev/null 2>&1; }

# --- busybox rootfs --------------------------------------------------------------
build_busybox_rootfs() {
	local bb out=$DIR/busybox-rootfs.tar.gz stamp tmp
	bb=$(busybox_bin)
	stamp="recipe=$RECIPE busybox=$(sha256sum "$bb" | cut -c1-16)"
	if stamp_ok "$out" "$stamp"; then return 0; fi
	tmp=$(mktemp -d)
	TMPS+=("$tmp")
	mkdir -p "$tmp"/{bin,sbin,etc,tmp,root,proc,sys,dev,workspace}
	chmod 1777 "$tmp/tmp"
	cp "$bb" "$tmp/bin/busybox"
	local applet
	for applet in $("$bb" --list); do
		[ "$applet" = busybox ] || ln -sf busybox "$tmp/bin/$applet"
	done
	ln -sf ../bin/busybox "$tmp/sbin/init"
	printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$tmp/etc/passwd"
	printf 'root:x:0:\nnogroup:x:65534:\n' >"$tmp/etc/group"
	tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -C "$tmp" -c . | gzip -n >"$out.tmp"
	mv "$out.tmp" "$out"
	echo "$stamp" >"$out.stamp"
	log "built $out"
}

docker_busybox_image() {
	local img=sandbox-fixture/busybox:latest stamp tmp
	stamp=$(cat "$DIR/busybox-rootfs.tar.gz.stamp")
	[ "$(docker_image_stamp "$img")" = "$stamp" ] && [ -z "${FIXTURES_REBUILD:-}" ] && return 0
	tmp=$(mktemp -d)
	TMPS+=("$tmp")
	cp "$(busybox_bin)" "$tmp/busybox"
	cat >"$tmp/Dockerfile" <<EOF
FROM scratch
COPY busybox /bin/busybox
RUN ["/bin/busybox", "--install", "-s", "/bin"]
LABEL sandbox.fixture.stamp="$stamp"
CMD ["/bin/sh"]
EOF
	local out
	out=$(DOCKER_BUILDKIT=0 docker build -q -t "$img" "$tmp" 2>&1) || { echo "$out" >&2; die "docker build of $img failed"; }
	log "built docker image $img"
}

# --- debian (debootstrap) ----------------------------------------------------------
debian_mirror() {
	if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
	local uri
	uri=$(awk '/^URIs:/ { u=$2 } /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") { print u; exit } }' \
		/etc/apt/sources.list.d/*.sources 2>/dev/null | head -n1)
	echo "${uri:-http://deb.debian.org/debian}"
}

build_debian_rootfs() {
	local out=$DIR/debian-bookworm.tar.gz stamp="recipe=$RECIPE suite=bookworm variant=minbase packages=$DEBIAN_PACKAGES" tmp
	if stamp_ok "$out" "$stamp"; then return 0; fi
	command -v debootstrap >/dev/null || die "debootstrap is needed: apt-get install -y debootstrap"
	tmp=$(mktemp -d /var/tmp/sandbox-debootstrap.XXXXXX)
	TMPS+=("$tmp")
	local mirror rootfs=$tmp/rootfs
	mirror=$(debian_mirror)
	log "debootstrap bookworm (minbase) + ${DEBIAN_PACKAGES//,/ } from $mirror: a few minutes, once"
	# debootstrap's own resolver is too weak for gdb's dependencies: bootstrap
	# minbase, then let apt inside the chroot install the rest.
	mkdir -p "$DIR/debootstrap-cache"
	if ! debootstrap --variant=minbase --cache-dir="$DIR/debootstrap-cache" bookworm "$rootfs" "$mirror" >"$DIR/debootstrap.log" 2>&1; then
		cp "$rootfs/debootstrap/debootstrap.log" "$DIR/debootstrap-inner.log" 2>/dev/null || true
		tail -n 20 "$DIR/debootstrap.log" >&2
		die "debootstrap failed (logs: $DIR/debootstrap*.log)"
	fi
	if ! { DEBIAN_FRONTEND=noninteractive chroot "$rootfs" apt-get -qq update &&
		DEBIAN_FRONTEND=noninteractive chroot "$rootfs" apt-get -qq install -y --no-install-recommends \
			${DEBIAN_PACKAGES//,/ }; } >>"$DIR/debootstrap.log" 2>&1 </dev/null; then
		tail -n 20 "$DIR/debootstrap.log" >&2
		die "installing ${DEBIAN_PACKAGES//,/ } in the debootstrap chroot failed (log: $DIR/debootstrap.log)"
	fi
	chroot "$rootfs" apt-get -qq clean
	# Smaller and reproducible enough: no apt lists or caches.
	rm -rf "$tmp/rootfs/var/cache/apt/archives/"*.deb "$tmp/rootfs/var/lib/apt/lists/"*
	tar --numeric-owner -C "$tmp/rootfs" -c . | gzip -1 >"$out.tmp"
	mv "$out.tmp" "$out"
	echo "$stamp" >"$out.stamp"
	log "built $out ($(du -h "$out" | cut -f1))"
}

docker_debian_image() {
	local img=sandbox-fixture/debian:bookworm stamp
	stamp=$(cat "$DIR/debian-bookworm.tar.gz.stamp")
	[ "$(docker_image_stamp "$img")" = "$stamp" ] && [ -z "${FIXTURES_REBUILD:-}" ] && return 0
	docker import -c "LABEL sandbox.fixture.stamp=\"$stamp\"" -c 'CMD ["/bin/bash"]' \
		"$DIR/debian-bookworm.tar.gz" "$img" >/dev/null
	log "imported docker image $img"
}

timed() {
	local name=$1 start
	shift
	start=$(now_ms)
	"$@"
	printf '[fixtures] %-28s %6d ms\n' "$name" "$(($(now_ms) - start))" >&2
}

for w in $what; do
	case "$w" in
	busybox)
		timed "busybox rootfs" build_busybox_rootfs
		if have_docker; then timed "docker busybox image" docker_busybox_image; fi
		;;
	debian)
		timed "debian rootfs" build_debian_rootfs
		if have_docker; then timed "docker debian image" docker_debian_image; fi
		;;
	*) die "unknown fixture '$w' (busybox debian)" ;;
	esac
done
