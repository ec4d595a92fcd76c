#!/usr/bin/env bash
# Whole-command benchmark: the Kubernetes sandbox provider against kubectl
# on the same cluster (test/kubernetes/cluster.sh up DIR starts one),
# interleaved, the order alternating every round. Two measures:
#
#   start  a Pod of agentctl.test/busybox:1 created and a first exec into
#          it: `kubectl run` + `kubectl wait` Ready + `kubectl exec -- true`
#          against `agentctl apply` of a one-sandbox configuration +
#          `agentctl exec sandbox.x -- true`
#   exec   one more exec into a running Pod: `kubectl exec POD -- true`
#          against `agentctl exec sandbox.x -- true`
#
# and prints the median, min and max wall time in ms of each.
#
#   bench/kubernetes.sh [-r ROUNDS] [-e EXECS] AGENTCTL_BINARY KUBECONFIG
#
# ROUNDS (default 10) start rounds, EXECS (default 40) exec rounds, after
# two untimed warm-up rounds each. kubectl is $KUBECTL, else the one on
# PATH, else the one cluster.sh built. Everything runs in a namespace of
# its own, deleted at the end.
set -euo pipefail
rounds=10
execs=40
while getopts r:e: opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    e) execs=$OPTARG ;;
    *) echo "usage: $0 [-r ROUNDS] [-e EXECS] AGENTCTL_BINARY KUBECONFIG" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -eq 2 ] || { echo "usage: $0 [-r ROUNDS] [-e EXECS] AGENTCTL_BINARY KUBECONFIG" >&2; exit 2; }
agentctl=$(realpath "$1")
kubeconfig=$(realpath "$2")
[ -x "$agentctl" ] || { echo "$1 is not an executable agentctl" >&2; exit 1; }
[ -f "$kubeconfig" ] || { echo "no kubeconfig at $2 (test/kubernetes/cluster.sh up DIR writes DIR/kubeconfig)" >&2; exit 1; }
root=$(cd "$(dirname "$0")/.." && pwd)

if [ -n "${KUBECTL:-}" ]; then
  kubectl_bin=$KUBECTL
elif command -v kubectl >/dev/null; then
  kubectl_bin=$(command -v kubectl)
else
  kubectl_bin=$(bash "$root/test/kubernetes/cluster.sh" build)/kubectl
fi
image=agentctl.test/busybox:1
ns=agentctl-bench-$$
work=$(mktemp -d "${TMPDIR:-/tmp}/agentctl-bench-k8s.XXXXXX")
k() { "$kubectl_bin" --kubeconfig "$kubeconfig" -n "$ns" "$@"; }

# ---------------------------------------------------------------- the agentctl side
#
# agentctl_config DIR writes DIR/main.hcl, a configuration of one sandbox
# "x" of the Kubernetes provider, with $image in namespace $ns of the
# cluster of $kubeconfig. The timed commands are agentctl_start and
# agentctl_exec.
agentctl_config() {
  local dir=$1
  mkdir -p "$dir"
  cat >"$dir/main.hcl" <<HCL
provider "kubernetes" {
  config_path = "$kubeconfig"
  namespace   = "$ns"
}

sandbox "x" {
  provider = provider.kubernetes
  image    = "$image"
  on_exit  = "keep" # running for the timed execs, as kubectl's Pod
}
HCL
}

# agentctl_start DIR: timed, the start measure (apply, then a first exec).
agentctl_start() {
  (cd "$1" && "$agentctl" apply -auto-approve >/dev/null && "$agentctl" exec sandbox.x -- true >/dev/null)
}

# agentctl_exec DIR: timed, the exec measure.
agentctl_exec() {
  (cd "$1" && "$agentctl" exec sandbox.x -- true >/dev/null)
}

# agentctl_stop DIR: untimed, after each start round and at the end.
agentctl_stop() {
  (cd "$1" && "$agentctl" destroy -auto-approve >/dev/null 2>&1) || true
}

# ---------------------------------------------------------------- the kubectl side

kubectl_start() {
  k run "$1" --image "$image" --restart Never --command -- sleep 3600 >/dev/null &&
    k wait --for condition=Ready "pod/$1" --timeout 60s >/dev/null &&
    k exec "$1" -- true
}

kubectl_exec() { k exec "$1" -- true; }

kubectl_stop() { k delete pod "$1" --grace-period 1 --wait=false >/dev/null 2>&1 || true; }

# ---------------------------------------------------------------- rounds

cleanup() {
  for d in "$work"/start-* "$work/exec"; do [ -d "$d" ] && agentctl_stop "$d"; done
  k delete pods --all --grace-period 1 --wait=false >/dev/null 2>&1 || true
  "$kubectl_bin" --kubeconfig "$kubeconfig" delete namespace "$ns" --wait=false >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
"$kubectl_bin" --kubeconfig "$kubeconfig" create namespace "$ns" >/dev/null
# Pods need the namespace's default ServiceAccount, made a moment after it.
for _ in $(seq 50); do
  k get serviceaccount default >/dev/null 2>&1 && break
  sleep 0.2
done

# timed FILE COMMAND...: appends COMMAND's wall time in µs to FILE (when
# the round counts), and fails loudly if it fails.
timed() {
  local file=$1 start end
  shift
  start=$(date +%s%N)
  if ! "$@" >/dev/null; then
    echo "failed: $*" >&2
    exit 1
  fi
  end=$(date +%s%N)
  ((round >= 0)) && echo $(((end - start) / 1000)) >>"$file"
  return 0
}

report() {
  sort -n "$2" | awk -v c="$1" '{v[NR] = $1} END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%-44s median %8.1f ms  (min %.1f, max %.1f, n %d)\n", c, m / 1000, v[1] / 1000, v[NR] / 1000, NR}'
}

: >"$work/start-kubectl" >"$work/start-agentctl" >"$work/exec-kubectl" >"$work/exec-agentctl"
# start: each round makes a new Pod (and a new agentctl directory).
for ((round = -2; round < rounds; round++)); do
  pod=start-$((round + 2))
  sides=(kubectl agentctl)
  ((round % 2)) && sides=(agentctl kubectl)
  for side in "${sides[@]}"; do
    if [ "$side" = kubectl ]; then
      timed "$work/start-kubectl" kubectl_start "$pod"
      kubectl_stop "$pod"
    else
      dir=$work/start-$((round + 2))
      agentctl_config "$dir"
      timed "$work/start-agentctl" agentctl_start "$dir"
      agentctl_stop "$dir"
      rm -rf "$dir"
    fi
  done
done

# exec: one Pod (and one sandbox) kept running.
kubectl_start exec >/dev/null
agentctl_config "$work/exec"
agentctl_start "$work/exec"
for ((round = -2; round < execs; round++)); do
  sides=(kubectl agentctl)
  ((round % 2)) && sides=(agentctl kubectl)
  for side in "${sides[@]}"; do
    if [ "$side" = kubectl ]; then
      timed "$work/exec-kubectl" kubectl_exec exec
    else
      timed "$work/exec-agentctl" agentctl_exec "$work/exec"
    fi
  done
done

report "start: kubectl run + wait + exec" "$work/start-kubectl"
report "start: agentctl apply + exec" "$work/start-agentctl"
report "exec: kubectl exec POD -- true" "$work/exec-kubectl"
report "exec: agentctl exec sandbox.x -- true" "$work/exec-agentctl"
