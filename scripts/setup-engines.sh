#!/usr/bin/env bash
# Install and start the engines the tests (and the demo) need, on Debian 12 as
# root, without systemd. Idempotent: a warm re-run takes a second or two, and
# daemons that already run are left alone.
#
# Usage: scripts/setup-engines.sh [ENGINE...]
#   ENGINE: docker | local | incus | ssh | tls | podman | fixtures | kubernetes
#   kubernetes (scripts/setup-kubernetes.sh) is only set up when named: no
#   gate or default picks it until the Kubernetes driver's tests exist.
# Engines come from the arguments, else from $ENGINES ("docker local ..."),
# else from the acceptance gates that are set (SANDBOX_ACC_DOCKER=1 -> docker,
# ...), else "docker local".
#
# Environment:
#   ENGINES               engines to set up (space or comma separated)
#   SETUP_TIMEOUT         seconds to wait for a daemon to answer (default 60)
#   SANDBOX_SKIP_APT=1    never call apt-get (fail if a package is missing)
set -euo pipefail

SCRIPTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Daemons started here keep this script's working directory; a checkout
# or worktree removed later would leave them (and the containers they
# spawn: conmon fails with "Failed to get working directory") broken.
cd /
SETUP_TIMEOUT=${SETUP_TIMEOUT:-60}
export DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }

now_ms() { date +%s%3N; }
current_step=""
trap 'rc=$?; [ "$rc" = 0 ] || [ -z "$current_step" ] || printf "[setup] step %s FAILED (exit %s)\n" "$current_step" "$rc" >&2' EXIT
# step NAME CMD...: run CMD (errexit stays in force) and report its duration.
step() {
	local name=$1 start
	shift
	current_step=$name
	start=$(now_ms)
	"$@"
	printf '[setup] %-34s %6d ms\n' "$name" "$(($(now_ms) - start))" >&2
	current_step=""
}

[ "$(id -u)" = 0 ] || die "run as root (it installs packages and starts daemons)"

# --- which engines ----------------------------------------------------------
if [ $# -gt 0 ]; then
	engines="$*"
elif [ -n "${ENGINES:-}" ]; then
	engines=${ENGINES//,/ }
else
	engines=""
	gate() { case "${1:-}" in "" | 0 | false | no) return 1 ;; *) return 0 ;; esac }
	gate "${SANDBOX_ACC_DOCKER:-}" && engines+=" docker"
	gate "${SANDBOX_ACC_LOCAL:-}" && engines+=" local"
	gate "${SANDBOX_ACC_INCUS:-}" && engines+=" incus"
	gate "${SANDBOX_ACC_SSH:-}" && engines+=" ssh"
	gate "${SANDBOX_ACC_TLS:-}" && engines+=" tls"
	gate "${SANDBOX_ACC_PODMAN:-}" && engines+=" podman"
	[ -n "$engines" ] || engines="docker local"
fi

want() { case " $engines " in *" $1 "*) return 0 ;; *) return 1 ;; esac }
for e in $engines; do
	case "$e" in docker | local | incus | ssh | tls | podman | fixtures | kubernetes) ;; *) die "unknown engine '$e' (docker local incus ssh tls podman fixtures kubernetes)" ;; esac
done
# SSH and TLS backends are Docker reached another way.
{ want ssh || want tls || want fixtures; } && ! want docker && engines="docker $engines"
log "engines: $(echo $engines)"

# --- packages ----------------------------------------------------------------
pkgs=()
want docker && pkgs+=(docker.io busybox-static)
want local && pkgs+=(bubblewrap busybox-static)
want ssh && pkgs+=(openssh-server)
want tls && pkgs+=(openssl)
want fixtures && pkgs+=(debootstrap busybox-static)
want incus && pkgs+=(busybox-static)


# backports_source adds bookworm-backports with the URI and keyring of the
# main Debian entry, once.
backports_source() {
	if grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		return 0
	fi
	local uri="" keyring=""
	local f
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -e "$f" ] || continue
		# The stanza whose Suites include "bookworm" (the main archive).
		read -r uri keyring < <(awk '
			/^[[:space:]]*$/ { if (main && uri != "") { print uri, key; done=1; exit } main=0; uri=""; key=""; next }
			/^URIs:/ { uri=$2 }
			/^Signed-By:/ { key=$2 }
			/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") main=1 }
			END { if (!done && main && uri != "") print uri, key }' "$f") || true
		[ -n "$uri" ] && break
	done
	if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
		uri=$(awk '$1 == "deb" && $0 ~ / bookworm / { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { print $i; exit } }' /etc/apt/sources.list)
	fi
	uri=${uri:-http://deb.debian.org/debian}
	keyring=${keyring:-/usr/share/keyrings/debian-archive-keyring.gpg}
	log "adding bookworm-backports ($uri)"
	cat >/etc/apt/sources.list.d/bookworm-backports.sources <<EOF
Types: deb
URIs: $uri
Suites: bookworm-backports
Components: main
Signed-By: $keyring
EOF
}

install_packages() {
	local missing=() p need_incus=0 have
	# One dpkg-query for every package: "<name> <status>" per installed one.
	have=$(dpkg-query -W -f='${Package} ${Status}\n' "${pkgs[@]}" incus 2>/dev/null | awk '$NF == "installed" { print $1 }' || true)
	for p in $(printf '%s\n' "${pkgs[@]}" | sort -u); do
		grep -qx "$p" <<<"$have" || missing+=("$p")
	done
	if want incus && ! grep -qx incus <<<"$have"; then
		need_incus=1
	fi
	if [ ${#missing[@]} -eq 0 ] && [ "$need_incus" = 0 ]; then
		return 0
	fi
	[ "${SANDBOX_SKIP_APT:-}" = 1 ] && die "missing packages: ${missing[*]} $([ $need_incus = 1 ] && echo incus) (SANDBOX_SKIP_APT=1)"
	[ "$need_incus" = 1 ] && backports_source
	log "installing: ${missing[*]} $([ $need_incus = 1 ] && echo 'incus (bookworm-backports)')"
	local apt=(apt-get -o DPkg::Lock::Timeout=300 -qq)
	"${apt[@]}" update </dev/null
	if [ ${#missing[@]} -gt 0 ]; then
		"${apt[@]}" install -y "${missing[@]}" </dev/null >/dev/null
	fi
	if [ "$need_incus" = 1 ]; then
		"${apt[@]}" install -y -t bookworm-backports incus </dev/null >/dev/null
	fi
}

# --- dockerd -------------------------------------------------------------------
docker_answers() { timeout 5 docker version >/dev/null 2>&1; }

start_dockerd() {
	# A dockerd that is still shutting down answers nothing and then exits:
	# wait for an answer, and start a daemon whenever none runs.
	local deadline=$((SECONDS + SETUP_TIMEOUT))
	until docker_answers; do
		if ! pgrep -x dockerd >/dev/null; then
			# A pid file left by a killed daemon stops the next one from starting.
			rm -f /var/run/docker.pid
			log "starting dockerd (log: /var/log/dockerd.log)"
			setsid dockerd >/var/log/dockerd.log 2>&1 </dev/null &
		fi
		if [ $SECONDS -ge $deadline ]; then
			tail -n 20 /var/log/dockerd.log >&2 || true
			die "dockerd did not answer within ${SETUP_TIMEOUT}s (see /var/log/dockerd.log)"
		fi
		sleep 0.3
	done
}

# ensure_default_bridge recreates the interface of Docker's default "bridge"
# network when it is gone. A running dockerd never recreates docker0 once
# something deleted it (a second dockerd started with --default-address-pool
# and without --live-restore does: see setup-docker-tls.sh), and every
# container on the default network then fails to start with "could not find
# bridge docker0". It runs last, after every other daemon has started.
ensure_default_bridge() {
	local name gateway subnet
	name=$(docker network inspect bridge --format '{{index .Options "com.docker.network.bridge.name"}}' 2>/dev/null) || return 0
	[ -n "$name" ] || return 0
	ip link show "$name" >/dev/null 2>&1 && return 0
	gateway=$(docker network inspect bridge --format '{{range .IPAM.Config}}{{.Gateway}}{{end}}')
	subnet=$(docker network inspect bridge --format '{{range .IPAM.Config}}{{.Subnet}}{{end}}')
	[ -n "$gateway" ] && [ -n "$subnet" ] || die "Docker's default network has no IPv4 gateway/subnet to recreate $name with"
	log "recreating Docker's default bridge $name ($gateway/${subnet#*/}): dockerd did not"
	ip link add "$name" type bridge
	ip addr add "$gateway/${subnet#*/}" dev "$name"
	ip link set "$name" up
}

# --- bubblewrap ----------------------------------------------------------------
check_bwrap() {
	bwrap --ro-bind / / --unshare-all --die-with-parent true ||
		die "bubblewrap cannot create namespaces here (bwrap --unshare-all failed)"
}

# --- incusd --------------------------------------------------------------------
setup_incus() { bash "$SCRIPTS_DIR/setup-incus.sh"; }

# run_owned NAME: scripts/NAME is written by the engineer who owns that
# engine; call it when it is there.
run_owned() {
	local script="$SCRIPTS_DIR/$1"
	if [ -f "$script" ]; then
		bash "$script"
	else
		log "WARNING: scripts/$1 is missing: $2 is not set up"
	fi
}

# --- run -----------------------------------------------------------------------
total_start=$(now_ms)
step "packages" install_packages
want docker && step "dockerd" start_dockerd
want local && step "bubblewrap" check_bwrap
want incus && step "incusd" setup_incus
want ssh && step "sshd (setup-sshd.sh)" run_owned setup-sshd.sh "the SSH test host"
want tls && step "dockerd TLS (setup-docker-tls.sh)" run_owned setup-docker-tls.sh "the TLS Docker daemon"
want podman && step "podman (setup-podman.sh)" run_owned setup-podman.sh "the Podman API service"
want fixtures && step "fixtures (fixtures.sh)" bash "$SCRIPTS_DIR/fixtures.sh"
want kubernetes && step "kubernetes (setup-kubernetes.sh)" bash "$SCRIPTS_DIR/setup-kubernetes.sh"
want docker && step "docker0" ensure_default_bridge
printf '[setup] %-34s %6d ms\n' "total" "$(($(now_ms) - total_start))" >&2
