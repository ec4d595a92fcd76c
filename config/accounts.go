package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sync"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/sandbox"
)

// accountNameRe is useradd's default NAME_REGEX: what every image's
// account tools accept.
var accountNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`) })

// reservedAccounts are names every image has already.
var reservedAccounts = []string{"root", "nobody", "nogroup"}

type accountDecl struct {
	name  string
	id    int // 0: assign one
	idRng hcl.Range
	users []string
	urng  hcl.Range
	label hcl.Range
}

// decodeAccounts decodes a manifest's user and group blocks (the SDK's
// Manifest.users and Manifest.groups) into m.Accounts, assigning the ids
// they leave out: from sandbox.FirstAutoID up, in declaration order,
// users before groups, skipping every id in use.
func (l *loader) decodeAccounts(m *Manifest, blocks []*hcl.Block) {
	if len(blocks) == 0 {
		return
	}
	sc := scope{where: "a manifest"}
	var users, groups []*accountDecl
	names := map[string]hcl.Range{} // users and groups share the name space (private groups)
	ids := map[int]string{}         // uid and gid share it too (a user's private group has gid = uid)
	for _, b := range blocks {
		ec, diags := b.Body.Content(entrySchemas[b.Type])
		l.diags = append(l.diags, diags...)
		if diags.HasErrors() {
			continue
		}
		name := b.Labels[0]
		d := &accountDecl{name: name, label: b.LabelRanges[0]}
		switch {
		case slices.Contains(reservedAccounts, name):
			l.errorf(b.LabelRanges[0], "Reserved "+b.Type+" name", "%q already exists in every sandbox and cannot be declared. Commands run as the sandbox's default user when a capability sets no run_as; declare a user of another name to run as it.", name)
			continue
		case !accountNameRe().MatchString(name):
			l.errorf(b.LabelRanges[0], "Invalid "+b.Type+" name", "%q is not a valid %s name: use 1 to 32 lower-case letters, digits, '_' or '-', starting with a letter or '_' (the names useradd accepts).", name, b.Type)
			continue
		}
		if prev, ok := names[name]; ok {
			l.errorf(b.LabelRanges[0], "Duplicate user or group", "%q is already declared at %s. Users and groups share one name space, since every user has a private group of its own name.", name, rangeString(prev))
			continue
		}
		names[name] = b.LabelRanges[0]
		idAttr := "uid"
		if b.Type == "group" {
			idAttr = "gid"
		}
		if a, ok := ec.Attributes[idAttr]; ok {
			if v, ok := l.eval(a.Expr, sc, nil, nil); ok && l.noSensitive(v, a.Expr.Range(), "A "+idAttr) {
				if n, ok := l.toInt(v, a.Expr.Range(), idAttr); ok {
					switch {
					case n < sandbox.MinAccountID || n > sandbox.MaxAccountID:
						l.errorf(a.Expr.Range(), "Invalid "+idAttr, "%s must be between %d and %d (0 is root's, 65534 and 65535 are nobody's); got %d.", idAttr, sandbox.MinAccountID, sandbox.MaxAccountID, n)
					case ids[n] != "":
						l.errorf(a.Expr.Range(), "Duplicate "+idAttr, "%d is already the id of %s. Every user's uid is also the gid of its private group, so uids and gids must all differ.", n, ids[n])
					default:
						d.id, d.idRng = n, a.Expr.Range()
						ids[n] = fmt.Sprintf("%s %q", b.Type, name)
					}
				}
			}
		}
		if a, ok := ec.Attributes["users"]; ok {
			if v, ok := l.eval(a.Expr, sc, nil, nil); ok && l.noSensitive(v, a.Expr.Range(), "A group's users") {
				d.users, _ = l.toStringList(v, a.Expr.Range(), "users")
				d.urng = a.Expr.Range()
			}
		}
		if b.Type == "user" {
			users = append(users, d)
		} else {
			groups = append(groups, d)
		}
	}
	userNames := make([]string, len(users))
	for i, u := range users {
		userNames[i] = u.name
	}
	next := sandbox.FirstAutoID
	assign := func(d *accountDecl, what string) int {
		if d.id != 0 {
			return d.id
		}
		for ids[next] != "" {
			next++
		}
		ids[next] = fmt.Sprintf("%s %q", what, d.name)
		return next
	}
	m.UserRanges = map[string]hcl.Range{}
	for _, u := range users {
		m.Accounts.Users = append(m.Accounts.Users, sandbox.User{Name: u.name, UID: assign(u, "user")})
		m.UserRanges[u.name] = u.label
	}
	for _, g := range groups {
		grp := sandbox.Group{Name: g.name, GID: assign(g, "group")}
		for _, u := range g.users {
			switch {
			case !slices.Contains(userNames, u):
				l.errorf(g.urng, "Undeclared user in group", "Group %q lists user %q, which this manifest does not declare.%s Add user %q {} to the manifest.", g.name, u, suggest(u, userNames), u)
			case slices.Contains(grp.Users, u):
				l.errorf(g.urng, "Duplicate group member", "Group %q lists user %q twice.", g.name, u)
			default:
				grp.Users = append(grp.Users, u)
			}
		}
		m.Accounts.Groups = append(m.Accounts.Groups, grp)
	}
}

// decodeRunAs decodes a shell or command capability's run_as.
func (l *loader) decodeRunAs(c *Capability, attrs hcl.Attributes) string {
	a, ok := attrs["run_as"]
	if !ok {
		return ""
	}
	v, r, ok := l.settingAttr(attrs, "run_as", scope{where: "a capability"}, nil, "A capability setting")
	if !ok {
		return ""
	}
	s, ok := l.toString(v, r, "run_as")
	if !ok {
		return ""
	}
	if s == "" || slices.Contains(reservedAccounts, s) {
		l.errorf(r, "Invalid run_as", "run_as names a user declared in the manifest of the sandbox the capability runs in (user \"NAME\" {}); %q is not one. Leave run_as out to run as the sandbox's default user.", s)
		return ""
	}
	c.RunAsRange = a.Expr.Range().Ptr()
	return s
}

// checkRunAs checks that every capability with run_as is used only in
// sandboxes whose manifest declares the user, for each agent's own
// sandbox and each run's (a run may override its agent's), and that the
// sandbox's provider accepted the manifest's accounts.
func (l *loader) checkRunAs() {
	c := l.cfg
	seen := map[string]bool{}
	check := func(agent *Agent, sbAddr, via string) {
		if sbAddr == "" {
			return
		}
		sb := c.SandboxInstances[sbAddr]
		if sb == nil {
			return
		}
		for _, addr := range agent.Capabilities {
			ca, err := addrs.ParseCapability(addr)
			if err != nil {
				continue
			}
			capb := c.Capabilities[ca.Key()]
			if capb == nil || capb.RunAs() == "" || capb.RunAsRange == nil {
				continue
			}
			key := addr + "\x00" + sbAddr
			if seen[key] {
				continue
			}
			seen[key] = true
			user := capb.RunAs()
			m := c.Manifests[sb.Manifest]
			if m != nil {
				if _, ok := m.Accounts.User(user); ok {
					continue
				}
			}
			declared := []string{}
			where := fmt.Sprintf("%s has no manifest", sbAddr)
			if m != nil {
				for _, u := range m.Accounts.Users {
					declared = append(declared, u.Name)
				}
				where = fmt.Sprintf("manifest.%s (the manifest of %s) does not declare it", m.Name, sbAddr)
				if len(declared) > 0 {
					where += "; it declares " + quoteList(declared)
				}
			}
			l.errorf(*capb.RunAsRange, "Undeclared run_as user", "%s runs as user %q, but agent %q%s runs it in %s, and %s.%s Declare the user in that manifest: user %q {}.",
				addr, user, agent.Name, via, sbAddr, where, suggest(user, declared), user)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
		a := c.Agents[name]
		check(a, a.Sandbox, "")
	}
	for _, addr := range slices.Sorted(maps.Keys(c.RunInstances)) {
		ri := c.RunInstances[addr]
		for _, name := range c.AgentClosure(ri.Agent) {
			if a := c.Agents[name]; a != nil {
				check(a, ri.AgentSandbox(a), " (in "+addr+")")
			}
		}
	}
}
