#!/usr/bin/env bash
# A single-node Kubernetes cluster on this machine, offline, for the tests
# of the Kubernetes sandbox provider (docs/testing.md, "The Kubernetes test
# cluster").
#
#   cluster.sh up DIR     start a cluster whose files all live in DIR; prints
#                         AGENTCTL_TEST_KUBECONFIG=DIR/kubeconfig (also
#                         written to DIR/env) when it works end to end
#   cluster.sh down DIR   stop it and undo everything up did, even after a
#                         failed up; safe to run again
#   cluster.sh build      build the Kubernetes programs unless cached; prints
#                         the directory holding them
#
# Everything is built or installed here: the Kubernetes programs from the
# Go module proxy (test/kubernetes/build), etcd, containerd, runc and the
# CNI plugins from Debian's packages, and the images from this machine's
# files (nothing is ever pulled: there is no registry).
#
# Progress goes to stderr; stdout carries only the env line, so
# `export $(test/kubernetes/cluster.sh up /tmp/k8s)` works.
set -euo pipefail

K8S_VERSION=v1.34.4
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${AGENTCTL_K8S_CACHE:-${HOME:-/root}/.cache/agentctl/kubernetes}/$K8S_VERSION
PROGRAMS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

# Names and addresses. One cluster at a time per machine: two kubelets
# would fight over the kubepods cgroups and the iptables chains.
NODE_NAME=agentctl-node
NODE_IF=agentctl-k8s0           # holds the node IP (see up_network)
BRIDGE_IF=agentctl-cni0         # the pods' bridge, made by the CNI plugin
CNI_NETWORK=agentctl-test       # the CNI network's name
NODE_CIDR=10.213.0.1/24         # the node IP on NODE_IF
NODE_IP=${NODE_CIDR%/*}
POD_CIDR=10.213.128.0/24
SERVICE_CIDR=10.213.64.0/24
SERVICE_IP=10.213.64.1          # the `kubernetes` Service: first IP of SERVICE_CIDR
# Ports outside the usual Kubernetes ones, so a cluster elsewhere on the
# machine would not clash with this one.
ETCD_PORT=12379
ETCD_PEER_PORT=12380
APISERVER_PORT=16443
KCM_PORT=12257
SCHEDULER_PORT=12259
KUBELET_PORT=12250
KUBELET_HEALTHZ_PORT=12248
PROXY_HEALTHZ_PORT=12256
PROXY_METRICS_PORT=12249

PAUSE_IMAGE=registry.k8s.io/pause:3.10.1   # the kubelet's default, so nothing asks for another
IMAGE=agentctl.test/busybox:1              # internal/k8stest.Image
USERS_IMAGE=agentctl.test/busybox-users:1  # internal/k8stest.UsersImage
STORAGE_CLASS=agentctl-test                # internal/k8stest.StorageClass
LIMITED_USER=agentctl-limited              # internal/k8stest.LimitedUser
PV_COUNT=10

# Bounded waits, in seconds.
WAIT_ETCD=30
WAIT_APISERVER=60
WAIT_CONTAINERD=20
WAIT_NODE=90
WAIT_POD=60

say() { echo "cluster.sh: [${SECONDS}s] $*" >&2; }
die() {
  echo "cluster.sh: error: $*" >&2
  exit 1
}

# tail_log FILE: the last lines of a log, for an error message.
tail_log() {
  if [ -s "$1" ]; then
    echo "last lines of $1:"
    tail -n 25 "$1" | sed 's/^/  | /'
  else
    echo "$1 is empty or missing"
  fi
}

# wait_for WHAT SECONDS NAME COMMAND...: runs COMMAND every 0.25 s until
# it succeeds; fails naming WHAT, with the tail of DIR/logs/NAME.log, after
# SECONDS or as soon as the process NAME has exited.
wait_for() {
  local what=$1 secs=$2 name=$3
  shift 3
  local deadline=$((SECONDS + secs)) log=$DIR/logs/$name.log
  until "$@" >/dev/null 2>&1; do
    if ! running "$name"; then
      die "$what: $name exited; $(tail_log "$log")
run: $0 down $DIR   (to clean up; the logs are in $DIR/logs until then)"
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      die "$what did not come up in ${secs} s; $(tail_log "$log")
run: $0 down $DIR   (to clean up; the logs are in $DIR/logs until then)"
    fi
    sleep 0.25
  done
}

# ---------------------------------------------------------------- build

# build: the Kubernetes programs of K8S_VERSION in CACHE, built from the
# module proxy unless all are there already.
build() {
  local p missing=0
  for p in "${PROGRAMS[@]}"; do
    [ -x "$CACHE/$p" ] || missing=1
  done
  [ "$missing" = 0 ] && return 0
  command -v go >/dev/null || die "building Kubernetes $K8S_VERSION needs Go (the go command is not on PATH)"
  say "building Kubernetes $K8S_VERSION into $CACHE (several minutes the first time)"
  mkdir -p "$CACHE"
  local tmp ldflags="-s -w" pkg
  tmp=$(mktemp -d "$CACHE/.build.XXXXXX")
  # The version the programs report (the API server and kubelet compare
  # theirs), as Kubernetes' own build sets it.
  for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=34"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  local targets=()
  for p in "${PROGRAMS[@]}"; do targets+=("k8s.io/kubernetes/cmd/$p"); done
  if ! (cd "$HERE/build" && GOWORK=off GOFLAGS=-mod=readonly CGO_ENABLED=0 \
    go build -trimpath -ldflags "$ldflags" -o "$tmp/" "${targets[@]}") >"$tmp/build.log" 2>&1; then
    local msg
    msg=$(tail -n 30 "$tmp/build.log")
    rm -rf "$tmp"
    die "building Kubernetes $K8S_VERSION (go build in $HERE/build) failed:
$msg"
  fi
  for p in "${PROGRAMS[@]}"; do mv -f "$tmp/$p" "$CACHE/$p"; done
  rm -rf "$tmp"
}

# ---------------------------------------------------------------- packages

# need_packages: installs Debian's packages the cluster runs on, if missing.
need_packages() {
  local need=() pair
  for pair in etcd:etcd-server containerd:containerd ctr:containerd runc:runc \
    iptables:iptables conntrack:conntrack openssl:openssl curl:curl \
    busybox:busybox-static useradd:passwd gcc:gcc ip:iproute2; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || need+=("${pair#*:}")
  done
  [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
  # gcc -static links pause.c against glibc's static library.
  [ -e /usr/lib/x86_64-linux-gnu/libc.a ] || compgen -G '/usr/lib/*/libc.a' >/dev/null || need+=(libc6-dev)
  if [ ${#need[@]} -gt 0 ]; then
    say "installing Debian packages: ${need[*]}"
    apt-get update -qq >&2 || die "apt-get update failed (installing ${need[*]})"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null ||
      die "apt-get install ${need[*]} failed"
  fi
  file_is_static /bin/busybox || die "/bin/busybox is not statically linked (install Debian's busybox-static)"
}

file_is_static() { ! LC_ALL=C ldd "$1" >/dev/null 2>&1; }

# ---------------------------------------------------------------- helpers

# start NAME COMMAND...: runs COMMAND in its own session (so it outlives
# this script and the terminal), logging to DIR/logs/NAME.log, its pid in
# DIR/run/NAME.pid.
start() {
  local name=$1
  shift
  setsid bash -c 'echo $$ >"$1"; shift; exec "$@"' _ "$DIR/run/$name.pid" "$@" \
    </dev/null >"$DIR/logs/$name.log" 2>&1 &
  local i
  for i in $(seq 50); do
    [ -s "$DIR/run/$name.pid" ] && return 0
    sleep 0.02
  done
  die "$name did not start; $(tail_log "$DIR/logs/$name.log")"
}

# running NAME: whether the process of DIR/run/NAME.pid is alive.
running() {
  local pid
  pid=$(cat "$DIR/run/$1.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && ! gone "$pid"
}

# alive NAME: fails at once, with its log, if NAME has exited.
alive() {
  running "$1" || die "$1 exited; $(tail_log "$DIR/logs/$1.log")
run: $0 down $DIR   (to clean up)"
}

kubectl() { "$CACHE/kubectl" --kubeconfig "$DIR/kubeconfig" "$@"; }
ctr() { command ctr --address "$DIR/run/containerd.sock" --namespace k8s.io "$@"; }

# ---------------------------------------------------------------- certificates

# cert NAME SUBJECT EXT: a key and a certificate signed by the cluster CA,
# in DIR/pki/NAME.{key,crt}. EXT is the x509v3 extension lines.
cert() {
  local name=$1 subject=$2 ext=$3 pki=$DIR/pki
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$pki/$name.key" 2>/dev/null
  openssl req -new -key "$pki/$name.key" -subj "$subject" -out "$pki/$name.csr"
  printf '%s\n' "$ext" >"$pki/$name.ext"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 365 -sha256 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
  rm -f "$pki/$name.csr" "$pki/$name.ext"
}

client_ext='basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth'

make_certs() {
  local pki=$DIR/pki
  mkdir -p "$pki"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$pki/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=agentctl-test-ca" -days 365 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
    -out "$pki/ca.crt"
  cert apiserver "/CN=kube-apiserver" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:$NODE_IP,IP:127.0.0.1,IP:$SERVICE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert kubelet-serving "/CN=$NODE_NAME" "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:$NODE_IP,DNS:$NODE_NAME"
  cert admin "/O=system:masters/CN=agentctl-admin" "$client_ext"
  cert limited "/CN=$LIMITED_USER" "$client_ext"
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client_ext"
  cert kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" "$client_ext"
  cert controller-manager "/CN=system:kube-controller-manager" "$client_ext"
  cert scheduler "/CN=system:kube-scheduler" "$client_ext"
  cert kube-proxy "/CN=system:kube-proxy" "$client_ext"
  # The service-account token signing key pair.
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$pki/sa.key" 2>/dev/null
  openssl pkey -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
  chmod 600 "$pki"/*.key
}

# kubeconfig FILE CERT USER: a kubeconfig for the client certificate
# DIR/pki/CERT.{crt,key}, with everything embedded so it can be copied.
kubeconfig() {
  local file=$1 certname=$2 user=$3
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: agentctl-test
  cluster:
    server: https://$NODE_IP:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 "$DIR/pki/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 "$DIR/pki/$certname.crt")
    client-key-data: $(base64 -w0 "$DIR/pki/$certname.key")
contexts:
- name: agentctl-test
  context:
    cluster: agentctl-test
    user: $user
    namespace: default
current-context: agentctl-test
EOF
  chmod 600 "$file"
}

# ---------------------------------------------------------------- network

# take_down_stale: a cluster that is no longer up (its processes were
# stopped, say when the machine was handed on) but whose
# interface, mounts, cgroups and rules are still here is taken down, so
# that this one can come up; a live one is an error (one per machine).
take_down_stale() {
  ip link show "$NODE_IF" >/dev/null 2>&1 || return 0
  local owner
  owner=$(ip -o link show "$NODE_IF" | sed -n 's/.* alias \(.*\)$/\1/p')
  case $owner in
    /*) ;;
    *) die "$NODE_IF exists but names no cluster directory; remove it (ip link del $NODE_IF) and run: $0 down DIR" ;;
  esac
  if live "$owner"; then
    die "a cluster is up in $owner (one per machine: two kubelets would fight over cgroups and iptables); stop it with: $0 down $owner"
  fi
  say "the cluster left in $owner is no longer up: taking it down first"
  bash "$0" down "$owner" || die "taking down the stale cluster in $owner failed (see above)"
}

# up_network: the node IP on an interface of its own. The kubelet refuses
# a loopback node IP, and the machine's own addresses are not ours to use.
# The kernel here loads no modules and has no dummy interfaces, so the
# interface is a bridge without ports (its address is local all the same,
# as docker0's is with no container).
up_network() {
  ip link add "$NODE_IF" type bridge || die "could not make the node's interface $NODE_IF (ip link add type bridge)"
  ip link set "$NODE_IF" alias "$DIR"
  ip addr add "$NODE_CIDR" dev "$NODE_IF" || die "could not give $NODE_IF the node IP $NODE_CIDR"
  ip link set "$NODE_IF" up
}

# ---------------------------------------------------------------- images

# image_archive REF ROOTFS OUT PROCESS: a docker-archive tarball of one
# layer holding ROOTFS, tagged REF, for `ctr images import`; PROCESS is
# the JSON of the image's Cmd or Entrypoint. Made by hand, so no image is
# ever pulled and Docker is not needed.
image_archive() {
  local ref=$1 rootfs=$2 out=$3 process=$4 work diff cfg
  work=$(mktemp -d "$DIR/images/.XXXXXX")
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$rootfs" -cf "$work/layer.tar" .
  diff=$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
  printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin:/usr/bin:/sbin:/usr/sbin"],%s,"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$process" "$diff" >"$work/config.json"
  cfg=$(sha256sum "$work/config.json" | cut -d' ' -f1)
  mv "$work/config.json" "$work/$cfg.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["layer.tar"]}]' "$cfg" "$ref" >"$work/manifest.json"
  tar -C "$work" -cf "$out" manifest.json "$cfg.json" layer.tar
  rm -rf "$work"
}

# busybox_rootfs DIR: Debian's static busybox with its applets linked in
# /bin, and the accounts a shell expects (as the Docker provider's test
# image).
busybox_rootfs() {
  local r=$1 applet
  mkdir -p "$r/bin" "$r/etc" "$r/tmp" "$r/root" "$r/home/user" "$r/dev" "$r/proc" "$r/sys"
  cp /bin/busybox "$r/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [ "$applet" = busybox ] || ln -sf busybox "$r/bin/$applet"
  done
  chmod 1777 "$r/tmp"
  printf 'root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/sh\n' >"$r/etc/passwd"
  printf 'root:x:0:\nuser:x:1000:\n' >"$r/etc/group"
  chown 1000:1000 "$r/home/user"
}

make_images() {
  local img=$DIR/images src
  mkdir -p "$img"
  # pause: Kubernetes' own pause.c from the module cache, static.
  src=$(cd "$HERE/build" && GOWORK=off go list -m -f '{{.Dir}}' k8s.io/kubernetes 2>/dev/null)/build/pause/linux/pause.c
  if [ ! -f "$src" ]; then
    (cd "$HERE/build" && GOWORK=off go mod download k8s.io/kubernetes) >&2 ||
      die "downloading k8s.io/kubernetes $K8S_VERSION for pause.c failed"
    src=$(cd "$HERE/build" && GOWORK=off go list -m -f '{{.Dir}}' k8s.io/kubernetes)/build/pause/linux/pause.c
  fi
  [ -f "$src" ] || die "no pause.c at $src"
  mkdir -p "$img/pause/bin"
  gcc -Os -Wall -static -DVERSION="v3.10.1-agentctl" -o "$img/pause/bin/pause" "$src" ||
    die "compiling $src statically failed (needs gcc and libc6-dev)"
  image_archive "$PAUSE_IMAGE" "$img/pause" "$img/pause.tar" '"Entrypoint":["/bin/pause"]'
  rm -rf "$img/pause"

  busybox_rootfs "$img/busybox"
  image_archive "$IMAGE" "$img/busybox" "$img/busybox.tar" '"Cmd":["/bin/sh"]'

  # busybox-users: plus this host's useradd, groupadd and usermod and the
  # libraries they load (Debian's static busybox has no adduser).
  local tool bin lib
  for tool in useradd groupadd usermod; do
    bin=$(command -v "$tool") || die "no $tool on this machine (Debian's passwd package)"
    mkdir -p "$img/busybox$(dirname "$bin")"
    cp -L "$bin" "$img/busybox$bin"
    for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
      mkdir -p "$img/busybox$(dirname "$lib")"
      cp -L "$lib" "$img/busybox$lib"
    done
  done
  image_archive "$USERS_IMAGE" "$img/busybox" "$img/busybox-users.tar" '"Cmd":["/bin/sh"]'
  rm -rf "$img/busybox"

  local t
  for t in pause busybox busybox-users; do
    ctr images import "$img/$t.tar" >/dev/null 2>"$DIR/logs/import-$t.log" ||
      die "importing $img/$t.tar into containerd failed: $(cat "$DIR/logs/import-$t.log")"
  done
}

# ---------------------------------------------------------------- configs

write_configs() {
  local c=$DIR/conf
  mkdir -p "$c" "$DIR/cni/net.d" "$DIR/cni/ipam"
  kubeconfig "$DIR/kubeconfig" admin agentctl-admin
  kubeconfig "$DIR/kubeconfig-limited" limited "$LIMITED_USER"
  kubeconfig "$c/controller-manager.kubeconfig" controller-manager system:kube-controller-manager
  kubeconfig "$c/scheduler.kubeconfig" scheduler system:kube-scheduler
  kubeconfig "$c/kubelet.kubeconfig" kubelet "system:node:$NODE_NAME"
  kubeconfig "$c/kube-proxy.kubeconfig" kube-proxy system:kube-proxy

  # containerd, private to this cluster: its own root, state, socket and
  # runc root under DIR, never Docker's (/var/run/docker/containerd).
  cat >"$c/containerd.toml" <<EOF
version = 2
root = "$DIR/containerd/root"
state = "$DIR/containerd/state"
[grpc]
  address = "$DIR/run/containerd.sock"
[ttrpc]
  address = "$DIR/run/containerd.sock.ttrpc"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "$DIR/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # root here lacks CAP_SYS_RESOURCE: without this, runc fails to lower a
  # container's oom_score_adj below ours ("can't get final child's PID
  # from pipe").
  restrict_oom_score_adj = true
  # Network namespaces under DIR, not /var/run/netns.
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # cgroupfs: there is no systemd here to manage cgroups.
        SystemdCgroup = false
        Root = "$DIR/containerd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$DIR/cni/net.d"
    max_conf_num = 1
EOF

  # The pods' network: a bridge with host-local addresses; firewall
  # accepts the pods' traffic in FORWARD (Docker sets its policy to DROP);
  # portmap for hostPort. containerd adds the loopback itself.
  cat >"$DIR/cni/net.d/10-agentctl.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "$CNI_NETWORK",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$BRIDGE_IF",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_CIDR"}]],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dataDir": "$DIR/cni/ipam"
      }
    },
    {"type": "firewall", "backend": "iptables"},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF

  cat >"$c/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: $KUBELET_PORT
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $KUBELET_HEALTHZ_PORT
tlsCertFile: $DIR/pki/kubelet-serving.crt
tlsPrivateKeyFile: $DIR/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $DIR/pki/ca.crt}
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://$DIR/run/containerd.sock
# cgroup v1 and no systemd on this machine.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
podLogsDir: $DIR/pod-logs
# Never collect the imported images (they cannot be pulled back), and do
# not evict on a fairly full disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  nodefs.inodesFree: 1%
  imagefs.available: 1%
resolvConf: /etc/resolv.conf
serializeImagePulls: false
EOF

  cat >"$c/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: $c/kube-proxy.kubeconfig
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
clusterCIDR: $POD_CIDR
mode: iptables
healthzBindAddress: 127.0.0.1:$PROXY_HEALTHZ_PORT
metricsBindAddress: 127.0.0.1:$PROXY_METRICS_PORT
nodePortAddresses: ["$NODE_IP/32"]
iptables:
  localhostNodePorts: false
# Leave the machine's conntrack settings alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOF

  # The pod the controller manager runs to empty a released volume
  # (reclaim policy Recycle), with the imported busybox instead of the
  # default image, which would be pulled.
  cat >"$c/recycler.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  generateName: pv-recycler-
  namespace: kube-system
spec:
  restartPolicy: Never
  automountServiceAccountToken: false
  volumes:
  - name: vol
  containers:
  - name: pv-recycler
    image: $IMAGE
    command: ["/bin/sh", "-c", "test -e /scrub && rm -rf /scrub/..?* /scrub/.[!.]* /scrub/* && test -z \"\$(ls -A /scrub)\""]
    volumeMounts:
    - name: vol
      mountPath: /scrub
EOF
}

# ---------------------------------------------------------------- up

# Directories outside DIR that containerd, the CNI plugins and the kubelet
# make whatever their configuration says (shim sockets, the CNI result
# cache, links to container logs, the device plugins' socket).
OUTSIDE_DIRS=(/run/containerd/s /run/containerd /var/lib/cni/results /var/lib/cni /var/log/containers /var/log/pods
  /var/lib/kubelet/device-plugins /var/lib/kubelet)

# record_machine: what down must not remove because it was there before
# up: those directories and the iptables (nf_tables) tables.
record_machine() {
  local d
  for d in "${OUTSIDE_DIRS[@]}"; do
    [ -e "$d" ] && echo "$d"
  done >"$DIR/run/dirs-before"
  if command -v nft >/dev/null; then
    nft list tables 2>/dev/null >"$DIR/run/tables-before" || true
  fi
}

apiserver_ready() {
  curl -sf --max-time 2 --cacert "$DIR/pki/ca.crt" --cert "$DIR/pki/admin.crt" --key "$DIR/pki/admin.key" \
    "https://$NODE_IP:$APISERVER_PORT/readyz" >/dev/null
}

node_ready() {
  [ "$(kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

up() {
  [ "$(id -u)" = 0 ] || die "up needs root (it makes interfaces, mounts and cgroups)"
  take_down_stale
  if [ -e "$DIR" ] && [ -n "$(ls -A "$DIR")" ]; then
    die "$DIR is not empty: a cluster is up there, or an old one was not taken down; run: $0 down $DIR"
  fi
  local t0=$SECONDS
  need_packages
  build
  mkdir -p "$DIR"/{logs,run,etcd,kubelet,pod-logs,pv,containerd}
  record_machine
  make_certs
  write_configs
  up_network

  start etcd etcd --name agentctl-test --data-dir "$DIR/etcd" \
    --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster "agentctl-test=http://127.0.0.1:$ETCD_PEER_PORT" --initial-cluster-state new
  start containerd containerd --config "$DIR/conf/containerd.toml"
  wait_for "etcd (127.0.0.1:$ETCD_PORT)" "$WAIT_ETCD" etcd \
    curl -sf --max-time 2 "http://127.0.0.1:$ETCD_PORT/health"
  say "etcd is up"

  # --watch-cache=false: Debian 12's etcd (3.4.23) is older than the
  # 3.4.31 the API server's watch cache needs for progress notifications;
  # with the cache, a watch without a resourceVersion (client-go's, the
  # volume recycler's) fails "Too large resource version". Without it,
  # reads and watches go to etcd.
  start kube-apiserver "$CACHE/kube-apiserver" \
    --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$APISERVER_PORT" \
    --tls-cert-file "$DIR/pki/apiserver.crt" --tls-private-key-file "$DIR/pki/apiserver.key" \
    --client-ca-file "$DIR/pki/ca.crt" \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --allow-privileged=true \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --service-account-key-file "$DIR/pki/sa.pub" --service-account-signing-key-file "$DIR/pki/sa.key" \
    --kubelet-client-certificate "$DIR/pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$DIR/pki/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority "$DIR/pki/ca.crt" \
    --kubelet-preferred-address-types InternalIP \
    --watch-cache=false \
    --profiling=false

  # While the API server starts: containerd and the images.
  wait_for "containerd ($DIR/run/containerd.sock)" "$WAIT_CONTAINERD" containerd \
    ctr version
  say "containerd is up"
  make_images &
  local images=$!
  # The rest wait for the API server themselves; starting them now saves
  # seconds. (Their own HTTPS ports serve only health checks here, so
  # they are not given kubeconfigs to authenticate callers.)
  start kube-controller-manager "$CACHE/kube-controller-manager" \
    --kubeconfig "$DIR/conf/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$KCM_PORT" --leader-elect=false \
    --service-account-private-key-file "$DIR/pki/sa.key" --root-ca-file "$DIR/pki/ca.crt" \
    --use-service-account-credentials \
    --service-cluster-ip-range "$SERVICE_CIDR" \
    --pv-recycler-pod-template-filepath-hostpath "$DIR/conf/recycler.yaml" \
    --profiling=false
  start kube-scheduler "$CACHE/kube-scheduler" \
    --kubeconfig "$DIR/conf/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port "$SCHEDULER_PORT" --leader-elect=false \
    --profiling=false
  start kubelet "$CACHE/kubelet" \
    --config "$DIR/conf/kubelet.yaml" --kubeconfig "$DIR/conf/kubelet.kubeconfig" \
    --root-dir "$DIR/kubelet" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP"
  start kube-proxy "$CACHE/kube-proxy" --config "$DIR/conf/kube-proxy.yaml"


  wait_for "kube-apiserver (https://$NODE_IP:$APISERVER_PORT)" "$WAIT_APISERVER" kube-apiserver \
    apiserver_ready
  say "kube-apiserver is ready"
  wait "$images" || die "making the images failed (see above)"
  say "images imported"
  make_storage
  wait_for "node $NODE_NAME Ready" "$WAIT_NODE" kubelet node_ready
  say "node $NODE_NAME is Ready"
  local p
  for p in etcd containerd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy; do
    alive "$p"
  done
  wait_for "the default ServiceAccount in namespace default" 30 kube-controller-manager \
    kubectl get serviceaccount default -n default
  say "the default ServiceAccount is there"
  verify
  echo "AGENTCTL_TEST_KUBECONFIG=$DIR/kubeconfig" >"$DIR/env"
  say "up in $((SECONDS - t0)) s: node $NODE_NAME, kubectl: $CACHE/kubectl --kubeconfig $DIR/kubeconfig"
  cat "$DIR/env"
}

# make_storage: the storage class and its volumes, made ahead: hostPath
# directories under DIR/pv, emptied and made available again by the
# controller manager when their claim goes (reclaim policy Recycle).
make_storage() {
  local i manifest
  manifest="apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: $STORAGE_CLASS
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: Immediate
reclaimPolicy: Retain
"
  for i in $(seq -w 1 "$PV_COUNT"); do
    mkdir -p "$DIR/pv/$i"
    chmod 0777 "$DIR/pv/$i"
    manifest+="---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: agentctl-test-$i
  labels: {agentctl.test/pool: \"true\"}
spec:
  storageClassName: $STORAGE_CLASS
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Recycle
  hostPath: {path: $DIR/pv/$i, type: Directory}
"
  done
  echo "$manifest" | kubectl apply -f - >"$DIR/logs/storage.log" 2>&1 ||
    die "creating the storage class and volumes failed: $(cat "$DIR/logs/storage.log")"
}

# verify: what the tests rely on, end to end, in a namespace of its own
# that is deleted after: a Pod of IMAGE on a claim of STORAGE_CLASS, exec
# (exit code, stdin), port-forward, and a Service's ClusterIP from here.
verify() {
  local ns=agentctl-check out log=$DIR/logs/verify.log
  : >"$log"
  mkdir -p "$DIR/pv/check"
  kubectl apply -f - >>"$log" 2>&1 <<EOF || die "creating the check objects failed: $(cat "$log")"
apiVersion: v1
kind: Namespace
metadata: {name: $ns}
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: agentctl-check
  labels: {agentctl.test/check: "true"}
spec:
  # Only the check's claim may have it, whatever else is claiming.
  claimRef: {namespace: $ns, name: check}
  storageClassName: $STORAGE_CLASS
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  hostPath: {path: $DIR/pv/check, type: Directory}
EOF
  # The volume is known to the binder before the claim comes, else the
  # claim waits for the binder's next full sync (15 s).
  kubectl wait pv/agentctl-check --for=jsonpath='{.status.phase}'=Available --timeout=30s >>"$log" 2>&1 ||
    die "the check volume did not become Available in 30 s; $(tail_log "$log")"
  kubectl apply -f - >>"$log" 2>&1 <<EOF || die "creating the check objects failed: $(cat "$log")"
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: check, namespace: $ns}
spec:
  storageClassName: $STORAGE_CLASS
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
  selector: {matchLabels: {agentctl.test/check: "true"}}
---
apiVersion: v1
kind: Pod
metadata: {name: check, namespace: $ns, labels: {app: check}}
spec:
  terminationGracePeriodSeconds: 0
  containers:
  - name: main
    image: $IMAGE
    command: ["/bin/sh", "-c", "mkdir -p /www && echo agentctl-check >/www/index.html && exec httpd -f -p 8080 -h /www"]
    ports: [{containerPort: 8080}]
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: check}
---
apiVersion: v1
kind: Service
metadata: {name: check, namespace: $ns}
spec:
  selector: {app: check}
  ports: [{port: 80, targetPort: 8080}]
EOF
  if ! kubectl wait -n "$ns" --for=condition=Ready pod/check --timeout="${WAIT_POD}s" >>"$log" 2>&1; then
    die "the check Pod ($IMAGE) did not become Ready in ${WAIT_POD} s:
$(kubectl describe -n "$ns" pod/check 2>&1 | tail -n 20)
$(tail_log "$DIR/logs/kubelet.log")"
  fi
  [ "$(kubectl get -n "$ns" pvc check -o jsonpath='{.status.phase}')" = Bound ] ||
    die "the claim of class $STORAGE_CLASS is not Bound: $(kubectl describe -n "$ns" pvc check 2>&1 | tail -n 8)"

  say "check Pod Ready"
  # exec: exit codes and stdin.
  local rc=0
  kubectl exec -n "$ns" check -- sh -c 'exit 3' >>"$log" 2>&1 || rc=$?
  [ "$rc" = 3 ] || die "kubectl exec of 'exit 3' returned $rc, not 3; $(tail_log "$log")"
  out=$(echo stdin-ok | kubectl exec -i -n "$ns" check -- sh -c 'cat >/data/f && cat /data/f' 2>>"$log") ||
    die "kubectl exec -i failed; $(tail_log "$log")"
  [ "$out" = stdin-ok ] || die "kubectl exec -i echoed '$out', not 'stdin-ok'"
  [ "$(cat "$DIR/pv/check/f" 2>/dev/null)" = stdin-ok ] ||
    die "a file written to the claim's mount is not in its volume's directory $DIR/pv/check"

  # port-forward, on a port kubectl picks.
  # (The program itself, not the kubectl function, so that $! is its pid.)
  "$CACHE/kubectl" --kubeconfig "$DIR/kubeconfig" port-forward -n "$ns" pod/check :8080 \
    >"$DIR/logs/port-forward.log" 2>&1 &
  local pf=$! port="" i
  for i in $(seq 40); do
    port=$(sed -n 's/^Forwarding from 127.0.0.1:\([0-9]*\) .*/\1/p' "$DIR/logs/port-forward.log")
    [ -n "$port" ] && break
    sleep 0.25
  done
  out=""
  [ -n "$port" ] && out=$(curl -sf --max-time 5 "http://127.0.0.1:$port/" 2>>"$log") || true
  kill "$pf" 2>/dev/null || true
  wait "$pf" 2>/dev/null || true
  [ "$out" = agentctl-check ] ||
    die "kubectl port-forward did not reach the Pod (got '$out'); $(tail_log "$DIR/logs/port-forward.log")"

  # The Service's ClusterIP, from this host, through kube-proxy's rules.
  local ip
  ip=$(kubectl get -n "$ns" service check -o jsonpath='{.spec.clusterIP}')
  local deadline=$((SECONDS + 20))
  until out=$(curl -sf --max-time 2 "http://$ip/" 2>/dev/null) && [ "$out" = agentctl-check ]; do
    [ "$SECONDS" -lt "$deadline" ] ||
      die "the Service's ClusterIP $ip:80 did not answer from this host in 20 s; $(tail_log "$DIR/logs/kube-proxy.log")"
    sleep 0.25
  done

  say "check Service answered"
  # The check's objects go; the namespace finishes going in the
  # background (the namespace controller takes seconds over it).
  kubectl delete -n "$ns" pod/check service/check --timeout=30s >>"$log" 2>&1 &&
    kubectl delete -n "$ns" pvc/check --timeout=30s >>"$log" 2>&1 &&
    kubectl delete pv agentctl-check --timeout=30s >>"$log" 2>&1 &&
    kubectl delete namespace "$ns" --wait=false >>"$log" 2>&1 ||
    die "deleting the check objects failed; $(tail_log "$log")"
  rm -rf "$DIR/pv/check"
  say "checked: Pod of $IMAGE, exec, stdin, port-forward, Service $ip, claim of $STORAGE_CLASS"
}

# ---------------------------------------------------------------- down

# our_pids [PROGRAM...]: the processes of this cluster (of the programs
# named, else of all of its programs), found by their program and DIR in
# their command line, whether or not their pid files are there.
our_pids() {
  local p exe cmd programs=" ${*:-kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl etcd containerd containerd-shim-runc-v2} "
  for p in /proc/[0-9]*; do
    exe=$(readlink "$p/exe" 2>/dev/null) || continue
    case $programs in *" ${exe##*/} "*) ;; *) continue ;; esac
    cmd=$(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) || continue
    case $cmd in *"$DIR/"*) echo "${p#/proc/}" ;; esac
  done
}

# live DIR: whether the cluster in DIR is up: its API server, etcd or
# kubelet runs. (Pods or shims left running without them are a stale
# cluster's.)
live() { [ -n "$(DIR=$1 our_pids kube-apiserver etcd kubelet)" ]; }

# gone PID: whether PID has exited. The processes of up outlive it and
# are reaped by init, maybe late: a zombie counts as gone.
gone() {
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 0
  [ -z "$state" ] || [ "$state" = Z ]
}

# stop_pid NAME PID: TERM, up to 10 s, then KILL.
stop_pid() {
  local name=$1 pid=$2 i
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 100); do
    gone "$pid" && return 0
    sleep 0.1
  done
  say "$name ($pid) did not stop in 10 s; killing it"
  kill -KILL "$pid" 2>/dev/null || true
}

stop_named() {
  local name=$1 pid
  pid=$(cat "$DIR/run/$name.pid" 2>/dev/null) || return 0
  [ -n "$pid" ] && stop_pid "$name" "$pid"
  rm -f "$DIR/run/$name.pid"
  say "stopped $name"
}

# kubepods_cgroups: the kubelet's cgroups in each cgroup v1 controller
# (and the unified hierarchy, if mounted), deepest first.
kubepods_cgroups() {
  local d
  for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [ -d "$d" ] && find "$d" -depth -type d
  done
  return 0
}

# other_live_cluster: the directory of a live cluster other than DIR's,
# if the machine has one (its node interface names it, and processes of
# its own run). Its pods, cgroups, bridge and rules are then not DIR's.
other_live_cluster() {
  local owner
  ip link show "$NODE_IF" >/dev/null 2>&1 || return 0
  owner=$(ip -o link show "$NODE_IF" | sed -n 's/.* alias \(.*\)$/\1/p')
  if [ -n "$owner" ] && [ "$owner" != "$DIR" ] && live "$owner"; then
    echo "$owner"
  fi
  return 0
}

down() {
  [ "$(id -u)" = 0 ] || die "down needs root"
  local problems=() other
  other=$(other_live_cluster)
  [ -z "$other" ] ||
    say "a cluster is up in $other: only what is DIR's own ($DIR: its processes, mounts and files) is removed, not the machine's cluster state"

  # 1. The kubelet first, so it restarts nothing; then kube-proxy.
  stop_named kubelet
  stop_named kube-proxy

  # 2. The pods, through our containerd while it runs.
  if running containerd && [ -S "$DIR/run/containerd.sock" ]; then
    local id i
    for id in $(ctr tasks ls -q 2>/dev/null); do
      ctr tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
    done
    for i in $(seq 20); do
      [ -z "$(ctr tasks ls 2>/dev/null | awk 'NR>1 && $3!="STOPPED"')" ] && break
      sleep 0.25
    done
    for id in $(ctr tasks ls -q 2>/dev/null); do
      ctr tasks delete -f "$id" >/dev/null 2>&1 || true
    done
    say "pods stopped"
  fi

  # 3. The rest, then anything of DIR's still running (a lost pid file,
  # a shim whose containerd died).
  local name pid
  for name in kube-scheduler kube-controller-manager kube-apiserver containerd etcd; do
    stop_named "$name"
  done
  for pid in $(our_pids); do
    stop_pid "$(readlink "/proc/$pid/exe" 2>/dev/null || echo "process")" "$pid"
  done
  say "processes stopped"

  # 4. What the machine has of a cluster: the containers' processes and
  # cgroups, network, iptables.
  [ -n "$other" ] || down_machine

  # 5. Mounts under DIR (pod volumes, container root filesystems, shm,
  # network namespaces), deepest first.
  local m
  while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || problems+=("could not unmount $m")
  done < <(awk -v d="$DIR/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r)

  # 6. Files of DIR's pods outside it: the kubelet's links to container
  # logs, the CNI result cache of the pod sandboxes containerd kept under
  # DIR (this network's and the loopback's entries).
  local l sb
  if [ -d /var/log/containers ]; then
    for l in /var/log/containers/*; do
      [ -L "$l" ] && case $(readlink "$l") in "$DIR/"*) rm -f "$l" ;; esac
    done
  fi
  for sb in "$DIR"/containerd/root/io.containerd.grpc.v1.cri/sandboxes/*; do
    [ -d "$sb" ] && rm -f /var/lib/cni/results/*-"${sb##*/}"-*
  done

  # 7. What up made outside DIR and left empty.
  [ -n "$other" ] || down_outside

  # 8. DIR itself.
  if [ -e "$DIR" ]; then
    if awk -v d="$DIR/" 'index($5, d) == 1 {found=1} END {exit !found}' /proc/self/mountinfo; then
      problems+=("$DIR still has mounts; not removed")
    else
      rm -rf "$DIR" || problems+=("could not remove $DIR")
    fi
  fi
  if [ ${#problems[@]} -gt 0 ]; then
    printf 'cluster.sh: down: %s\n' "${problems[@]}" >&2
    exit 1
  fi
  say "down: $DIR removed"
}

# down_machine: the cluster's state that is the machine's, not DIR's
# (adds to down's problems).
down_machine() {
  # The containers' processes, if a shim died before them, and the
  # kubelet's cgroups.
  local cg pid i
  for cg in $(kubepods_cgroups); do
    [ -f "$cg/cgroup.procs" ] || continue
    for pid in $(cat "$cg/cgroup.procs"); do kill -KILL "$pid" 2>/dev/null || true; done
  done
  sleep 0.2
  for cg in $(kubepods_cgroups); do
    rmdir "$cg" 2>/dev/null || true
  done
  for cg in $(kubepods_cgroups); do
    for i in $(seq 20); do
      [ -d "$cg" ] || break
      rmdir "$cg" 2>/dev/null || sleep 0.25
    done
    [ -d "$cg" ] && problems+=("cgroup $cg could not be removed (holds: $(cat "$cg/cgroup.procs" 2>/dev/null | tr '\n' ' '))")
  done

  # Network: the pods' veths and bridge, the node's interface, and the
  # iptables rules of kube-proxy, the kubelet and the CNI plugins.
  local l owner
  for l in $(ip -o link show master "$BRIDGE_IF" 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//'); do
    ip link del "$l" 2>/dev/null || true
  done
  ip link del "$BRIDGE_IF" 2>/dev/null || true
  if ip link show "$NODE_IF" >/dev/null 2>&1; then
    owner=$(ip -o link show "$NODE_IF" | sed -n 's/.* alias \(.*\)$/\1/p')
    if [ -z "$owner" ] || [ "$owner" = "$DIR" ]; then
      ip link del "$NODE_IF"
    else
      problems+=("left $NODE_IF: it names the cluster in $owner (take that one down: $0 down $owner)")
    fi
  fi
  if [ -x "$CACHE/kube-proxy" ]; then
    "$CACHE/kube-proxy" --cleanup >/dev/null 2>&1 || true
  fi
  clean_iptables iptables
  clean_iptables ip6tables
  say "cgroups, network and iptables rules removed"
}

# down_outside: what up made outside DIR, once empty: the directories of
# OUTSIDE_DIRS and the iptables tables that the kubelet and kube-proxy
# added (left with no rules by down_machine).
down_outside() {
  rm -f /var/lib/cni/results/"$CNI_NETWORK"-*
  [ -f "$DIR/run/dirs-before" ] || return 0
  # The kubelet's device-plugin socket, if this kubelet made it (there
  # was no such directory before up).
  grep -qxF /var/lib/kubelet/device-plugins "$DIR/run/dirs-before" ||
    rm -f /var/lib/kubelet/device-plugins/kubelet.sock
  local d
  for d in "${OUTSIDE_DIRS[@]}"; do
    grep -qxF "$d" "$DIR/run/dirs-before" || rmdir "$d" 2>/dev/null || true
  done
  if [ -f "$DIR/run/tables-before" ] && command -v nft >/dev/null; then
    local family table
    while read -r _ family table; do
      grep -qxF "table $family $table" "$DIR/run/tables-before" && continue
      case $family:$table in
        ip:filter | ip:nat | ip:mangle | ip:raw | ip6:filter | ip6:nat | ip6:mangle | ip6:raw) ;;
        *) continue ;;
      esac
      # Only a table of built-in chains and no rules.
      if ! nft list table "$family" "$table" 2>/dev/null | grep -qvE '^\s*(table|chain|type|policy|#|\}|$)'; then
        nft delete table "$family" "$table" 2>/dev/null || true
      fi
    done < <(nft list tables 2>/dev/null)
  fi
}

# clean_iptables CMD: removes the chains named KUBE-* and CNI-* from every
# table, and the rules elsewhere that jump to them, in one atomic
# iptables-restore per table. Only this cluster makes such chains here.
clean_iptables() {
  local cmd=$1 table rules
  command -v "$cmd-save" >/dev/null || return 0
  for table in filter nat mangle raw; do
    rules=$("$cmd-save" -t "$table" 2>/dev/null | awk '
      /^:(KUBE-|CNI-)/ { chains[++n] = substr($1, 2); next }
      /^-A / && $2 !~ /^(KUBE-|CNI-)/ && / -j (KUBE-|CNI-)/ { sub(/^-A /, "-D "); print; next }
      END {
        for (i = 1; i <= n; i++) print "-F " chains[i]
        for (i = 1; i <= n; i++) print "-X " chains[i]
      }') || continue
    [ -n "$rules" ] || continue
    printf '*%s\n%s\nCOMMIT\n' "$table" "$rules" | "$cmd-restore" --noflush ||
      say "removing the KUBE-/CNI- chains of $cmd table $table failed"
  done
}

# ---------------------------------------------------------------- main

usage() {
  echo "usage: $0 up DIR | down DIR | build" >&2
  exit 2
}

main() {
  case ${1:-} in
    up | down)
      [ $# -eq 2 ] || usage
      case $2 in
        /*) DIR=$2 ;;
        *) DIR=$(pwd)/$2 ;;
      esac
      DIR=${DIR%/}
      case $DIR in
        *[[:space:]]* | "" | / | /tmp | /work | /root) die "DIR '$2' is not a directory of its own" ;;
      esac
      if [ "$1" = up ]; then up; else down; fi
      ;;
    build)
      [ $# -eq 1 ] || usage
      need_packages
      build
      echo "$CACHE"
      ;;
    *) usage ;;
  esac
}

# Sourced (to try one function by hand), it only defines them.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  main "$@"
fi
