package config

import (
	"maps"
	"slices"
	"sort"

	"github.com/agentctl/agentctl/model"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// DefaultMCPTimeout bounds starting an MCP server (with its tool list)
// and each tool call when the block sets no timeout.
const DefaultMCPTimeout = 60 * time.Second

// MCPServer is an mcp_server block: a Model Context Protocol server whose
// tools agents use. Exactly one of Command (stdio) and URL (streamable
// HTTP) is set.
type MCPServer struct {
	Name string
	// Command is the stdio server's program and arguments.
	Command []string
	// Env is added to the stdio server's environment; SensitiveEnv names
	// the entries whose values are sensitive.
	Env          map[string]string
	SensitiveEnv []string
	// Sandbox is the sandbox instance a stdio server runs in; "" runs it
	// on the host, in the configuration directory.
	Sandbox string
	// URL is the streamable HTTP endpoint; Headers are sent with every
	// request, SensitiveHeaders naming those whose values are sensitive.
	URL              string
	Headers          map[string]string
	SensitiveHeaders []string
	// AllowedTools, when set, are the only server tools agents see.
	AllowedTools []string
	// NeedsApproval is the approval policy of the server's tools: a bool,
	// a map from tool name to bool, or an expression over call.
	NeedsApproval ApprovalPolicy
	// Timeout bounds starting the server and each tool call.
	Timeout   time.Duration
	DeclRange hcl.Range
}

// Addr is the server's address, mcp_server.NAME.
func (s *MCPServer) Addr() string { return "mcp_server." + s.Name }

var mcpServerSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "command"}, {Name: "env"}, {Name: "sandbox"}, {Name: "url"}, {Name: "headers"},
	{Name: "allowed_tools"}, {Name: "needs_approval"}, {Name: "timeout"},
}}

func (l *loader) decodeMCPServer(b *hcl.Block) {
	s := &MCPServer{Name: b.Labels[0], DeclRange: b.DefRange, Timeout: DefaultMCPTimeout}
	l.cfg.MCPServers[s.Name] = s
	content, diags := b.Body.Content(mcpServerSchema)
	l.diags = append(l.diags, diags...)
	attrs := content.Attributes
	sc := scope{where: "an mcp_server block"}
	val := func(attr string) (cty.Value, hcl.Range, bool) {
		return l.settingAttr(attrs, attr, sc, nil, "An mcp_server setting")
	}
	if v, r, ok := val("command"); ok {
		if s.Command, ok = l.toStringList(v, r, "command"); ok && len(s.Command) == 0 {
			l.errorf(r, "Empty command", "command must name the server's program and its arguments, like [\"kb-server\", \"--db\", \"kb.json\"].")
		}
	}
	if v, r, ok := val("url"); ok {
		s.URL, _ = l.toString(v, r, "url")
	}
	_, hasCmd := attrs["command"]
	_, hasURL := attrs["url"]
	switch {
	case hasCmd && hasURL:
		l.errorf(attrs["url"].NameRange, "Conflicting MCP transports", "mcp_server %q sets both command (a stdio server) and url (a streamable HTTP server); keep one.", s.Name)
	case !hasCmd && !hasURL:
		l.errorf(b.DefRange, "Missing MCP transport", "mcp_server %q needs command = [...] (a server speaking over stdio) or url = \"https://...\" (a streamable HTTP server).", s.Name)
	}
	s.Env, s.SensitiveEnv = l.sensitiveStringMap(attrs["env"], sc, "env")
	s.Headers, s.SensitiveHeaders = l.sensitiveStringMap(attrs["headers"], sc, "headers")
	if a, ok := attrs["headers"]; ok && !hasURL {
		l.errorf(a.NameRange, "Headers without url", "headers are sent to a streamable HTTP server; mcp_server %q has no url.", s.Name)
	}
	if a, ok := attrs["env"]; ok && !hasCmd {
		l.errorf(a.NameRange, "Env without command", "env is the environment of a stdio server; mcp_server %q has no command.", s.Name)
	}
	if a, ok := attrs["sandbox"]; ok {
		if !hasCmd {
			l.errorf(a.NameRange, "Sandbox without command", "Only a stdio server (command = [...]) runs in a sandbox; mcp_server %q has none.", s.Name)
		} else {
			s.Sandbox, _ = l.sandboxRef(a, nil)
		}
	}
	if v, r, ok := val("allowed_tools"); ok {
		if tools, ok := l.toStringList(v, r, "allowed_tools"); ok {
			seen := map[string]string{} // function name -> tool
			for _, t := range tools {
				exposed := model.SafeToolName(t)
				switch prev, ok := seen[exposed]; {
				case ok && prev == t:
					l.errorf(r, "Duplicate tool", "allowed_tools lists %q twice.", t)
				case ok:
					l.errorf(r, "Tool name clash", "allowed_tools lists %q and %q, which the model would both get as %q (a function name is 1 to 64 letters, digits, _ and -), so one of them could not be called. List only one of them.", prev, t, exposed)
				default:
					seen[exposed] = t
				}
			}
			if tools == nil {
				tools = []string{}
			}
			s.AllowedTools = tools
		}
	}
	if v, r, ok := val("timeout"); ok {
		if d, ok := l.toDuration(v, r, "timeout"); ok && d > 0 {
			s.Timeout = d
		}
	}
	s.NeedsApproval = l.perToolApprovalPolicy(attrs["needs_approval"])
	if per := s.NeedsApproval.PerTool(); per != nil && s.AllowedTools != nil {
		for _, t := range slices.Sorted(maps.Keys(per)) {
			if !oneOf(t, s.AllowedTools...) {
				l.errorf(s.NeedsApproval.Range, "Approval for a tool that is not allowed",
					"needs_approval names %q, which allowed_tools does not list.%s", t, suggest(t, s.AllowedTools))
			}
		}
	}
}

// sensitiveStringMap decodes a map of strings that may hold sensitive
// values (headers, env); it returns the map and the sorted keys whose
// values are sensitive, which the scrubber learns.
func (l *loader) sensitiveStringMap(a *hcl.Attribute, sc scope, what string) (map[string]string, []string) {
	if a == nil {
		return nil, nil
	}
	v, ok := l.eval(a.Expr, sc, nil, nil)
	if !ok || v.IsNull() {
		return nil, nil
	}
	if !l.known(v, a.Expr.Range(), what) {
		return nil, nil
	}
	if !v.Type().IsObjectType() && !v.Type().IsMapType() {
		l.typeErr(a.Expr.Range(), what, "a map of strings, like { Authorization = \"Bearer ${var.token}\" }", nil)
		return nil, nil
	}
	out := map[string]string{}
	var sensitive []string
	for it := v.ElementIterator(); it.Next(); {
		k, ev := it.Element()
		name := k.AsString()
		marked := ev.ContainsMarked()
		s, ok := l.toString(ev, a.Expr.Range(), what+"."+name)
		if !ok {
			return nil, nil
		}
		if marked {
			l.col.add(s)
			sensitive = append(sensitive, name)
		}
		out[name] = s
	}
	sort.Strings(sensitive)
	return out, sensitive
}

// decodeMCPServerRefs reads an agent's mcp_servers list.
func (l *loader) decodeMCPServerRefs(ag *Agent, a *hcl.Attribute) {
	exprs, diags := hcl.ExprList(a.Expr)
	l.diags = append(l.diags, diags...)
	for _, e := range exprs {
		n, ok := l.namedRef(e, "mcp_server", "mcp_server")
		if !ok {
			continue
		}
		if oneOf(n, ag.MCPServers...) {
			l.errorf(e.Range(), "Duplicate MCP server", "mcp_server.%s is listed twice.", n)
			continue
		}
		ag.MCPServers = append(ag.MCPServers, n)
		l.mcpRefs[ag.Name+" "+n] = e.Range()
	}
}

// checkMCPToolNames reports two MCP servers of one agent whose
// allowed_tools give the model the same tool name. Clashes with the
// agent's other tools, and between the lists the servers report, are
// found by plan, which lists each server's tools.
func (l *loader) checkMCPToolNames() {
	for _, name := range slices.Sorted(maps.Keys(l.cfg.Agents)) {
		ag := l.cfg.Agents[name]
		owner := map[string]string{}
		for _, sn := range ag.MCPServers {
			s := l.cfg.MCPServers[sn]
			if s == nil {
				continue
			}
			for _, t := range s.AllowedTools {
				exposed := model.SafeToolName(t)
				if prev, ok := owner[exposed]; ok && prev != sn {
					l.errorf(l.mcpRefs[name+" "+sn], "Tool name clash",
						"Agent %q gets a tool named %q from both mcp_server.%s and mcp_server.%s; the model could not tell them apart. Drop it from one server's allowed_tools, or give the agent only one of the servers.", name, exposed, prev, sn)
					break
				}
				owner[exposed] = sn
			}
		}
	}
}
