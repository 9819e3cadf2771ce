#!/usr/bin/env bash
# Starts a private sshd on 127.0.0.1:2222 for the SSH transport tests: its own
# host key and config, key-only auth, root login with a key, stream-local and
# TCP forwarding (so the Docker API is reached through direct-streamlocal).
# Creates client keys, known_hosts files and an env file the tests source.
# Idempotent: existing keys are kept, a running sshd is reused (and reloaded
# when its config changed). It never touches the system sshd or /root/.ssh.
#
# Files (SANDBOX_TEST_DIR, default /var/lib/sandbox-test):
#   sshd/                 sshd_config, host key, pid file, authorized_keys, log
#   ssh/id_ed25519        client key (authorized)
#   ssh/id_ed25519_enc    encrypted client key (authorized), passphrase in env
#   ssh/id_ed25519_other  client key that is NOT authorized (wrong-key tests)
#   ssh/known_hosts       [127.0.0.1]:2222 -> the host key
#   ssh/known_hosts_hashed  the same entry, hashed
#   ssh/known_hosts_wrong   [127.0.0.1]:2222 -> a different key (changed-key tests)
#   env.d/ssh.sh          exports SANDBOX_TEST_SSH_*; env.sh sources env.d/*.sh
set -euo pipefail
# Daemons started here keep this script's working directory; a checkout
# or worktree removed later would leave them (and the containers they
# spawn: conmon fails with "Failed to get working directory") broken.
cd /

BASE=${SANDBOX_TEST_DIR:-/var/lib/sandbox-test}
PORT=${SANDBOX_TEST_SSH_PORT:-2222}
SSHD_DIR=$BASE/sshd
KEY_DIR=$BASE/ssh
CONF=$SSHD_DIR/sshd_config
PIDFILE=$SSHD_DIR/sshd.pid
PASSPHRASE=sandbox-test-passphrase
TIMEOUT=${SETUP_TIMEOUT:-30}

log() { echo "setup-sshd: $*" >&2; }
die() { echo "setup-sshd: ERROR: $*" >&2; exit 1; }

install_packages() {
	[ -x /usr/sbin/sshd ] && command -v ssh-keygen >/dev/null && command -v ssh-agent >/dev/null && return 0
	[ "${SANDBOX_SKIP_APT:-}" = 1 ] && die "openssh-server is missing (SANDBOX_SKIP_APT=1)"
	log "installing openssh-server"
	apt-get -o DPkg::Lock::Timeout=600 update -qq </dev/null
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
		openssh-server openssh-client </dev/null >/dev/null
}

# keygen FILE [PASSPHRASE]: an ed25519 key pair, made once.
keygen() {
	[ -s "$1" ] && [ -s "$1.pub" ] && return 0
	rm -f "$1" "$1.pub"
	ssh-keygen -q -t ed25519 -N "${2:-}" -C "sandbox-test $(basename "$1")" -f "$1"
}

make_keys() {
	install -d -m 0755 "$BASE"
	install -d -m 0700 "$SSHD_DIR" "$KEY_DIR"
	keygen "$SSHD_DIR/ssh_host_ed25519_key"
	keygen "$SSHD_DIR/decoy_host_ed25519_key" # never served: for known_hosts_wrong
	keygen "$KEY_DIR/id_ed25519"
	keygen "$KEY_DIR/id_ed25519_enc" "$PASSPHRASE"
	keygen "$KEY_DIR/id_ed25519_other"
	cat "$KEY_DIR/id_ed25519.pub" "$KEY_DIR/id_ed25519_enc.pub" >"$SSHD_DIR/authorized_keys.new"
	mv "$SSHD_DIR/authorized_keys.new" "$SSHD_DIR/authorized_keys"
	chmod 0600 "$SSHD_DIR/authorized_keys"
}

# known_hosts line for HOSTPATTERN from a public key file.
host_line() { echo "$1 $(cut -d' ' -f1,2 "$2")"; }

make_known_hosts() {
	local pattern="[127.0.0.1]:$PORT"
	[ "$PORT" = 22 ] && pattern=127.0.0.1
	host_line "$pattern" "$SSHD_DIR/ssh_host_ed25519_key.pub" >"$KEY_DIR/known_hosts"
	host_line "$pattern" "$SSHD_DIR/decoy_host_ed25519_key.pub" >"$KEY_DIR/known_hosts_wrong"
	cp "$KEY_DIR/known_hosts" "$KEY_DIR/known_hosts_hashed"
	ssh-keygen -q -H -f "$KEY_DIR/known_hosts_hashed" >/dev/null 2>&1
	rm -f "$KEY_DIR/known_hosts_hashed.old"
	grep -q '^|1|' "$KEY_DIR/known_hosts_hashed" || die "ssh-keygen -H did not hash $KEY_DIR/known_hosts_hashed"
}

write_config() {
	cat >"$CONF.new" <<EOF
# Private sshd for terraform-provider-sandbox tests (scripts/setup-sshd.sh).
Port $PORT
ListenAddress 127.0.0.1
HostKey $SSHD_DIR/ssh_host_ed25519_key
PidFile $PIDFILE
AuthorizedKeysFile $SSHD_DIR/authorized_keys
# The files are the script's own; StrictModes would refuse them under /tmp.
StrictModes no
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
AllowStreamLocalForwarding yes
AllowTcpForwarding yes
AllowAgentForwarding no
X11Forwarding no
PermitTTY yes
MaxStartups 200:30:400
MaxSessions 100
ClientAliveInterval 0
LogLevel INFO
Subsystem sftp internal-sftp
EOF
	mkdir -p /run/sshd && chmod 0755 /run/sshd # privilege separation directory
	/usr/sbin/sshd -t -f "$CONF.new" || die "sshd rejects the generated config $CONF.new"
	if cmp -s "$CONF.new" "$CONF"; then
		rm -f "$CONF.new"
		return 1 # unchanged
	fi
	mv "$CONF.new" "$CONF"
	return 0
}

# alive PID WORD: PID runs (a zombie does not count: PID 1 here may not reap)
# and its command line holds WORD.
alive() {
	local state
	state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
	[ -n "$state" ] && [ "$state" != Z ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "$2"
}

sshd_pid() {
	local pid
	pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
	[ -n "$pid" ] && alive "$pid" "$CONF" && echo "$pid"
}

# answers: the sshd on PORT presents our host key.
answers() {
	local want got
	want=$(cut -d' ' -f2 "$SSHD_DIR/ssh_host_ed25519_key.pub")
	got=$(timeout 5 ssh-keyscan -T 3 -t ed25519 -p "$PORT" 127.0.0.1 2>/dev/null | awk '{print $3}') || return 1
	[ "$got" = "$want" ]
}

start_sshd() {
	local changed=$1 pid
	if pid=$(sshd_pid); then
		# SIGHUP makes sshd re-read its config and host keys (e.g. a key
		# made again after its file was deleted).
		if [ "$changed" = 1 ] || ! answers; then
			log "reloading sshd (pid $pid): its config or host key changed"
			kill -HUP "$pid"
			sleep 0.5
		fi
	else
		rm -f "$PIDFILE"
		log "starting sshd on 127.0.0.1:$PORT (log: $SSHD_DIR/sshd.log)"
		/usr/sbin/sshd -f "$CONF" -E "$SSHD_DIR/sshd.log" </dev/null
	fi
	local deadline=$((SECONDS + TIMEOUT))
	until answers; do
		[ $SECONDS -lt $deadline ] || {
			tail -n 20 "$SSHD_DIR/sshd.log" >&2 || true
			die "sshd on 127.0.0.1:$PORT did not answer with its host key within ${TIMEOUT}s (another process on the port?)"
		}
		sleep 0.2
	done
}

write_env() {
	local fp
	fp=$(ssh-keygen -l -f "$SSHD_DIR/ssh_host_ed25519_key.pub" | awk '{print $2}')
	install -d -m 0755 "$BASE/env.d"
	cat >"$BASE/env.d/ssh.sh.new" <<EOF
# Written by scripts/setup-sshd.sh.
export SANDBOX_TEST_SSH_HOST=ssh://root@127.0.0.1:$PORT
export SANDBOX_TEST_SSH_KEY=$KEY_DIR/id_ed25519
export SANDBOX_TEST_SSH_KEY_ENC=$KEY_DIR/id_ed25519_enc
export SANDBOX_TEST_SSH_KEY_PASSPHRASE=$PASSPHRASE
export SANDBOX_TEST_SSH_KEY_OTHER=$KEY_DIR/id_ed25519_other
export SANDBOX_TEST_SSH_KNOWN_HOSTS=$KEY_DIR/known_hosts
export SANDBOX_TEST_SSH_KNOWN_HOSTS_HASHED=$KEY_DIR/known_hosts_hashed
export SANDBOX_TEST_SSH_KNOWN_HOSTS_WRONG=$KEY_DIR/known_hosts_wrong
export SANDBOX_TEST_SSH_HOST_FINGERPRINT=$fp
export SANDBOX_TEST_SSHD_PIDFILE=$PIDFILE
EOF
	mv "$BASE/env.d/ssh.sh.new" "$BASE/env.d/ssh.sh"
	write_env_loader
}

# env.sh sources every env.d/*.sh, so each set-up script owns its own part.
write_env_loader() {
	cat >"$BASE/env.sh.new" <<EOF
# Test environment of terraform-provider-sandbox: . $BASE/env.sh
for f in $BASE/env.d/*.sh; do [ -r "\$f" ] && . "\$f"; done
unset f
EOF
	mv "$BASE/env.sh.new" "$BASE/env.sh"
}

install_packages
make_keys
make_known_hosts
changed=0
write_config && changed=1
start_sshd "$changed"
write_env
log "sshd ready on 127.0.0.1:$PORT; . $BASE/env.sh"
