package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/addrs"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// ApprovalPolicy is a needs_approval setting: true, false, or an
// expression over call (call.tool, call.arguments) evaluated for each
// tool call. The zero policy (no needs_approval) never asks. As JSON
// (digests, plan attributes) it is its constant value, or its source
// text when it depends on the call.
type ApprovalPolicy struct {
	// Source is the expression as written, e.g. "true" or
	// "!can(regex(\"^ls \", call.arguments.cmd))".
	Source string
	// Range is the expression's range, for messages.
	Range hcl.Range

	expr     hcl.Expression
	constant *bool // set when the expression does not refer to call
	// perTool is a map form (an MCP server's { tool = true }): the tools
	// named true ask, the others never do.
	perTool map[string]bool
	funcs   map[string]function.Function
	vars    cty.Value
	locals  cty.Value
}

// Constant reports the policy's value when it does not depend on the
// call.
func (p ApprovalPolicy) Constant() (value, ok bool) {
	if p.perTool != nil {
		return false, false
	}
	if p.expr == nil {
		return false, true
	}
	if p.constant != nil {
		return *p.constant, true
	}
	return false, false
}

// Call is one tool call as a policy sees it: the call object of a
// needs_approval expression (docs/approvals.md, "What a policy sees").
type Call struct {
	// Tool is the function name the model called.
	Tool string
	// Arguments are the call's canonical JSON arguments, the text the
	// tool decodes (call.arguments).
	Arguments string
	// Argv is the exact argv the sandbox executes (call.argv); nil for a
	// tool that runs no command.
	Argv []string
	// Simple reports an exec_command run by /bin/sh -c whose command has
	// no shell syntax (call.simple); Words are then its words
	// (call.words).
	Simple bool
	Words  []string
}

// callAttributes are the attributes of the call object.
var callAttributes = []string{"tool", "arguments", "argv", "simple", "words"}

// NeedsApproval evaluates the policy for one call. An evaluation error,
// or a value that is not a bool, is an error naming the attribute's file
// and line.
func (p ApprovalPolicy) NeedsApproval(c Call) (bool, error) {
	tool, arguments := c.Tool, c.Arguments
	if p.perTool != nil {
		return p.perTool[tool], nil
	}
	if p.expr == nil {
		return false, nil
	}
	if p.constant != nil {
		return *p.constant, nil
	}
	args := cty.EmptyObjectVal
	if strings.TrimSpace(arguments) != "" {
		ty, err := ctyjson.ImpliedType([]byte(arguments))
		if err != nil {
			return false, p.errorf("the call's arguments are not JSON: %v", err)
		}
		if args, err = ctyjson.Unmarshal([]byte(arguments), ty); err != nil {
			return false, p.errorf("the call's arguments are not JSON: %v", err)
		}
	}
	ctx := buildCtx(p.funcs, p.vars, p.locals, nil, nil)
	ctx.Variables["call"] = cty.ObjectVal(map[string]cty.Value{
		"tool":      cty.StringVal(tool),
		"arguments": args,
		"argv":      stringList(c.Argv),
		"simple":    cty.BoolVal(c.Simple),
		"words":     stringList(c.Words),
	})
	v, diags := p.expr.Value(ctx)
	if diags.HasErrors() {
		var msgs []string
		for _, d := range diags {
			if d.Severity == hcl.DiagError {
				m := d.Summary
				if d.Detail != "" {
					m += ": " + d.Detail
				}
				msgs = append(msgs, m)
			}
		}
		return false, p.errorf("%s", strings.Join(msgs, "; "))
	}
	v, _ = v.UnmarkDeep()
	if !v.IsKnown() || v.IsNull() {
		return false, p.errorf("the value is null or unknown; it must be true or false")
	}
	b, err := convert.Convert(v, cty.Bool)
	if err != nil {
		return false, p.errorf("the value must be true or false, got %s", v.Type().FriendlyName())
	}
	return b.True(), nil
}

// stringList is ss as a cty list (empty, not null, when ss is).
func stringList(ss []string) cty.Value {
	if len(ss) == 0 {
		return cty.ListValEmpty(cty.String)
	}
	vs := make([]cty.Value, len(ss))
	for i, s := range ss {
		vs[i] = cty.StringVal(s)
	}
	return cty.ListVal(vs)
}

func (p ApprovalPolicy) errorf(format string, args ...any) error {
	return fmt.Errorf("needs_approval at %s:%d: %s", p.Range.Filename, p.Range.Start.Line, fmt.Sprintf(format, args...))
}

// PerTool is the map form's tool -> needs approval, nil for the other
// forms.
func (p ApprovalPolicy) PerTool() map[string]bool { return p.perTool }

// ForTool is the policy for one tool, by its name on an MCP server: the
// map form's entry for it (false when absent), or p itself for the other
// forms.
func (p ApprovalPolicy) ForTool(tool string) ApprovalPolicy {
	if p.perTool == nil {
		return p
	}
	v := p.perTool[tool]
	q := p
	q.perTool = nil
	q.constant = &v
	return q
}

// IsZero reports a policy that was not set.
func (p ApprovalPolicy) IsZero() bool { return p.expr == nil }

// Value is the policy as a plan attribute: its constant value, or its
// source text when it depends on the call.
func (p ApprovalPolicy) Value() any {
	if p.perTool != nil {
		return p.perTool
	}
	if v, ok := p.Constant(); ok {
		return v
	}
	return p.Source
}

// MarshalJSON writes Value.
func (p ApprovalPolicy) MarshalJSON() ([]byte, error) {
	return json.Marshal(p.Value())
}

// approvalPolicy decodes a needs_approval attribute: a bool, or an
// expression whose references are only call's attributes, var.*
// and local.*. The expression is evaluated per call (NeedsApproval); one
// that does not refer to call is evaluated now.
func (l *loader) approvalPolicy(a *hcl.Attribute) ApprovalPolicy {
	if a == nil {
		return ApprovalPolicy{}
	}
	rng := a.Expr.Range()
	p := &ApprovalPolicy{Range: rng, expr: a.Expr, funcs: l.funcs}
	if f := l.cfg.Files[rng.Filename]; f != nil {
		p.Source = strings.TrimSpace(string(rng.SliceBytes(f.Bytes)))
	}
	usesCall := false
	ok := true
	var other []hcl.Traversal
	for _, tr := range a.Expr.Variables() {
		if tr.RootName() != "call" {
			other = append(other, tr)
			continue
		}
		usesCall = true
		name, nrng, good := stepName(tr, 1)
		if !good || !slices.Contains(callAttributes, name) {
			l.errorf(hcl.RangeBetween(tr.SourceRange(), nrng), "Invalid \"call\" attribute",
				"The call object has tool (the tool's name), arguments (its decoded JSON arguments, like call.arguments.cmd), argv (the exact argv the sandbox runs), simple (true for a command with no shell syntax run by /bin/sh -c) and words (that command's words).%s", suggest(name, callAttributes))
			ok = false
		}
	}
	for _, tr := range other {
		switch tr.RootName() {
		case "var", "local":
			if !l.checkTraversal(tr, scope{where: "needs_approval"}) {
				ok = false
			}
		default:
			l.errorf(tr.SourceRange(), "Invalid reference in needs_approval",
				"needs_approval may refer only to call.tool, call.arguments, call.argv, call.simple, call.words, var.* and local.*, and use functions; %q is none of them.", tr.RootName())
			ok = false
		}
	}
	if !ok {
		return ApprovalPolicy{}
	}
	p.vars = refObject(l.vars, "var", a.Expr.Variables())
	p.locals = refObject(l.locals, "local", a.Expr.Variables())
	if !usesCall {
		v, good := l.eval(a.Expr, scope{where: "needs_approval"}, nil, nil)
		if !good {
			return ApprovalPolicy{}
		}
		b, good := l.toBool(v, rng, "needs_approval")
		if !good {
			return ApprovalPolicy{}
		}
		p.constant = &b
		if p.Source == "" {
			p.Source = fmt.Sprint(b)
		}
	}
	return *p
}

// perToolApprovalPolicy decodes an MCP server's needs_approval: a map
// from tool name to bool, like { delete_entity = true }, or any form
// approvalPolicy reads.
func (l *loader) perToolApprovalPolicy(a *hcl.Attribute) ApprovalPolicy {
	if a == nil {
		return ApprovalPolicy{}
	}
	if len(a.Expr.Variables()) == 0 {
		if v, diags := a.Expr.Value(nil); !diags.HasErrors() && (v.Type().IsObjectType() || v.Type().IsMapType()) {
			rng := a.Expr.Range()
			m, err := convert.Convert(v, cty.Map(cty.Bool))
			if err != nil || !m.IsWhollyKnown() || m.IsNull() {
				l.errorf(rng, "Invalid needs_approval", "needs_approval must be true, false, an expression over call, or a map from tool name to true or false, like { delete_entity = true }.")
				return ApprovalPolicy{}
			}
			per := map[string]bool{}
			for k, b := range m.AsValueMap() {
				if b.IsNull() {
					l.errorf(rng, "Invalid needs_approval", "needs_approval.%s is null; set it to true or false.", k)
					return ApprovalPolicy{}
				}
				per[k] = b.True()
			}
			p := ApprovalPolicy{Range: rng, expr: a.Expr, perTool: per}
			if f := l.cfg.Files[rng.Filename]; f != nil {
				p.Source = strings.TrimSpace(string(rng.SliceBytes(f.Bytes)))
			}
			return p
		}
	}
	return l.approvalPolicy(a)
}

// checkApprovalGaps warns about an agent whose shell or command
// capability decides per call (needs_approval is an expression over the
// call) while a filesystem capability lets it write files without
// approval: a call the policy lets run can read what the agent wrote (a
// login shell's .profile, a script or program the command runs), so the
// policy's judgement of the call alone does not bound what runs.
func (l *loader) checkApprovalGaps() {
	for _, name := range slices.Sorted(maps.Keys(l.cfg.Agents)) {
		ag := l.cfg.Agents[name]
		var judged []*Capability
		writer := ""
		for _, addr := range ag.Capabilities {
			ca, err := addrs.ParseCapability(addr)
			if err != nil {
				continue
			}
			c := l.cfg.Capabilities[ca.Key()]
			switch {
			case c == nil:
			case c.Shell != nil && perCall(c.Shell.NeedsApproval), c.Command != nil && perCall(c.Command.NeedsApproval):
				judged = append(judged, c)
			case c.Filesystem != nil && writer == "":
				if v, constant := c.Filesystem.NeedsApproval.Constant(); !constant || !v {
					writer = c.Addr
				}
			}
		}
		if writer == "" {
			continue
		}
		for _, c := range judged {
			rng := l.capRefs[name+" "+c.Addr]
			reads := "a login shell (shell = \"/bin/bash\", login = true) sources the .profile it can write, and a command can run a script or program it wrote"
			if c.Command != nil {
				reads = fmt.Sprintf("the command %s can be a script or program it can rewrite, or read files it wrote", strings.Join(c.Command.Command, " "))
			}
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "Approval policy can be bypassed through files the agent writes",
				Detail: fmt.Sprintf("%s decides per call whether agent %q needs approval, but %s lets the agent write files without approval: %s. Set needs_approval = true on %s, or make %s's policy ask for every call that can read files the agent wrote (docs/security.md, \"What approvals guarantee\").",
					c.Addr, name, writer, reads, writer, c.Addr),
				Subject: &rng,
			})
		}
	}
}

// perCall reports a policy that depends on the call: it lets some calls
// run without asking.
func perCall(p ApprovalPolicy) bool {
	_, constant := p.Constant()
	return !p.IsZero() && !constant
}
