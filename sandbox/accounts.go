package sandbox

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Accounts are the users and groups a manifest declares (the SDK's
// Manifest.users and Manifest.groups), created in the sandbox when it is
// created, before the manifest is materialized. Every user has a private
// group of its own name whose gid is its uid (useradd -U); Groups are the
// supplementary groups. Ids are always set (the configuration assigns the
// ones a manifest leaves out).
type Accounts struct {
	Users  []User  `json:"users,omitempty"`
	Groups []Group `json:"groups,omitempty"`
}

// User is one declared user.
type User struct {
	Name string `json:"name"`
	UID  int    `json:"uid"`
}

// Group is one declared group and its members (user names).
type Group struct {
	Name  string   `json:"name"`
	GID   int      `json:"gid"`
	Users []string `json:"users,omitempty"`
}

// Empty reports whether no user or group is declared.
func (a Accounts) Empty() bool { return len(a.Users) == 0 && len(a.Groups) == 0 }

// User returns the declared user name.
func (a Accounts) User(name string) (User, bool) {
	for _, u := range a.Users {
		if u.Name == name {
			return u, true
		}
	}
	return User{}, false
}

// GroupsOf returns the supplementary groups of user name, by gid.
func (a Accounts) GroupsOf(name string) []Group {
	var gs []Group
	for _, g := range a.Groups {
		if slices.Contains(g.Users, name) {
			gs = append(gs, g)
		}
	}
	slices.SortFunc(gs, func(x, y Group) int { return x.GID - y.GID })
	return gs
}

// Lookup resolves user name for an exec request: its uid, its primary
// gid (its private group) and its supplementary gids. The error says the
// name is not declared.
func (a Accounts) Lookup(name string) (uid, gid int, groups []int, err error) {
	u, ok := a.User(name)
	if !ok {
		return 0, 0, nil, &UnknownUserError{Name: name}
	}
	groups = []int{u.UID}
	for _, g := range a.GroupsOf(name) {
		groups = append(groups, g.GID)
	}
	return u.UID, u.UID, groups, nil
}

// UnknownUserError says an exec request names a user the sandbox's
// manifest does not declare.
type UnknownUserError struct{ Name string }

func (e *UnknownUserError) Error() string {
	return fmt.Sprintf("user %q is not declared in the sandbox's manifest: add user %q {} to the manifest block", e.Name, e.Name)
}

// The range of ids a manifest may give its users and groups: 0 is root,
// 65534 and 65535 are nobody/nogroup and the "no id" value.
const (
	MinAccountID = 1
	MaxAccountID = 65533
	// FirstAutoID is the first id assigned to a user or group that sets
	// none, above the ids images commonly use for their own accounts
	// (ubuntu, node and daytona are 1000).
	FirstAutoID = 2000
)

// AccountsToolsMissing is the exit code of the provisioning script when
// the image has neither the shadow tools (useradd, groupadd) nor
// BusyBox's (adduser, addgroup).
const AccountsToolsMissing = 3

// AccountsConflict is the exit code of the provisioning script when a
// name or an id already belongs to another account in the image.
const AccountsConflict = 4

// AccountsScript is a POSIX shell script that creates the accounts, run
// as root inside a sandbox with its arguments (AccountsArgs): first the
// workspace root, then "u NAME UID" for each user and "g NAME GID
// MEMBER,..." for each group. It is idempotent: an account that exists
// with the same id is kept. It uses useradd/groupadd/usermod when the
// image has them, else BusyBox's adduser/addgroup; with neither it exits
// AccountsToolsMissing, and when a name or id is taken by another account
// AccountsConflict, with the reason on stderr. Users get no home
// directory of their own (the SDK's useradd -M: their home is the
// workspace root, as the default user's) and /bin/sh as their shell; the
// workspace root is made 1777, like /tmp, so every user can create files
// in it but not remove or replace another's, and the directories above it
// searchable (o+x) so the users can reach it.
const AccountsScript = `set -u
PATH="${PATH:-/bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
root=$1; shift
have() { command -v "$1" >/dev/null 2>&1; }
if have useradd && have groupadd && have usermod; then tools=shadow
elif have adduser && have addgroup; then tools=busybox
else
  missing=useradd
  have adduser || missing="useradd or adduser"
  echo "neither useradd/groupadd (shadow) nor adduser/addgroup (BusyBox) is installed; missing: $missing" >&2
  exit 3
fi
conflict() { echo "$1" >&2; exit 4; }
field() { # file name -> field 3 of the entry
  while IFS=: read -r n _ id _; do [ "$n" = "$2" ] && { echo "$id"; return 0; }; done < "$1"; return 1; }
owner() { # file id -> name of the entry with that id
  while IFS=: read -r n _ id _; do [ "$id" = "$2" ] && { echo "$n"; return 0; }; done < "$1"; return 1; }
mkgroup() { # name gid
  if id=$(field /etc/group "$1"); then
    [ "$id" = "$2" ] || conflict "group $1 already exists in the image with gid $id, not $2"
    return 0
  fi
  if n=$(owner /etc/group "$2"); then conflict "gid $2 already belongs to group $n in the image"; fi
  if [ $tools = shadow ]; then groupadd -g "$2" "$1"; else addgroup -g "$2" "$1"; fi || exit 1
}
mkuser() { # name uid
  if id=$(field /etc/passwd "$1"); then
    [ "$id" = "$2" ] || conflict "user $1 already exists in the image with uid $id, not $2"
    return 0
  fi
  if n=$(owner /etc/passwd "$2"); then conflict "uid $2 already belongs to user $n in the image"; fi
  mkgroup "$1" "$2"
  if [ $tools = shadow ]; then useradd -M -N -g "$2" -u "$2" -d "$root" -s /bin/sh "$1"
  else adduser -D -H -u "$2" -G "$1" -h "$root" -s /bin/sh "$1"; fi || exit 1
}
member() { # user group
  while IFS=: read -r n _ _ m; do
    [ "$n" = "$2" ] || continue
    case ",$m," in *",$1,"*) return 0;; esac
  done < /etc/group
  if [ $tools = shadow ]; then usermod -a -G "$2" "$1"; else addgroup "$1" "$2"; fi || exit 1
}
for a in "$@"; do
  set -- $a
  case $1 in
  u) mkuser "$2" "$3";;
  g) mkgroup "$2" "$3"
     for m in $(echo "${4:-}" | tr , ' '); do member "$m" "$2"; done;;
  esac
done
chmod 1777 "$root"
d=$root
while [ "${d%/*}" != "$d" ]; do
  d=${d%/*}; [ -n "$d" ] || break
  chmod o+x "$d"
done
`

// AccountsArgs are AccountsScript's arguments for a and workspace root.
func AccountsArgs(a Accounts, root string) []string {
	args := []string{root}
	for _, u := range a.Users {
		args = append(args, "u "+u.Name+" "+strconv.Itoa(u.UID))
	}
	for _, g := range a.Groups {
		s := "g " + g.Name + " " + strconv.Itoa(g.GID)
		if len(g.Users) > 0 {
			s += " " + strings.Join(g.Users, ",")
		}
		args = append(args, s)
	}
	return args
}

// AccountsError explains a failed run of AccountsScript in image (empty
// when the provider has no image) from its exit code and stderr.
func AccountsError(image string, code int, stderr string) error {
	in := "the sandbox"
	if image != "" {
		in = "image " + image
	}
	msg := strings.TrimSpace(stderr)
	switch code {
	case AccountsToolsMissing:
		return fmt.Errorf("creating the manifest's users and groups: %s has no tools to create them (%s); use an image with useradd/groupadd (the shadow package, e.g. Debian's passwd) or BusyBox's adduser/addgroup", in, msg)
	case AccountsConflict:
		return fmt.Errorf("creating the manifest's users and groups in %s: %s; choose another name, or set uid/gid in the manifest to an id the image does not use", in, msg)
	}
	return fmt.Errorf("creating the manifest's users and groups in %s: the script exited with %d: %s", in, code, msg)
}
