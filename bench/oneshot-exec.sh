#!/usr/bin/env bash
# Whole-command benchmark: one-shot `agentctl exec sandbox.x -- true` in a
# namespaced local sandbox against `bwrap --unshare-all --ro-bind / / true`
# (bubblewrap from Debian's packages), interleaved: each round runs every
# command once, in turn. Prints the median, min and max wall time in ms.
#
#   bench/oneshot-exec.sh [-r ROUNDS] [AGENTCTL_BINARY ...]
#
# Without binaries it builds agentctl from this checkout. Give several
# binaries (say, two builds) to compare them in the same rounds. Needs
# bwrap on PATH (apt-get install bubblewrap) and user namespaces.
set -euo pipefail
rounds=40
while getopts r: opt; do
  case $opt in
    r) rounds=$OPTARG ;;
    *) echo "usage: $0 [-r ROUNDS] [AGENTCTL_BINARY ...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/agentctl-oneshot.XXXXXX")
trap 'cd /; [ -x "${bins[0]}" ] && (cd "$work/cfg" && "${bins[0]}" destroy -auto-approve >/dev/null 2>&1); rm -rf "$work"' EXIT
bins=("$@")
if [ ${#bins[@]} -eq 0 ]; then
  go build -C "$root" -o "$work/agentctl" ./cmd/agentctl
  bins=("$work/agentctl")
fi
command -v bwrap >/dev/null || { echo "bwrap is not on PATH (apt-get install bubblewrap)" >&2; exit 1; }
mkdir -p "$work/cfg"
cat >"$work/cfg/main.hcl" <<'HCL'
provider "local" {}

manifest "m" {
  file "hello.txt" {
    content = "hi"
  }
}

sandbox "x" {
  provider = provider.local
  manifest = manifest.m
}
HCL
cd "$work/cfg"
"${bins[0]}" apply -auto-approve >/dev/null
cmds=()
for b in "${bins[@]}"; do cmds+=("$b exec sandbox.x -- true"); done
cmds+=("bwrap --unshare-all --ro-bind / / true")
for ((i = 0; i < ${#cmds[@]}; i++)); do : >"$work/t$i"; done
for ((r = -5; r < rounds; r++)); do
  for ((i = 0; i < ${#cmds[@]}; i++)); do
    start=$(date +%s%N)
    ${cmds[$i]} >/dev/null
    end=$(date +%s%N)
    ((r >= 0)) && echo $(((end - start) / 1000)) >>"$work/t$i"
  done
done
for ((i = 0; i < ${#cmds[@]}; i++)); do
  sort -n "$work/t$i" | awk -v c="${cmds[$i]}" '{v[NR] = $1} END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%-60s median %6.1f ms  (min %.1f, max %.1f)\n", c, m / 1000, v[1] / 1000, v[NR] / 1000}'
done
