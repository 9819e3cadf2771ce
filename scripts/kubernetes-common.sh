# Shared by setup-kubernetes.sh and stop-kubernetes.sh (sourced): where the
# test cluster lives. One cluster per machine: the ports, the bridge and the
# paths below are fixed.
# shellcheck shell=bash

KUBE_VERSION=v1.36.3 # must match tools/kube/go.mod
TOOLS=$REPO/tools/kube
CACHE=${SANDBOX_KUBE_CACHE:-/var/cache/sandbox-kube}
BASE=${SANDBOX_TEST_DIR:-/var/lib/sandbox-test}
KUBE_DIR=$BASE/kube
PKI=$KUBE_DIR/pki
LOGS=$KUBE_DIR/logs
RUN=$KUBE_DIR/run
HELPERS=$KUBE_DIR/bin
KUBECONFIG_FILE=$KUBE_DIR/kubeconfig
ENV_FILE=$BASE/env.d/kubernetes.sh

ETCD_PORT=23791 # and 23792 for peers
API_PORT=26443
API_URL=https://127.0.0.1:$API_PORT
KUBELET_PORT=20250 # healthz on 127.0.0.1:20248
NODE_NAME=sandbox-kube-node
# Clear of the docker, incus, podman and TLS-dockerd networks of the test set-up.
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.96.0.0/24
BRIDGE=sandbox-kube0
NODE_IP=${POD_CIDR%0/*}1 # the bridge's address: the node's InternalIP

CTRD_ROOT=$KUBE_DIR/containerd
CTRD_STATE=/run/sandbox-kube/containerd
CTRD_SOCK=$CTRD_STATE/containerd.sock
CNI_DATA=/run/sandbox-kube/cni
KUBELET_ROOT=$KUBE_DIR/kubelet
POD_LOGS=/var/log/sandbox-kube-pods
PAUSE_IMAGE=registry.k8s.io/pause:3.10
BUSYBOX_IMAGE=docker.io/library/busybox:1.35

# Host paths the kubelet or libcni create when missing, whatever their
# configuration says (the device-plugin socket's path is fixed): the stop
# removes them, children first, only when they were missing.
HOST_PATHS=(/var/log/containers /var/lib/cni/results /var/lib/cni /var/lib/kubelet/device-plugins /var/lib/kubelet)

log() { printf '[kubernetes] %s\n' "$*" >&2; }
die() { printf '[kubernetes] ERROR: %s\n' "$*" >&2; exit 1; }

# api PATH: GET PATH from the apiserver with the test token.
api() {
	curl -sf --max-time 5 --cacert "$PKI/ca.crt" -H "Authorization: Bearer $(cat "$PKI/token")" "$API_URL$1"
}
