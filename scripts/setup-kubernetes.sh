#!/usr/bin/env bash
# Starts a real single-node Kubernetes on loopback for the Kubernetes backend's
# tests: etcd, kube-apiserver, kube-controller-manager and kube-scheduler on
# 127.0.0.1, and a real kubelet with a containerd of its own (never dockerd's),
# runc and a CNI bridge, so Pods really run and exec works. No registry is
# reachable: the pause and busybox images are written locally and imported.
# Idempotent: what already runs is left alone; a warm run takes seconds.
# scripts/stop-kubernetes.sh stops it all and leaves the host as it was.
#
# Binaries: built from the Go module proxy by the tools module tools/kube
# (go.mod + go.sum pin k8s.io/kubernetes), cached in
# $SANDBOX_KUBE_CACHE/<version>/<hash of go.sum and Go version>/. A cold build
# takes 5-15 minutes and ~3 GiB of build cache.
#
# Files (SANDBOX_TEST_DIR, default /var/lib/sandbox-test):
#   kube/pki/             CA, serving and client certificates, SA keys, token
#   kube/kubeconfig       admin kubeconfig (client certificate, system:masters)
#   kube/logs/*.log       one log per daemon; kube/run/*.pid their pids
#   env.d/kubernetes.sh   exports SANDBOX_TEST_KUBE*; env.sh sources it
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Daemons keep the working directory they were started in; a removed
# worktree must not be it.
cd /

# shellcheck source=scripts/kubernetes-common.sh
. "$REPO/scripts/kubernetes-common.sh"

TIMEOUT=${SETUP_TIMEOUT:-180}
BIN="" # the cached Kubernetes binaries, set by kube_binaries

# --- packages -------------------------------------------------------------------
install_packages() {
	local need=() p
	command -v etcd >/dev/null || need+=(etcd-server)
	[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] || need+=(containernetworking-plugins)
	command -v containerd >/dev/null && command -v ctr >/dev/null || need+=(containerd)
	command -v runc >/dev/null || need+=(runc)
	[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1 || need+=(busybox-static)
	for p in openssl unshare ip; do command -v "$p" >/dev/null || die "$p is missing"; done
	[ ${#need[@]} -eq 0 ] && return 0
	[ "${SANDBOX_SKIP_APT:-}" = 1 ] && die "missing packages: ${need[*]} (SANDBOX_SKIP_APT=1)"
	log "installing ${need[*]}"
	apt-get -o DPkg::Lock::Timeout=600 update -qq </dev/null
	# etcd-server ships an init script; without systemd nothing starts it.
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends \
		"${need[@]}" </dev/null >/dev/null
}

# --- binaries -------------------------------------------------------------------
# kube_binaries sets BIN to the cache directory holding the four binaries,
# building them first when the tools module changed.
kube_binaries() {
	local key tmp ldflags start
	key=$({ cat "$TOOLS/go.sum"; go env GOVERSION; } | sha256sum | cut -c1-16)
	BIN=$CACHE/$KUBE_VERSION/$key
	if [ -x "$BIN/kubelet" ]; then
		return 0
	fi
	log "building kube-apiserver, kube-controller-manager, kube-scheduler, kubelet $KUBE_VERSION into $BIN (cold: 5-15 min)"
	start=$SECONDS
	tmp=$CACHE/$KUBE_VERSION/.build-$key-$$
	mkdir -p "$tmp"
	# Without the version in ldflags /version says v0.0.0, which clients reject.
	ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
	ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(cut -d. -f2 <<<"$KUBE_VERSION")"
	ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
	(cd "$TOOLS" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$tmp/" \
		k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet)
	# Renamed whole, so a build cut short never passes for a cached one.
	rm -rf "$BIN"
	mv "$tmp" "$BIN"
	log "built in $((SECONDS - start))s"
}

# helpers builds the project's small tools (pause, ociimage, crirm,
# kubesmoke): seconds with the build cache the binaries left.
helpers() {
	mkdir -p "$HELPERS"
	(cd "$TOOLS" && CGO_ENABLED=0 nice -n 10 go build -trimpath -ldflags "-s -w" -o "$HELPERS/" ./cmd/...)
}

# images writes the pause and busybox images as tarballs for ctr to import.
images() {
	local root=$KUBE_DIR/images applet
	rm -rf "$root"
	mkdir -p "$root/pause" "$root/busybox/bin" "$root/busybox/etc" "$root/busybox/tmp"
	cp "$HELPERS/pause" "$root/pause/pause"
	"$HELPERS/ociimage" -ref "$PAUSE_IMAGE" -out "$root/pause.tar" -cmd /pause "$root/pause"
	cp /bin/busybox "$root/busybox/bin/busybox"
	for applet in $(/bin/busybox --list); do
		[ "$applet" = busybox ] || ln -s busybox "$root/busybox/bin/$applet"
	done
	chmod 1777 "$root/busybox/tmp"
	echo 'root:x:0:0:root:/root:/bin/sh' >"$root/busybox/etc/passwd"
	echo 'root:x:0:' >"$root/busybox/etc/group"
	"$HELPERS/ociimage" -ref "$BUSYBOX_IMAGE" -out "$root/busybox.tar" -cmd sh "$root/busybox"
	rm -rf "$root/pause" "$root/busybox"
}

# --- certificates ---------------------------------------------------------------
# pki makes, once, a CA and what is signed by it: the apiserver's and the
# kubelet's serving certificates, an admin client (system:masters), the
# kubelet's node client, the service-account key pair and a bearer token.
pki() {
	[ -s "$PKI/token" ] && return 0
	local tmp=$PKI.new
	rm -rf "$tmp"
	install -d -m 0700 "$tmp"
	(
		cd "$tmp"
		local ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
		openssl req -x509 "${ec[@]}" -days 3650 -keyout ca.key -out ca.crt -subj /CN=sandbox-kube-ca 2>/dev/null
		# sign NAME SUBJECT EXTENSIONS
		sign() {
			openssl req "${ec[@]}" -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
			printf '%b' "$3" >"$1.ext"
			openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
				-extfile "$1.ext" -out "$1.crt" 2>/dev/null
			rm -f "$1.csr" "$1.ext"
		}
		sign apiserver /CN=kube-apiserver \
			"subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc,IP:${SERVICE_CIDR%0/*}1\nextendedKeyUsage=serverAuth\n"
		sign admin /O=system:masters/CN=sandbox-admin 'extendedKeyUsage=clientAuth\n'
		sign kubelet "/CN=$NODE_NAME" \
			"subjectAltName=IP:$NODE_IP,IP:127.0.0.1,DNS:localhost,DNS:$NODE_NAME\nextendedKeyUsage=serverAuth\n"
		sign node "/O=system:nodes/CN=system:node:$NODE_NAME" 'extendedKeyUsage=clientAuth\n'
		rm -f ca.srl
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
		openssl rand -hex 24 >token
		echo "$(cat token),sandbox-token,sandbox-token-uid,system:masters" >tokens.csv
	)
	mv "$tmp" "$PKI"
}

# kubeconfig FILE CERT KEY: a kubeconfig for a client certificate.
kubeconfig() {
	cat >"$1.new" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: sandbox-kube
  cluster: {server: "$API_URL", certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")}
users:
- name: $(basename "$2" .crt)
  user: {client-certificate-data: $(base64 -w0 <"$2"), client-key-data: $(base64 -w0 <"$3")}
contexts:
- name: sandbox-kube
  context: {cluster: sandbox-kube, user: $(basename "$2" .crt)}
current-context: sandbox-kube
EOF
	chmod 0600 "$1.new"
	mv "$1.new" "$1"
}

# --- host state -----------------------------------------------------------------
# record_host notes, before the first start, what the stop must give back:
# host paths the kubelet and CNI create only when missing, and ip_forward
# (the CNI bridge plugin turns it on for a gateway bridge).
record_host() {
	[ -s "$KUBE_DIR/host-before" ] && return 0
	local p
	{
		echo "ip_forward=$(cat /proc/sys/net/ipv4/ip_forward)"
		for p in "${HOST_PATHS[@]}"; do
			if [ -e "$p" ]; then echo "existed=$p"; fi
		done
	} >"$KUBE_DIR/host-before"
}

# bridge creates the CNI bridge with the pod network's gateway address: the
# kubelet refuses a loopback node IP (the Node then has no address and the
# apiserver cannot reach it for exec and logs), and this address is on no
# outside interface. The CNI bridge plugin adopts the existing bridge.
bridge() {
	ip link show "$BRIDGE" >/dev/null 2>&1 || ip link add "$BRIDGE" type bridge
	ip addr replace "$NODE_IP/${POD_CIDR#*/}" dev "$BRIDGE"
	ip link set "$BRIDGE" up
}

# --- daemons --------------------------------------------------------------------
# running NAME: the daemon recorded in run/NAME.pid is alive.
running() {
	local pid
	pid=$(cat "$RUN/$1.pid" 2>/dev/null) || return 1
	kill -0 "$pid" 2>/dev/null
}

# daemon NAME CMD...: start CMD in its own session, from /, logging to
# logs/NAME.log, unless NAME already runs.
daemon() {
	local name=$1
	shift
	running "$name" && return 0
	log "starting $name (log: $LOGS/$name.log)"
	setsid "$@" >"$LOGS/$name.log" 2>&1 </dev/null &
	echo $! >"$RUN/$name.pid"
}

# wait_for WHAT CMD...: poll CMD until it succeeds; fail with the logs of a
# daemon that died, or after $TIMEOUT seconds.
wait_for() {
	local what=$1 deadline=$((SECONDS + TIMEOUT)) pidfile name
	shift
	until "$@" >/dev/null 2>&1; do
		for pidfile in "$RUN"/*.pid; do
			name=$(basename "$pidfile" .pid)
			running "$name" && continue
			tail -n 20 "$LOGS/$name.log" >&2 || true
			die "$name exited while waiting for $what (log: $LOGS/$name.log)"
		done
		[ $SECONDS -lt $deadline ] || die "timed out after ${TIMEOUT}s waiting for $what (logs: $LOGS)"
		sleep 0.3
	done
}

start_containerd() {
	cat >"$KUBE_DIR/containerd.toml" <<EOF
# A containerd of the test cluster's own: its own root, state and socket, so
# dockerd's containerd is never involved.
version = 2
root = "$CTRD_ROOT"
state = "$CTRD_STATE"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$CTRD_SOCK"
[ttrpc]
  address = "$CTRD_SOCK.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$CTRD_ROOT/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true
  # Network namespaces under our state directory, not /run/netns.
  netns_mounts_under_state_dir = true
  # These machines lack CAP_SYS_RESOURCE: runc cannot lower oom_score_adj
  # (the pause container asks for -998) and every sandbox would fail.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$KUBE_DIR/cni"
    max_conf_num = 1
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
        # runc's default root is shared with every other containerd.
        Root = "$CTRD_STATE/runc"
EOF
	mkdir -p "$KUBE_DIR/cni"
	cat >"$KUBE_DIR/cni/10-sandbox-kube.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "sandbox-kube", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": "$CNI_DATA"}}]}
EOF
	daemon containerd containerd --config "$KUBE_DIR/containerd.toml"
	wait_for containerd ctr -a "$CTRD_SOCK" version
	local image
	for image in pause busybox; do
		ctr -a "$CTRD_SOCK" -n k8s.io images import "$KUBE_DIR/images/$image.tar" >/dev/null
	done
}

start_etcd() {
	# --unsafe-no-fsync: test data, and fsync is most of etcd's latency.
	daemon etcd etcd --name sandbox-kube --data-dir "$KUBE_DIR/etcd" --unsafe-no-fsync \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
		--initial-advertise-peer-urls "http://127.0.0.1:$((ETCD_PORT + 1))" \
		--initial-cluster "sandbox-kube=http://127.0.0.1:$((ETCD_PORT + 1))"
	wait_for etcd curl -sf "http://127.0.0.1:$ETCD_PORT/health"
}

start_control_plane() {
	daemon kube-apiserver "$BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
		--bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$API_PORT" \
		--tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
		--client-ca-file="$PKI/ca.crt" --token-auth-file="$PKI/tokens.csv" \
		--service-account-issuer=https://kubernetes.default.svc.cluster.local \
		--service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
		--service-cluster-ip-range="$SERVICE_CIDR" --authorization-mode=Node,RBAC \
		--enable-admission-plugins=NodeRestriction --endpoint-reconciler-type=none \
		--kubelet-preferred-address-types=InternalIP --kubelet-certificate-authority="$PKI/ca.crt" \
		--kubelet-client-certificate="$PKI/admin.crt" --kubelet-client-key="$PKI/admin.key"
	kubeconfig "$KUBECONFIG_FILE" "$PKI/admin.crt" "$PKI/admin.key"
	kubeconfig "$KUBE_DIR/kubelet.kubeconfig" "$PKI/node.crt" "$PKI/node.key"
	wait_for kube-apiserver api /readyz
	# Without the controller-manager there is no default ServiceAccount (Pods
	# are refused) and namespaces never finish deleting.
	daemon kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig="$KUBECONFIG_FILE" \
		--secure-port=0 --leader-elect=false --use-service-account-credentials=false \
		--service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
		--cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key"
	daemon kube-scheduler "$BIN/kube-scheduler" --kubeconfig="$KUBECONFIG_FILE" --secure-port=0 --leader-elect=false
}

start_kubelet() {
	cat >"$KUBE_DIR/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $((KUBELET_PORT - 2))
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
rotateCertificates: false
serverTLSBootstrap: false
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://$CTRD_SOCK
cgroupDriver: cgroupfs
# These machines have cgroup v1, which kubelet 1.36 refuses by default.
failCgroupV1: false
failSwapOn: false
# No iptables chains, no masquerading: the host's rules stay as they are.
makeIPTablesUtilChains: false
protectKernelDefaults: false
podLogsDir: $POD_LOGS
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
resolvConf: /etc/resolv.conf
maxPods: 110
EOF
	running kubelet && return 0
	# The kubelet's root is a shared mount, so the volumes it mounts inside
	# its own mount namespace (service-account tokens, emptyDir) show on the
	# host, where containerd and runc look for them.
	mkdir -p "$KUBELET_ROOT" "$POD_LOGS" "$KUBE_DIR/sysctl"
	if ! mountpoint -q "$KUBELET_ROOT"; then
		mount --bind "$KUBELET_ROOT" "$KUBELET_ROOT"
		mount --make-shared "$KUBELET_ROOT"
	fi
	# The kubelet sets vm.overcommit_memory=1, vm.panic_on_oom=0,
	# kernel.panic=10 and kernel.panic_on_oops=1 host-wide. In its mount
	# namespace those /proc/sys files are stand-ins already holding the values
	# it wants, so it leaves the host's alone.
	local setting file binds=""
	for setting in vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1; do
		file=$KUBE_DIR/sysctl/$(tr / _ <<<"${setting%=*}")
		echo "${setting#*=}" >"$file"
		binds+="mount --bind $file /proc/sys/${setting%=*}; "
	done
	daemon kubelet unshare --mount --propagation unchanged sh -c "mount --make-rprivate /proc; $binds exec $BIN/kubelet \
		--config=$KUBE_DIR/kubelet.yaml --kubeconfig=$KUBE_DIR/kubelet.kubeconfig --root-dir=$KUBELET_ROOT \
		--hostname-override=$NODE_NAME --node-ip=$NODE_IP"
}

node_ready() {
	# NodeCondition serialises type before status.
	api "/api/v1/nodes/$NODE_NAME" | tr -d ' \n' | grep -q '"type":"Ready","status":"True"'
}

# write_env publishes the cluster to the tests through env.d/kubernetes.sh.
write_env() {
	install -d -m 0755 "$BASE/env.d"
	cat >"$ENV_FILE.new" <<EOF
# Written by scripts/setup-kubernetes.sh; removed by scripts/stop-kubernetes.sh.
export SANDBOX_TEST_KUBECONFIG=$KUBECONFIG_FILE
export SANDBOX_TEST_KUBE_HOST=$API_URL
export SANDBOX_TEST_KUBE_CA_FILE=$PKI/ca.crt
export SANDBOX_TEST_KUBE_TOKEN_FILE=$PKI/token
export SANDBOX_TEST_KUBE_CLIENT_CERT_FILE=$PKI/admin.crt
export SANDBOX_TEST_KUBE_CLIENT_KEY_FILE=$PKI/admin.key
export SANDBOX_TEST_KUBE_NODE=$NODE_NAME
export SANDBOX_TEST_KUBE_IMAGE=$BUSYBOX_IMAGE
# Test images are written with \$SANDBOX_TEST_KUBE_TOOLS/ociimage and imported:
#   ctr -a \$SANDBOX_TEST_KUBE_CONTAINERD -n k8s.io images import IMAGE.tar
export SANDBOX_TEST_KUBE_CONTAINERD=$CTRD_SOCK
export SANDBOX_TEST_KUBE_TOOLS=$HELPERS
EOF
	mv "$ENV_FILE.new" "$ENV_FILE"
	# The loader (also written by setup-sshd.sh): sources every env.d/*.sh.
	if [ ! -f "$BASE/env.sh" ]; then
		cat >"$BASE/env.sh" <<EOF
# Test environment of terraform-provider-sandbox: . $BASE/env.sh
for f in $BASE/env.d/*.sh; do [ -r "\$f" ] && . "\$f"; done
EOF
	fi
}

main() {
	[ "$(id -u)" = 0 ] || die "run as root (it starts containerd and a kubelet)"
	local start=$SECONDS
	install_packages
	mkdir -p "$KUBE_DIR" "$LOGS" "$RUN"
	kube_binaries
	helpers
	images
	pki
	record_host
	bridge
	start_containerd
	start_etcd
	start_control_plane
	start_kubelet
	wait_for "node $NODE_NAME Ready" node_ready
	wait_for "the default ServiceAccount" api /api/v1/namespaces/default/serviceaccounts/default
	log "cluster ready in $((SECONDS - start))s ($API_URL, node $NODE_NAME); checking a Pod"
	"$HELPERS/kubesmoke" -kubeconfig "$KUBECONFIG_FILE" -image "$BUSYBOX_IMAGE" >&2 ||
		die "the test Pod failed (logs: $LOGS)"
	write_env
	log "Kubernetes $KUBE_VERSION ready in $((SECONDS - start))s; . $BASE/env.sh"
}

main "$@"
