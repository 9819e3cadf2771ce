#!/usr/bin/env bash
# Starts a second dockerd on tcp://127.0.0.1:2376 with --tlsverify, for the
# TCP+TLS transport tests. Certificates (a CA, a server certificate for
# 127.0.0.1 and localhost, a client certificate, and an unrelated "wrong" CA
# with its own client certificate) are made once with openssl.
#
# It must not clash with the main dockerd: its own --data-root, --exec-root,
# --pidfile, containerd namespaces, cgroup parent, bridge (sandbox-tls0,
# 10.212.0.1/24), address pool (10.213.0.0/16) and --iptables=false, so it
# never rewrites the main daemon's iptables chains. It also listens on a local
# unix socket (SANDBOX_TEST_TLS_SOCKET) for set-up scripts.
# Idempotent: certificates are kept while valid, a running daemon is reused.
set -euo pipefail
# Daemons started here keep this script's working directory; a checkout
# or worktree removed later would leave them (and the containers they
# spawn: conmon fails with "Failed to get working directory") broken.
cd /

BASE=${SANDBOX_TEST_DIR:-/var/lib/sandbox-test}
DIR=$BASE/docker-tls
CERTS=$DIR/certs
EXEC_ROOT=/run/sandbox-dtls
PIDFILE=$EXEC_ROOT/dockerd.pid
SOCKET=$EXEC_ROOT/docker.sock
LISTEN=${SANDBOX_TEST_TLS_LISTEN:-127.0.0.1:2376}
BRIDGE=sandbox-tls0
BRIDGE_CIDR=10.212.0.1/24
POOL=10.213.0.0/16
LOG=$DIR/dockerd.log
TIMEOUT=${SETUP_TIMEOUT:-60}

log() { echo "setup-docker-tls: $*" >&2; }
die() { echo "setup-docker-tls: ERROR: $*" >&2; exit 1; }

install_packages() {
	command -v openssl >/dev/null && command -v dockerd >/dev/null && return 0
	[ "${SANDBOX_SKIP_APT:-}" = 1 ] && die "openssl or docker.io is missing (SANDBOX_SKIP_APT=1)"
	log "installing openssl docker.io"
	apt-get -o DPkg::Lock::Timeout=600 update -qq </dev/null
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
		openssl docker.io </dev/null >/dev/null
}

# new_ca NAME: a self-signed CA (NAME.pem, NAME-key.pem).
new_ca() {
	openssl ecparam -name prime256v1 -genkey -noout -out "$CERTS/$1-key.pem" 2>/dev/null
	openssl req -x509 -new -sha256 -days 3650 -key "$CERTS/$1-key.pem" \
		-subj "/CN=sandbox-test $1" -out "$CERTS/$1.pem"
}

# new_cert CA OUT CN EXTENSIONS: a key and a certificate signed by CA.
new_cert() {
	local ca=$1 out=$2 cn=$3 ext=$4
	openssl ecparam -name prime256v1 -genkey -noout -out "$CERTS/$out-key.pem" 2>/dev/null
	openssl req -new -sha256 -key "$CERTS/$out-key.pem" -subj "/CN=$cn" -out "$CERTS/$out.csr"
	printf '%b\n' "$ext" >"$CERTS/$out.ext"
	openssl x509 -req -sha256 -days 3650 -in "$CERTS/$out.csr" -CA "$CERTS/$ca.pem" -CAkey "$CERTS/$ca-key.pem" \
		-CAcreateserial -extfile "$CERTS/$out.ext" -out "$CERTS/$out.pem" 2>/dev/null
	rm -f "$CERTS/$out.csr" "$CERTS/$out.ext"
}

# certs_valid: every file is there, chains to its CA and is valid for a day.
certs_valid() {
	local f
	for f in ca server client wrong-ca wrong-client; do
		[ -s "$CERTS/$f.pem" ] && [ -s "$CERTS/$f-key.pem" ] || return 1
		openssl x509 -checkend 86400 -noout -in "$CERTS/$f.pem" >/dev/null || return 1
	done
	openssl verify -CAfile "$CERTS/ca.pem" "$CERTS/server.pem" "$CERTS/client.pem" >/dev/null 2>&1 &&
		openssl verify -CAfile "$CERTS/wrong-ca.pem" "$CERTS/wrong-client.pem" >/dev/null 2>&1
}

make_certs() {
	install -d -m 0755 "$BASE" "$DIR"
	install -d -m 0700 "$CERTS"
	certs_valid && return 0
	log "creating certificates in $CERTS"
	rm -f "$CERTS"/*.pem "$CERTS"/*.srl
	new_ca ca
	new_cert ca server localhost \
		"subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature,keyEncipherment"
	new_cert ca client sandbox-test-client "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature"
	new_ca wrong-ca
	new_cert wrong-ca wrong-client sandbox-test-wrong-client "extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature"
	chmod 0644 "$CERTS"/*.pem
	chmod 0600 "$CERTS"/*-key.pem
	certs_valid || die "the certificates just made do not verify"
}

make_bridge() {
	ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
	ip -4 addr show dev "$BRIDGE" | grep -q "inet ${BRIDGE_CIDR%/*}/" || ip addr add "$BRIDGE_CIDR" dev "$BRIDGE"
	ip link set "$BRIDGE" up
}

# tls_docker ARGS: the docker CLI against the TLS endpoint, bounded in time.
tls_docker() {
	timeout 5 docker --tlsverify --tlscacert "$CERTS/ca.pem" --tlscert "$CERTS/client.pem" --tlskey "$CERTS/client-key.pem" \
		-H "tcp://$LISTEN" "$@"
}

answers() { tls_docker version >/dev/null 2>&1; }

# alive PID WORD: PID runs (a zombie does not count: PID 1 here may not reap)
# and its command line holds WORD.
alive() {
	local state
	state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$state" ] && [ "$state" != Z ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "$2"
}

daemon_pid() {
	local pid
	pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
	[ -n "$pid" ] && alive "$pid" "$EXEC_ROOT" && echo "$pid"
}

start_dockerd() {
	answers && return 0
	if ! daemon_pid >/dev/null; then
		rm -f "$PIDFILE" # a stale pid file stops dockerd from starting
		install -d -m 0711 "$EXEC_ROOT" "$DIR/data"
		log "starting dockerd on tcp://$LISTEN (log: $LOG)"
		# --live-restore is what keeps the main daemon's docker0 alive: dockerd
		# 20.10 with a --default-address-pool deletes the interface named docker0
		# when it clears its own stale default network at start, unless live
		# restore is on (moby daemon_unix.go initNetworkController). Without it,
		# every fresh CI run lost docker0 here, after the main dockerd made it.
		setsid dockerd \
			--tlsverify --tlscacert "$CERTS/ca.pem" --tlscert "$CERTS/server.pem" --tlskey "$CERTS/server-key.pem" \
			-H "tcp://$LISTEN" -H "unix://$SOCKET" \
			--data-root "$DIR/data" --exec-root "$EXEC_ROOT" --pidfile "$PIDFILE" \
			--containerd-namespace sandbox-tls --containerd-plugins-namespace sandbox-tls-plugins \
			--cgroup-parent /sandbox-tls \
			--bridge "$BRIDGE" --live-restore --iptables=false --ip-masq=false \
			--default-address-pool "base=$POOL,size=24" \
			>>"$LOG" 2>&1 </dev/null &
	fi
	local deadline=$((SECONDS + TIMEOUT))
	until answers; do
		if [ $SECONDS -ge $deadline ]; then
			tail -n 20 "$LOG" >&2 || true
			die "the TLS dockerd did not answer on tcp://$LISTEN within ${TIMEOUT}s (see $LOG)"
		fi
		sleep 0.3
	done
}

# check_refusals: the daemon must refuse a client without a certificate.
check_refusals() {
	if timeout 5 docker --tlsverify --tlscacert "$CERTS/ca.pem" -H "tcp://$LISTEN" version >/dev/null 2>&1; then
		die "the TLS dockerd accepts clients without a certificate"
	fi
}

write_env() {
	install -d -m 0755 "$BASE/env.d"
	cat >"$BASE/env.d/docker-tls.sh.new" <<EOF
# Written by scripts/setup-docker-tls.sh.
export SANDBOX_TEST_TLS_HOST=tcp://$LISTEN
export SANDBOX_TEST_TLS_CA=$CERTS/ca.pem
export SANDBOX_TEST_TLS_CERT=$CERTS/client.pem
export SANDBOX_TEST_TLS_KEY=$CERTS/client-key.pem
export SANDBOX_TEST_TLS_WRONG_CA=$CERTS/wrong-ca.pem
export SANDBOX_TEST_TLS_WRONG_CERT=$CERTS/wrong-client.pem
export SANDBOX_TEST_TLS_WRONG_KEY=$CERTS/wrong-client-key.pem
export SANDBOX_TEST_TLS_SOCKET=unix://$SOCKET
export SANDBOX_TEST_TLS_PIDFILE=$PIDFILE
EOF
	mv "$BASE/env.d/docker-tls.sh.new" "$BASE/env.d/docker-tls.sh"
	# env.sh sources every env.d/*.sh, so each set-up script owns its own part.
	cat >"$BASE/env.sh.new" <<EOF
# Test environment of terraform-provider-sandbox: . $BASE/env.sh
for f in $BASE/env.d/*.sh; do [ -r "\$f" ] && . "\$f"; done
unset f
EOF
	mv "$BASE/env.sh.new" "$BASE/env.sh"
}

install_packages
make_certs
make_bridge
start_dockerd
check_refusals
write_env
log "TLS dockerd ready on tcp://$LISTEN; . $BASE/env.sh"
