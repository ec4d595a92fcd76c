package config

import (
	"encoding/json"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/internal/jsonschema"
	"github.com/agentctl/agentctl/providers/registry"
)

var agentSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "model"}, {Name: "provider"}, {Name: "instructions"}, {Name: "sandbox"},
		{Name: "capabilities"}, {Name: "handoffs"}, {Name: "output_schema"}, {Name: "max_turns"},
		{Name: "mcp_servers"}, {Name: "model_fallback"}, {Name: "guardrails"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "tool", LabelNames: []string{"name"}}, {Type: "settings"}, {Type: "budget"}, {Type: "handoff"},
		{Type: "hook", LabelNames: []string{"event"}},
	},
}

var toolSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "agent", Required: true}, {Name: "description"}, {Name: "needs_approval"}}}

// toolTypeSchema picks out a tool block's type: set, the block is a
// hosted tool decoded by the agent's model provider (hosted.go).
var toolTypeSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "type"}}}

func (l *loader) decodeAgent(b *hcl.Block) {
	name := b.Labels[0]
	ag := &Agent{Name: name, DeclRange: b.DefRange}
	l.cfg.Agents[name] = ag
	content, diags := b.Body.Content(agentSchema)
	l.diags = append(l.diags, diags...)
	attrs := content.Attributes
	sc := scope{where: "an agent"}
	val := func(attr, what string) (cty.Value, hcl.Range, bool) {
		a, ok := attrs[attr]
		if !ok {
			return cty.NilVal, hcl.Range{}, false
		}
		v, ok := l.eval(a.Expr, sc, nil, nil)
		if !ok || !l.noSensitive(v, a.Expr.Range(), what) {
			return cty.NilVal, a.Expr.Range(), false
		}
		return v, a.Expr.Range(), true
	}
	if v, r, ok := val("model", "An agent's model"); ok {
		ag.Model, _ = l.toString(v, r, "model")
	}
	if a, ok := attrs["provider"]; ok {
		ag.Provider, _ = l.resolveProvider(a.Expr, registry.RoleModel, "An agent")
	}
	if pa, _ := addrs.ParseProvider(ag.Provider); ag.Model == "" && !diags.HasErrors() && pa.Type != "scripted" {
		if _, ok := attrs["model"]; !ok {
			l.errorf(b.DefRange, "Missing required argument", "Agent %q needs model = \"...\" (for example model = var.model). Only agents using a scripted provider may omit it.", name)
		}
	}
	if v, r, ok := val("instructions", "Instructions (they are sent to the model)"); ok {
		ag.Instructions, _ = l.toString(v, r, "instructions")
	}
	if a, ok := attrs["sandbox"]; ok {
		ag.Sandbox, _ = l.sandboxRef(a, nil)
	}
	if a, ok := attrs["capabilities"]; ok {
		exprs, diags := hcl.ExprList(a.Expr)
		l.diags = append(l.diags, diags...)
		for _, e := range exprs {
			tr, ok := l.traversalAddr(e, "capability", "capability.TYPE.NAME")
			if !ok {
				continue
			}
			typ, _, ok1 := stepName(tr, 1)
			cn, _, ok2 := stepName(tr, 2)
			if !ok1 || !ok2 || len(tr) != 3 {
				l.errorf(e.Range(), "Invalid reference", "Expected capability.TYPE.NAME, like capability.shell.default.")
				continue
			}
			ca := addrs.Capability{Type: typ, Name: cn}
			key := ca.Key()
			if !l.declared("capability", key) {
				l.errorf(e.Range(), "Reference to undeclared capability", "There is no capability %q %q.%s Declare it with capability %q %q {}.", typ, cn, suggest(key, l.declaredNames("capability")), typ, cn)
				continue
			}
			if oneOf(ca.String(), ag.Capabilities...) {
				l.errorf(e.Range(), "Duplicate capability", "%s is listed twice.", ca)
				continue
			}
			ag.Capabilities = append(ag.Capabilities, ca.String())
			l.capRefs[name+" "+ca.String()] = e.Range()
		}
		if ag.Sandbox == "" {
			for i, c := range ag.Capabilities {
				if ca, err := addrs.ParseCapability(c); err == nil && (ca.Type == "shell" || ca.Type == "filesystem" || ca.Type == "command" || ca.Type == "skills" || ca.Type == "memory") {
					l.errorf(exprs[i].Range(), "Capability needs a sandbox", "%s runs in a sandbox, but agent %q has none. Set sandbox = sandbox.NAME on the agent.", c, name)
					break
				}
			}
		}
	}
	if a, ok := attrs["mcp_servers"]; ok {
		l.decodeMCPServerRefs(ag, a)
	}
	ag.Guardrails = l.guardrailRefs(attrs["guardrails"])
	if a, ok := attrs["handoffs"]; ok {
		exprs, diags := hcl.ExprList(a.Expr)
		l.diags = append(l.diags, diags...)
		for _, e := range exprs {
			if n, ok := l.namedRef(e, "agent", "agent"); ok {
				ag.Handoffs = append(ag.Handoffs, n)
			}
		}
	}
	if v, r, ok := val("output_schema", "An output schema"); ok && l.known(v, r, "output_schema") && !v.IsNull() {
		if !v.Type().IsObjectType() && !v.Type().IsMapType() {
			l.typeErr(r, "output_schema", "a JSON Schema object, like { type = \"object\", properties = {...} }", nil)
		} else if js, err := ctyjson.Marshal(v, v.Type()); err != nil {
			l.typeErr(r, "output_schema", "representable as JSON", err)
		} else {
			var m map[string]any
			_ = json.Unmarshal(js, &m)
			if t, _ := m["type"].(string); t != "object" {
				l.errorf(r, "Invalid output_schema", "output_schema must describe an object: set type = \"object\" with properties.")
			} else if _, err := jsonschema.Compile(js); err != nil {
				l.errorf(r, "Invalid output_schema", "output_schema of agent %q is not a valid JSON Schema: %v.", name, err)
			}
			ag.OutputSchema = js
		}
	}
	if v, r, ok := val("model_fallback", "model_fallback"); ok {
		l.decodeModelFallback(ag, v, r)
	}
	if v, r, ok := val("max_turns", "max_turns"); ok {
		if n, ok := l.toInt(v, r, "max_turns"); ok {
			if n < 1 {
				l.errorf(r, "Invalid max_turns", "max_turns must be at least 1, got %d.", n)
			}
			ag.MaxTurns = n
		}
	}
	seenSettings := false
	for _, tb := range content.Blocks {
		switch tb.Type {
		case "tool":
			l.decodeAgentTool(ag, tb)
		case "settings":
			if seenSettings {
				l.errorf(tb.DefRange, "Duplicate settings block", "An agent may have one settings block.")
				continue
			}
			seenSettings = true
			l.decodeAgentSettings(ag, tb)
		case "budget":
			if ag.Budget != nil {
				l.errorf(tb.DefRange, "Duplicate budget block", "An agent may have one budget block; the first is at %s.", rangeString(ag.Budget.DeclRange))
				continue
			}
			ag.Budget = l.decodeBudget(tb, "agent", nil)
		case "handoff":
			l.decodeHandoff(ag, tb)
		case "hook":
			if h := l.decodeHook(tb, "agent", sc, nil); h != nil {
				ag.Hooks = append(ag.Hooks, h)
			}
		}
	}
}

func (l *loader) decodeAgentTool(ag *Agent, tb *hcl.Block) {
	tname := tb.Labels[0]
	if !toolNameRe().MatchString(tname) {
		l.errorf(tb.LabelRanges[0], "Invalid tool name", "%q is not a valid tool name: use 1 to 64 letters, digits, underscores or dashes.", tname)
		return
	}
	for _, t := range ag.Tools {
		if t.Name == tname {
			l.errorf(tb.LabelRanges[0], "Duplicate tool", "Agent %q already has a tool named %q at %s.", ag.Name, tname, rangeString(t.DeclRange))
			return
		}
	}
	for _, t := range ag.HostedTools {
		if t.Name == tname {
			l.errorf(tb.LabelRanges[0], "Duplicate tool", "Agent %q already has a tool named %q at %s.", ag.Name, tname, rangeString(t.DeclRange))
			return
		}
	}
	typed, rest, diags := tb.Body.PartialContent(toolTypeSchema)
	l.diags = append(l.diags, diags...)
	if a, ok := typed.Attributes["type"]; ok && l.declareHostedTool(ag, tname, a, rest, tb.DefRange) {
		return
	}
	tc, diags := rest.Content(toolSchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return
	}
	t := AgentTool{Name: tname, DeclRange: tb.DefRange}
	var ok bool
	if t.Agent, ok = l.namedRef(tc.Attributes["agent"].Expr, "agent", "agent"); !ok {
		return
	}
	if a, has := tc.Attributes["description"]; has {
		if v, good := l.eval(a.Expr, scope{where: "an agent"}, nil, nil); good && l.noSensitive(v, a.Expr.Range(), "A tool description") {
			t.Description, _ = l.toString(v, a.Expr.Range(), "description")
		}
	}
	t.NeedsApproval = l.approvalPolicy(tc.Attributes["needs_approval"])
	ag.Tools = append(ag.Tools, t)
}
