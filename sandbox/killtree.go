package sandbox

import "strings"

// ExecMarkerEnv is the environment variable every command a container or
// Pod provider runs carries; its random value identifies the command's
// whole process tree, so a timeout can kill all of it (KillTreeScript).
const ExecMarkerEnv = "AGENTCTL_EXEC"

// KillTreeScript, run by /bin/sh with the marker's value as $1, stops
// and kills every process whose environment holds ExecMarkerEnv with that
// value, repeating until none is left (a fork bomb gets a pass per
// generation); it exits 1 if some survive 200 passes. It uses only shell
// builtins (read, kill, test), so it works in images with nothing but a
// POSIX sh and never needs to fork, even when a fork bomb has used up the
// pids limit. sh, dash, bash and busybox ash all drop the NUL separators
// of /proc/PID/environ when reading it, which leaves the marker intact.
// Run it as the command's user, so /proc/PID/environ is readable without
// CAP_SYS_PTRACE.
const KillTreeScript = `m="` + ExecMarkerEnv + `=$1"
n=0
while [ $n -lt 200 ]; do
  found=
  for f in /proc/[0-9]*; do
    p=${f#/proc/}
    [ "$p" = "$$" ] && continue
    e=
    { while IFS= read -r l; do e="$e$l"; done; e="$e$l"; } <"$f/environ" 2>/dev/null
    case "$e" in *"$m"*) kill -STOP "$p" 2>/dev/null; found="$found $p" ;; esac
  done
  [ -z "$found" ] && exit 0
  kill -KILL $found 2>/dev/null
  n=$((n+1))
done
exit 1`

// ShellQuote quotes s as one word for a POSIX shell.
func ShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
