#!/usr/bin/env bash
# Whole-command timings for docs/benchmarks-sandbox.md: `agentctl apply`
# of a 5,000-file / 200 MB local_dir into a local sandbox against
# `cp -a` of the same tree, and a snapshot + a restore by `agentctl apply`
# against `tar -c` + `tar -x` of the same workspace. Interleaved (the
# order alternates every round), every command writes into a directory
# never used before, nothing is deleted until the end, and each timed
# command starts after a `sync` (hyperfine --prepare, not timed).
#
#   usage: bench/files.sh AGENTCTL WORKDIR [ROUNDS [AGENTCTL_B]]
#
# With AGENTCTL_B (another build, e.g. before a change), B's apply of a
# new tree, snapshot and restore (apply_create_b, apply_snapshot_b,
# apply_restore_b, on a state of their own) are timed in the same rounds,
# in turn with A's and the baselines.
#   needs: bash, hyperfine, jq, GNU cp and tar, and about 1.7 GB of
#   free space per round in WORKDIR, 2.3 GB with AGENTCTL_B (nothing is
#   deleted until the end; remove WORKDIR afterwards)
set -euo pipefail
agentctl=$(realpath "${1:?agentctl binary}")
work=${2:?work directory (on the file system to measure)}
rounds=${3:-10}
agentctl_b=${4:+$(realpath "$4")}
mkdir -p "$work"
work=$(realpath "$work")
per_round=1700
[ -n "$agentctl_b" ] && per_round=2300
need_kb=$(( (rounds * per_round + 400) * 1024 ))
free_kb=$(df -Pk "$work" | awk 'NR == 2 {print $4}')
if [ "$free_kb" -lt "$need_kb" ]; then
  echo "$work has $((free_kb / 1024)) MB free; $rounds rounds need about $((need_kb / 1024)) MB: free some space or run fewer rounds" >&2
  exit 1
fi
cfg=$work/cfg
times=$work/times
mkdir -p "$cfg" "$times"

# The tree: 5,000 files of 20-60 KB of random bytes (200 MB in all) in
# 100 directories of 5 subdirectories, as BenchmarkTree's.
if [ ! -d "$cfg/repo" ]; then
  RANDOM=1
  for i in $(seq 0 4999); do
    d=$cfg/repo/d$(printf %03d $((i / 50)))/s$((i % 5))
    mkdir -p "$d"
    head -c $((20480 + (RANDOM * 32768 + RANDOM) % 40960)) /dev/urandom > "$d/f$(printf %04d "$i").dat"
  done
  sleep 3 # past the digest cache's racy window
fi
cat > "$cfg/main.hcl" <<'HCL'
provider "local" {}
provider "scripted" {
  script "noop" {
    reply { text = "done" }
  }
}
manifest "tree" {
  local_dir "repo" { source = "./repo" }
}
sandbox "box" {
  provider = provider.local
  manifest = manifest.tree
}
agent "noop" {
  model    = "scripted"
  provider = provider.scripted
  sandbox  = sandbox.box
}
variable "runs" {
  type    = set(string)
  default = ["noop"]
}
run "noop" {
  for_each = var.runs
  agent = agent.noop
  input = "nothing"
}
HCL

# time1 NAME COMMAND...: one timed run, appended to $times/NAME, after a
# sync (and the warm-up below). cold1 is time1 with the digest cache removed first (a small
# file), so that the apply of a new tree hashes it once, as the first
# apply of a tree does; the snapshot and restore applies keep the cache,
# as a user's next applies do (the first apply wrote it).
#
# The preparation also writes and deletes a file of warm_mb MB in
# /dev/shm (BENCH_WARM_MB, 0 to skip): on a virtual machine whose memory
# balloon hands free pages back to the host (free page reporting), a page
# freed long ago costs a fault in the host when it is touched again, and
# a command writing 200 MB into new files ran 3-5x slower once the pages
# freed recently were used up (cp -a 0.13 s, then 0.62 s); memory freed
# just before the command is reused without that. Every command gets
# the same preparation.
warm_mb=${BENCH_WARM_MB:-600}
prepare="sync"
if [ "$warm_mb" -gt 0 ]; then
  prepare="sh -c 'sync; head -c ${warm_mb}M /dev/zero > /dev/shm/agentctl-bench-warm; rm -f /dev/shm/agentctl-bench-warm'"
fi
time1() {
  local name=$1
  shift
  hyperfine -N -r 1 --style none --prepare "$prepare" \
    --export-json "$work/h.json" "$*" > /dev/null
  jq -r '.results[0].times[0]' "$work/h.json" >> "$times/$name"
}
cold1() {
  rm -f "$cfg/.agentctl/cache/digests.json"
  time1 "$@"
}

# rotate K CMD...: runs the commands in turn, starting with the K-th
# (mod their number), so that each round puts them in another order.
rotate() {
  local k=$1
  shift
  local cmds=("$@") i
  for ((i = 0; i < ${#cmds[@]}; i++)); do
    "${cmds[(k + i) % ${#cmds[@]}]}"
  done
}

# workspace STATEDIR: the workspace directory of sandbox.box.
workspace() { jq -r '.sandboxes["sandbox.box"].session.data.dir' "$1/state.json"; }

for r in $(seq "$rounds"); do
  run=$work/run$r
  mkdir -p "$run/cp" "$run/tar/out"
  # A fresh state: apply creates the sandbox and materializes the tree
  # (its plan hashes the tree, the copy does not hash it again); no run.
  # The sandboxes' workspaces are beside the configuration
  # ($cfg/.agentctl/sandboxes), each in a new directory.
  a() { cold1 apply_create "$agentctl" -chdir="$cfg" apply -auto-approve -no-color -var 'runs=[]' -state="$run/state/state.json"; }
  c() { cold1 cp_a cp -a "$cfg/repo" "$run/cp/repo"; }
  if [ -n "$agentctl_b" ]; then
    b() { cold1 apply_create_b "$agentctl_b" -chdir="$cfg" apply -auto-approve -no-color -var 'runs=[]' -state="$run/state_b/state.json"; }
    rotate "$r" a b c
    # Each build's digest of the tree in the cache, as after its own
    # apply (the other build's cold apply removed the cache; two builds
    # with different digest algorithms keep an entry each), untimed.
    for st in state state_b; do
      bin=$agentctl
      [ "$st" = state_b ] && bin=$agentctl_b
      "$bin" -chdir="$cfg" plan -no-color -var 'runs=[]' -state="$run/$st/state.json" > /dev/null
    done
  else
    rotate "$r" a c
  fi
  ws=$(workspace "$run/state")
  # A run (one scripted turn) and the snapshot that follows it, against
  # tar -c of the same workspace.
  s() { time1 apply_snapshot "$agentctl" -chdir="$cfg" apply -auto-approve -no-color -state="$run/state/state.json"; }
  t() { time1 tar_c tar -cf "$run/tar/t.tar" -C "$ws" .; }
  # and against tar -c with the durability a snapshot has: the archive's
  # data on the disk (fdatasync) before it counts.
  u() { time1 tar_c_sync "sh -c 'tar -cf $run/tar/u.tar -C $ws . && sync -d $run/tar/u.tar'"; }
  # The sandbox is lost (its directory moved away, not deleted): apply
  # restores it from the snapshot, against tar -x of the same tree.
  x() { mv "$(dirname "$ws")" "$run/lost"; time1 apply_restore "$agentctl" -chdir="$cfg" apply -auto-approve -no-color -state="$run/state/state.json"; }
  y() { time1 tar_x tar -xf "$run/tar/t.tar" -C "$run/tar/out"; }
  if [ -n "$agentctl_b" ]; then
    ws_b=$(workspace "$run/state_b")
    sb() { time1 apply_snapshot_b "$agentctl_b" -chdir="$cfg" apply -auto-approve -no-color -state="$run/state_b/state.json"; }
    xb() { mv "$(dirname "$ws_b")" "$run/lost_b"; time1 apply_restore_b "$agentctl_b" -chdir="$cfg" apply -auto-approve -no-color -state="$run/state_b/state.json"; }
    rotate "$r" s sb t u
    rotate "$r" x xb y
  else
    rotate "$r" s t u
    rotate "$r" x y
  fi
done

printf '%-16s %8s %8s %8s  (seconds, %d rounds)\n' command median min max "$rounds"
for f in apply_create ${agentctl_b:+apply_create_b} cp_a apply_snapshot ${agentctl_b:+apply_snapshot_b} tar_c tar_c_sync apply_restore ${agentctl_b:+apply_restore_b} tar_x; do
  sort -g "$times/$f" | awk -v n="$f" '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2; printf "%-16s %8.3f %8.3f %8.3f\n", n, m, v[1], v[NR]}'
done
