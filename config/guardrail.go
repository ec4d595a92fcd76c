package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// Guardrail kinds: what a guardrail checks (its on attribute).
const (
	GuardInput      = "input"
	GuardOutput     = "output"
	GuardToolInput  = "tool_input"
	GuardToolOutput = "tool_output"
)

var guardrailKinds = []string{GuardInput, GuardOutput, GuardToolInput, GuardToolOutput}

// guardAttributes are the attributes of the guard object a condition
// sees; guardToolAttributes only tool guardrails have.
var (
	guardAttributes     = []string{"text", "tool", "arguments", "agent"}
	guardToolAttributes = []string{"tool", "arguments"}
)

var guardrailSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "on", Required: true}, {Name: "condition"}, {Name: "agent"}, {Name: "parallel"}, {Name: "message"},
}}

// Guardrail is a guardrail block: a check of a run's input or output, or
// of a tool call's arguments or output, that stops the run when it trips.
// Exactly one of Condition (an expression guardrail, true when what it
// checks may pass) and Agent (an agent guardrail, judged by that agent's
// structured output) is set.
type Guardrail struct {
	Name string
	// On is what it checks: GuardInput, GuardOutput, GuardToolInput or
	// GuardToolOutput.
	On        string
	Condition GuardCondition
	// Agent is the judging agent's name, "" for an expression guardrail.
	Agent string
	// Parallel runs an input agent guardrail beside the first model call.
	Parallel bool
	// Message is what a tripped guardrail reports ("" for an agent
	// guardrail: the judge's reason).
	Message   string
	DeclRange hcl.Range
}

// Location is where the guardrail is declared, file:line, for messages.
func (g *Guardrail) Location() string {
	return fmt.Sprintf("%s:%d", g.DeclRange.Filename, g.DeclRange.Start.Line)
}

// Definition is what of the guardrail decides its verdicts, for the
// digest of the runs it guards.
func (g *Guardrail) Definition() map[string]any {
	return map[string]any{"on": g.On, "condition": g.Condition.Source, "agent": g.Agent, "parallel": g.Parallel, "message": g.Message}
}

// GuardCondition is an expression guardrail's condition over the guard
// object (guard.text, guard.tool, guard.arguments, guard.agent).
type GuardCondition struct {
	// Source is the expression as written.
	Source string
	Range  hcl.Range

	expr hcl.Expression
	// usesArgs says the expression refers to guard.arguments: only then
	// are the call's arguments decoded.
	usesArgs bool
	funcs    map[string]function.Function
	vars     cty.Value
	locals   cty.Value
}

// Guarded is what a guardrail checks: the guard object of its condition.
type Guarded struct {
	// Text is the run's input, its output (JSON for structured output),
	// a tool call's JSON arguments or a tool's output.
	Text string
	// Tool and Arguments are the call's function name and JSON arguments
	// (tool guardrails only).
	Tool      string
	Arguments string
	// Agent is the agent whose input, output or call it is.
	Agent string
}

// Passes evaluates the condition for g: true lets it through. An
// evaluation error (a regex that does not compile, arguments that are
// not JSON) or a value that is not a bool is an error naming the
// condition's file and line; the caller fails closed.
func (c GuardCondition) Passes(g Guarded) (bool, error) {
	if c.expr == nil {
		return false, fmt.Errorf("the guardrail has no condition")
	}
	args := cty.EmptyObjectVal
	if c.usesArgs && strings.TrimSpace(g.Arguments) != "" {
		ty, err := ctyjson.ImpliedType([]byte(g.Arguments))
		if err == nil {
			args, err = ctyjson.Unmarshal([]byte(g.Arguments), ty)
		}
		if err != nil {
			return false, c.errorf("the call's arguments are not JSON: %v", err)
		}
	}
	ctx := &hcl.EvalContext{Functions: c.funcs, Variables: map[string]cty.Value{
		"var": c.vars, "local": c.locals,
		"guard": cty.ObjectVal(map[string]cty.Value{
			"text": cty.StringVal(g.Text), "tool": cty.StringVal(g.Tool), "arguments": args, "agent": cty.StringVal(g.Agent),
		}),
	}}
	v, diags := c.expr.Value(ctx)
	if diags.HasErrors() {
		var msgs []string
		for _, d := range diags.Errs() {
			msgs = append(msgs, d.Error())
		}
		return false, c.errorf("%s", strings.Join(msgs, "; "))
	}
	v, _ = v.UnmarkDeep()
	if !v.IsKnown() || v.IsNull() {
		return false, c.errorf("the value is null; it must be true or false")
	}
	b, err := convert.Convert(v, cty.Bool)
	if err != nil {
		return false, c.errorf("the value must be true or false, got %s", v.Type().FriendlyName())
	}
	return b.True(), nil
}

func (c GuardCondition) errorf(format string, args ...any) error {
	return fmt.Errorf("condition at %s:%d: %s", c.Range.Filename, c.Range.Start.Line, fmt.Sprintf(format, args...))
}

// MarshalJSON writes the condition's source.
func (c GuardCondition) MarshalJSON() ([]byte, error) { return json.Marshal(c.Source) }

// decodeGuardrail decodes one guardrail block.
func (l *loader) decodeGuardrail(b *hcl.Block) {
	name := b.Labels[0]
	g := &Guardrail{Name: name, DeclRange: b.DefRange}
	content, diags := b.Body.Content(guardrailSchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return
	}
	attrs := content.Attributes
	l.cfg.Guardrails[name] = g
	sc := scope{where: "a guardrail"}
	if a := attrs["on"]; a != nil {
		if v, ok := l.eval(a.Expr, sc, nil, nil); ok {
			g.On, _ = l.toString(v, a.Expr.Range(), "on")
			if !slices.Contains(guardrailKinds, g.On) {
				l.errorf(a.Expr.Range(), "Invalid on", "on must be \"input\", \"output\", \"tool_input\" or \"tool_output\", got %q.%s", g.On, suggest(g.On, guardrailKinds))
				g.On = ""
			}
		}
	}
	cond, agent := attrs["condition"], attrs["agent"]
	switch {
	case cond == nil && agent == nil:
		l.errorf(b.DefRange, "Missing guardrail check", "Guardrail %q needs condition = EXPRESSION (true lets it through, like !can(regex(\"(?i)api[_-]?key\", guard.text))) or agent = agent.NAME (an agent judging it).", name)
	case cond != nil && agent != nil:
		l.errorf(agent.NameRange, "Conflicting guardrail checks", "Guardrail %q sets both condition and agent; keep one: a guardrail is an expression or an agent's judgement.", name)
	case cond != nil:
		g.Condition = l.guardCondition(cond, g.On)
	default:
		g.Agent, _ = l.namedRef(agent.Expr, "agent", "agent")
	}
	if a := attrs["parallel"]; a != nil {
		if v, ok := l.eval(a.Expr, sc, nil, nil); ok {
			g.Parallel, _ = l.toBool(v, a.Expr.Range(), "parallel")
		}
		if g.Parallel && (agent == nil || g.On != GuardInput) {
			l.errorf(a.NameRange, "Invalid parallel", "parallel = true runs an input agent guardrail beside the first model call; guardrail %q is not one (it needs on = \"input\" and agent = agent.NAME).", name)
		}
	}
	if a := attrs["message"]; a != nil {
		if v, ok := l.eval(a.Expr, sc, nil, nil); ok && l.noSensitive(v, a.Expr.Range(), "A guardrail's message") {
			g.Message, _ = l.toString(v, a.Expr.Range(), "message")
		}
	}
	if g.Message == "" && g.Agent == "" {
		g.Message = fmt.Sprintf("guardrail %q tripped", name)
	}
}

// guardCondition decodes a condition: an expression whose references are
// only guard's attributes (guard.tool and guard.arguments for tool
// guardrails alone), var.* and local.*. Literal regular expressions are
// compiled now.
func (l *loader) guardCondition(a *hcl.Attribute, on string) GuardCondition {
	rng := a.Expr.Range()
	c := GuardCondition{Range: rng, expr: a.Expr, funcs: l.funcs}
	if f := l.cfg.Files[rng.Filename]; f != nil {
		c.Source = strings.TrimSpace(string(rng.SliceBytes(f.Bytes)))
	}
	ok := true
	for _, tr := range a.Expr.Variables() {
		switch tr.RootName() {
		case "guard":
			name, nrng, good := stepName(tr, 1)
			at := hcl.RangeBetween(tr.SourceRange(), nrng)
			switch {
			case !good || !slices.Contains(guardAttributes, name):
				l.errorf(at, "Invalid \"guard\" attribute", "The guard object has text (what the guardrail checks), tool and arguments (a tool guardrail's call: its function name and decoded JSON arguments, like guard.arguments.cmd) and agent (the agent's name).%s", suggest(name, guardAttributes))
				ok = false
			case slices.Contains(guardToolAttributes, name) && on != GuardToolInput && on != GuardToolOutput && on != "":
				l.errorf(at, "Invalid \"guard\" attribute", "guard.%s is set only for tool guardrails (on = \"tool_input\" or \"tool_output\"); this guardrail checks the run's %s: use guard.text.", name, on)
				ok = false
			case name == "arguments":
				c.usesArgs = true
			}
		case "var", "local":
			if !l.checkTraversal(tr, scope{where: "a guardrail condition"}) {
				ok = false
			}
		default:
			l.errorf(tr.SourceRange(), "Invalid reference in condition",
				"A guardrail's condition may refer only to guard.text, guard.tool, guard.arguments, guard.agent, var.* and local.*, and use functions; %q is none of them.", tr.RootName())
			ok = false
		}
	}
	if !l.checkLiteralRegexps(a.Expr) || !ok {
		return GuardCondition{}
	}
	c.vars = refObject(l.vars, "var", a.Expr.Variables())
	c.locals = refObject(l.locals, "local", a.Expr.Variables())
	// Evaluated now over a guard object of unknown values: unknown
	// functions, wrong arguments and patterns from variables that do not
	// compile are reported here rather than when the guardrail runs.
	ctx := &hcl.EvalContext{Functions: c.funcs, Variables: map[string]cty.Value{
		"var": c.vars, "local": c.locals,
		"guard": cty.ObjectVal(map[string]cty.Value{
			"text": cty.UnknownVal(cty.String), "tool": cty.UnknownVal(cty.String), "arguments": cty.DynamicVal, "agent": cty.UnknownVal(cty.String),
		}),
	}}
	v, diags := a.Expr.Value(ctx)
	if diags.HasErrors() {
		l.diags = append(l.diags, diags...)
		return GuardCondition{}
	}
	if v.Type() != cty.DynamicPseudoType {
		if _, err := convert.Convert(v, cty.Bool); err != nil {
			l.errorf(rng, "Invalid condition", "A guardrail's condition must be true (let it through) or false (trip), got %s.", v.Type().FriendlyName())
			return GuardCondition{}
		}
	}
	return c
}

// checkLiteralRegexps compiles the literal patterns of the regex,
// regexall and regex_replace calls in expr, reporting one that does not
// compile at the pattern (a can() around it would otherwise hide it, and
// the guardrail would trip on everything).
func (l *loader) checkLiteralRegexps(expr hcl.Expression) bool {
	ok := true
	_ = hclsyntax.VisitAll(expr.(hclsyntax.Node), func(n hclsyntax.Node) hcl.Diagnostics {
		call, isCall := n.(*hclsyntax.FunctionCallExpr)
		if !isCall || !slices.Contains([]string{"regex", "regexall", "regex_replace"}, call.Name) || len(call.Args) == 0 {
			return nil
		}
		pat := call.Args[0]
		if call.Name == "regex_replace" && len(call.Args) > 1 {
			pat = call.Args[1]
		}
		if len(pat.Variables()) > 0 {
			return nil
		}
		v, diags := pat.Value(&hcl.EvalContext{Functions: l.funcs})
		if diags.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type() != cty.String {
			return nil
		}
		if _, err := regexp.Compile(v.AsString()); err != nil {
			l.errorf(pat.Range(), "Invalid regular expression", "%s: %v.", call.Name, err)
			ok = false
		}
		return nil
	})
	return ok
}

// guardrailRefs decodes a guardrails attribute (of an agent or a run): a
// list of guardrail.NAME references.
func (l *loader) guardrailRefs(a *hcl.Attribute) []string {
	if a == nil {
		return nil
	}
	exprs, diags := hcl.ExprList(a.Expr)
	l.diags = append(l.diags, diags...)
	var out []string
	for _, e := range exprs {
		n, ok := l.namedRef(e, "guardrail", "guardrail")
		if !ok {
			continue
		}
		if slices.Contains(out, n) {
			l.errorf(e.Range(), "Duplicate guardrail", "guardrail.%s is listed twice.", n)
			continue
		}
		out = append(out, n)
	}
	return out
}

// checkGuardrails checks each agent guardrail's judge once every agent is
// decoded: a plain agent (no sandbox, tools, handoffs or MCP servers, and
// no guardrails of its own) whose output_schema has a boolean tripwire
// and a string reason.
func (l *loader) checkGuardrails() {
	for _, name := range slices.Sorted(maps.Keys(l.cfg.Guardrails)) {
		g := l.cfg.Guardrails[name]
		j := l.cfg.Agents[g.Agent]
		if g.Agent == "" || j == nil {
			continue
		}
		var has []string
		for what, set := range map[string]bool{"sandbox": j.Sandbox != "", "capabilities": len(j.Capabilities) > 0, "handoffs": len(j.Handoffs) > 0,
			"tool blocks": len(j.Tools) > 0 || len(j.HostedTools) > 0, "mcp_servers": len(j.MCPServers) > 0, "guardrails": len(j.Guardrails) > 0} {
			if set {
				has = append(has, what)
			}
		}
		if len(has) > 0 {
			slices.Sort(has)
			l.errorf(g.DeclRange, "Invalid guardrail agent", "Agent %q judges guardrail %q, so it must be a plain agent answering from its instructions, but it has %s. Remove them, or judge with another agent.", g.Agent, name, strings.Join(has, ", "))
		}
		if err := judgeSchema(j.OutputSchema); err != nil {
			l.errorf(g.DeclRange, "Invalid guardrail agent", "Agent %q judges guardrail %q, so its output_schema must have a boolean tripwire and a string reason, both required, like output_schema = { type = \"object\", properties = { tripwire = { type = \"boolean\" }, reason = { type = \"string\" } }, required = [\"tripwire\", \"reason\"] }: %v.", g.Agent, name, err)
		}
	}
}

// judgeSchema checks a judge's output schema.
func judgeSchema(schema json.RawMessage) error {
	if len(schema) == 0 {
		return fmt.Errorf("it has none")
	}
	var s struct {
		Properties map[string]struct {
			Type any `json:"type"`
		} `json:"properties"`
		Required []string `json:"required"`
	}
	if err := json.Unmarshal(schema, &s); err != nil {
		return err
	}
	for prop, typ := range map[string]string{"tripwire": "boolean", "reason": "string"} {
		p, ok := s.Properties[prop]
		if !ok {
			return fmt.Errorf("it has no %s property", prop)
		}
		if p.Type != typ {
			return fmt.Errorf("%s has type %v, not %q", prop, p.Type, typ)
		}
		if !slices.Contains(s.Required, prop) {
			return fmt.Errorf("%s is not required", prop)
		}
	}
	return nil
}
