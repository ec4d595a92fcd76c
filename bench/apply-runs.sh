#!/usr/bin/env bash
# Whole-command benchmark: agentctl apply of N runs of one scripted turn
# each, in layers of ten (run i takes the output of run i-10), against
# terraform apply of N terraform_data resources with the same edges.
#
#   bench/apply-runs.sh [-r REPS] [N ...]      (default: -r 5 1000)
#
# Each repetition applies into fresh directories generated before the
# timing starts, agentctl then terraform (interleaved), and the script
# prints the median, min and max wall and CPU (user+sys) seconds of each,
# and the ratio of the medians when terraform is on PATH (terraform init
# is run untimed; terraform_data needs no provider download). It builds
# agentctl from this checkout. Nothing needs a network or a key.
#
# With AGENTCTL_BENCH_PG set to a PostgreSQL connection string, agentctl
# keeps its state in the pg backend there (a schema per repetition,
# agentctl init run untimed) instead of the local .agentctl directory.
set -euo pipefail
reps=5
while getopts r: opt; do
  case $opt in
    r) reps=$OPTARG ;;
    *) echo "usage: $0 [-r REPS] [N ...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(1000)

root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/agentctl-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
go build -C "$root" -o "$work/agentctl" ./cmd/agentctl
have_tf=false
command -v terraform >/dev/null 2>&1 && have_tf=true

# gen N DIR writes DIR/a/main.hcl and DIR/t/main.tf.
gen() {
  local n=$1 dir=$2 r deps
  mkdir -p "$dir/a" "$dir/t"
  {
    if [ -n "${AGENTCTL_BENCH_PG:-}" ]; then
      printf 'agentctl {\n  backend "pg" {\n    conn_str    = env("AGENTCTL_BENCH_PG")\n    schema_name = "bench_%s"\n  }\n}\n\n' "$(basename "$dir" | tr -c 'a-z0-9\n' _)_$$"
    fi
    printf 'provider "scripted" {\n  script "a" {\n    reply { text = "done" }\n  }\n}\n\n'
    printf 'agent "a" {\n  provider     = provider.scripted\n  instructions = "Do it."\n}\n\n'
    for ((r = 0; r < n; r++)); do
      deps=""
      ((r >= 10)) && deps=" after \${run.r$((r - 10)).output}"
      printf 'run "r%d" {\n  agent = agent.a\n  input = "Task %d%s"\n}\n\n' "$r" "$r" "$deps"
    done
  } >"$dir/a/main.hcl"
  {
    for ((r = 0; r < n; r++)); do
      deps=""
      ((r >= 10)) && deps=" after \${terraform_data.r$((r - 10)).output}"
      printf 'resource "terraform_data" "r%d" {\n  input = "Task %d%s"\n}\n\n' "$r" "$r" "$deps"
    done
  } >"$dir/t/main.tf"
}

# timed LABEL DIR CMD... appends "wall cpu" to $work/LABEL.
timed() {
  local label=$1 dir=$2
  shift 2
  local TIMEFORMAT='%R %U %S' t
  t=$( { time (cd "$dir" && "$@" >/dev/null 2>"$work/$label.err"); } 2>&1 ) || {
    echo "$label failed:" >&2
    cat "$work/$label.err" >&2
    exit 1
  }
  awk '{printf "%s %.3f\n", $1, $2 + $3}' <<<"$t" >>"$work/$label"
}

# stats FILE COLUMN prints "median (min-max)" of a column.
stats() {
  sort -n -k"$2" "$1" | awk -v c="$2" '{v[NR] = $c} END {
    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
    printf "%.2f (%.2f-%.2f)", m, v[1], v[NR]}'
}
median() { sort -n -k"$2" "$1" | awk -v c="$2" '{v[NR] = $c} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

printf '%-6s %-28s %-28s %-28s %-28s %s\n' runs "agentctl wall s" "agentctl cpu s" "terraform wall s" "terraform cpu s" "ratio (wall)"
for n in "${sizes[@]}"; do
  rm -f "$work/a$n" "$work/t$n"
  for ((i = 0; i < reps; i++)); do
    d="$work/n$n-$i"
    gen "$n" "$d"
    if $have_tf; then
      (cd "$d/t" && terraform init -input=false >/dev/null 2>&1)
    fi
    if [ -n "${AGENTCTL_BENCH_PG:-}" ]; then
      (cd "$d/a" && "$work/agentctl" init -no-color >/dev/null)
    fi
    timed "a$n" "$d/a" "$work/agentctl" apply -auto-approve -no-color
    if $have_tf; then
      timed "t$n" "$d/t" terraform apply -auto-approve -input=false -no-color
    fi
  done
  if $have_tf; then
    ratio=$(awk -v a="$(median "$work/a$n" 1)" -v t="$(median "$work/t$n" 1)" 'BEGIN {printf "%.3fx", a / t}')
    printf '%-6s %-28s %-28s %-28s %-28s %s\n' "$n" "$(stats "$work/a$n" 1)" "$(stats "$work/a$n" 2)" "$(stats "$work/t$n" 1)" "$(stats "$work/t$n" 2)" "$ratio"
  else
    printf '%-6s %-28s %-28s %s\n' "$n" "$(stats "$work/a$n" 1)" "$(stats "$work/a$n" 2)" "(terraform not on PATH)"
  fi
done
