package fakedaytona

import (
	"os"
	"path/filepath"
	"strings"
)

// Daytona sandboxes run as a user with passwordless sudo, and agentctl
// uses it for a sandbox's manifest users: once as root, to run its
// account script, and then with -u NAME to run commands as one of them.
// The fake's sandboxes share the host, whose accounts a test must never
// change, so every command the fake runs finds the fake's own sudo first
// on its PATH. That sudo checks the call is what agentctl sends (sudo -n,
// then either the account script with its arguments, or -u NAME -- ...),
// records the accounts in a passwd and group file of the sandbox's own
// (Accounts), applies the script's workspace permissions, and runs a
// command as a recorded user with setpriv, which switches the ids only
// when the test process is root (the test then sees the user's ids; the
// names exist only in the fake's files). Any other use of sudo fails.

const fakeSudo = `#!/bin/sh
db=${FAKEDAYTONA_ACCOUNTS:?}
[ "${1:-}" = -n ] || { echo "fakedaytona sudo: agentctl must pass -n (never prompt for a password)" >&2; exit 2; }
shift
if [ "${1:-}" = -u ]; then
  user=$2; shift 2
  [ "${1:-}" = -- ] || { echo "fakedaytona sudo: expected -- after -u NAME" >&2; exit 2; }
  shift
  line=$(grep "^$user:" "$db/passwd" 2>/dev/null) || { echo "sudo: unknown user $user" >&2; exit 1; }
  uid=$(echo "$line" | cut -d: -f3)
  groups=$uid
  for g in $(grep -E "^[^:]*:[^:]*:[0-9]+:(.*,)?$user(,.*)?$" "$db/group" 2>/dev/null | cut -d: -f3); do groups="$groups,$g"; done
  exec setpriv --reuid="$uid" --regid="$uid" --groups="$groups" -- "$@"
fi
[ "${1:-}" = /bin/sh ] && [ "${2:-}" = -c ] && [ "${4:-}" = sh ] || { echo "fakedaytona sudo: unexpected root command: $*" >&2; exit 2; }
case $3 in *useradd*adduser*) ;; *) echo "fakedaytona sudo: the root command is not agentctl's account script" >&2; exit 2;; esac
shift 4
root=$1; shift
for a in "$@"; do
  set -- $a
  case $1 in
  u) grep -q "^$2:" "$db/passwd" 2>/dev/null || echo "$2:x:$3:$3::$root:/bin/sh" >> "$db/passwd"
     grep -q "^$2:" "$db/group" 2>/dev/null || echo "$2:x:$3:" >> "$db/group";;
  g) grep -q "^$2:" "$db/group" 2>/dev/null || echo "$2:x:$3:${4:-}" >> "$db/group";;
  *) echo "fakedaytona sudo: unexpected account $a" >&2; exit 2;;
  esac
done
chmod 1777 "$root"
d=$root
while [ "${d%/*}" != "$d" ]; do d=${d%/*}; [ -n "$d" ] || break; chmod o+x "$d"; done
`

// accountsDir returns the directory holding b's passwd and group files
// and the fake sudo, creating it on first use.
func (s *Server) accountsDir(b *fsb) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b.accounts != "" {
		return b.accounts
	}
	dir, err := os.MkdirTemp(s.internal, "accounts-")
	if err == nil {
		err = os.Mkdir(filepath.Join(dir, "bin"), 0o755)
	}
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "bin", "sudo"), []byte(fakeSudo), 0o755)
	}
	if err != nil {
		s.t.Errorf("fakedaytona: preparing the fake sudo: %v", err)
	}
	b.accounts = dir
	return dir
}

// commandEnv is the environment of a command the fake runs in b: the
// fake's own, with its sudo first on PATH, and extra.
func (s *Server) commandEnv(b *fsb, extra map[string]string) []string {
	dir := s.accountsDir(b)
	env := make([]string, 0, len(os.Environ())+len(extra)+2)
	path := filepath.Join(dir, "bin")
	for _, kv := range os.Environ() {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path += ":" + v
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "PATH="+path, "FAKEDAYTONA_ACCOUNTS="+dir)
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// Accounts returns the passwd and group files agentctl's account script
// left in sandbox id ("" when none).
func (s *Server) Accounts(id string) (passwd, group string) {
	s.mu.Lock()
	b := s.sandboxes[id]
	s.mu.Unlock()
	if b == nil || b.accounts == "" {
		return "", ""
	}
	p, _ := os.ReadFile(filepath.Join(b.accounts, "passwd"))
	g, _ := os.ReadFile(filepath.Join(b.accounts, "group"))
	return string(p), string(g)
}
