package agenttest

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// maxFileRead bounds what sandbox_file reads.
const maxFileRead = 1 << 20

// evaluator evaluates a run block's assertions against the state the run
// left: output.NAME, run.NAME (status, output, error, turns, usage,
// tool_calls), sandbox.NAME (address, status), plan.changes, var, local,
// the configuration's functions and sandbox_file(SANDBOX, PATH).
type evaluator struct {
	ctx  context.Context
	e    *engine.Engine
	st   *state.State
	hctx *hcl.EvalContext
	// open are the workspaces sandbox_file opened; closers put their
	// sandboxes back as they were.
	open    map[string]*sandbox.Workspace
	closers []func() error
}

func newEvaluator(ctx context.Context, e *engine.Engine, st *state.State, p *engine.Plan, cmd Command) *evaluator {
	ev := &evaluator{ctx: ctx, e: e, st: st, open: map[string]*sandbox.Workspace{}}
	vars := map[string]cty.Value{
		"output":  ev.outputs(),
		"run":     ev.runs(),
		"sandbox": ev.sandboxes(),
		"plan":    planValue(p),
	}
	ev.hctx = e.Config.EvalContext(vars, map[string]function.Function{"sandbox_file": ev.sandboxFileFunc()})
	return ev
}

// close stops the sandboxes sandbox_file started.
func (ev *evaluator) close() {
	for _, c := range ev.closers {
		_ = c()
	}
}

// check evaluates one assertion; a false condition is an error at the
// condition with the evaluated error_message.
func (ev *evaluator) check(a *Assert) hcl.Diagnostics {
	v, diags := a.Condition.Value(ev.hctx)
	if diags.HasErrors() {
		return diags
	}
	if !v.IsWhollyKnown() || v.IsNull() {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid condition result", Detail: "The condition has no known value (it may use a sensitive output or an object the run did not produce).", Subject: a.Condition.Range().Ptr(), Expression: a.Condition, EvalContext: ev.hctx}}
	}
	v, _ = v.Unmark()
	if v.Type() != cty.Bool {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Invalid condition result", Detail: fmt.Sprintf("The condition must be true or false, not a %s.", v.Type().FriendlyName()), Subject: a.Condition.Range().Ptr()}}
	}
	if v.True() {
		return nil
	}
	msg, mdiags := a.ErrorMessage.Value(ev.hctx)
	detail := ""
	if !mdiags.HasErrors() && msg.IsWhollyKnown() && !msg.IsNull() && msg.Type() == cty.String && !msg.IsMarked() {
		detail = msg.AsString()
	} else {
		detail = "(the error_message could not be evaluated)"
	}
	return append(hcl.Diagnostics{{
		Severity:    hcl.DiagError,
		Summary:     "Test assertion failed",
		Detail:      detail,
		Subject:     a.Condition.Range().Ptr(),
		Expression:  a.Condition,
		EvalContext: ev.hctx,
	}}, mdiags...)
}

// jsonValue decodes a JSON document into a cty value (null for none).
func jsonValue(b []byte) cty.Value {
	if len(b) == 0 {
		return cty.NullVal(cty.DynamicPseudoType)
	}
	ty, err := ctyjson.ImpliedType(b)
	if err != nil {
		return cty.StringVal(string(b))
	}
	v, err := ctyjson.Unmarshal(b, ty)
	if err != nil {
		return cty.StringVal(string(b))
	}
	return v
}

func (ev *evaluator) outputs() cty.Value {
	m := map[string]cty.Value{}
	for name, o := range ev.st.Outputs {
		if o.Sensitive {
			m[name] = cty.DynamicVal
			continue
		}
		m[name] = jsonValue(o.Value)
	}
	return cty.ObjectVal(m)
}

// instances groups values by the NAME of addresses KIND.NAME[KEY]: an
// object for a block without for_each, a map of them by key otherwise.
func instances(kind string, byAddr map[string]cty.Value, keyed map[string]bool) cty.Value {
	type inst struct {
		key string
		v   cty.Value
	}
	groups := map[string][]inst{}
	for addr, v := range byAddr {
		rest := strings.TrimPrefix(addr, kind+".")
		name, key := rest, ""
		if i := strings.Index(rest, "["); i >= 0 {
			name = rest[:i]
			key = strings.Trim(rest[i:], `[]"`)
		}
		groups[name] = append(groups[name], inst{key, v})
	}
	out := map[string]cty.Value{}
	for name, is := range groups {
		if !keyed[name] {
			out[name] = is[0].v
			continue
		}
		m := map[string]cty.Value{}
		for _, i := range is {
			m[i.key] = i.v
		}
		out[name] = cty.ObjectVal(m)
	}
	return cty.ObjectVal(out)
}

func (ev *evaluator) runs() cty.Value {
	cfg := ev.e.Config
	byAddr := map[string]cty.Value{}
	keyed := map[string]bool{}
	for addr, ri := range cfg.RunInstances {
		if ri.Key != "" {
			keyed[ri.Name] = true
		}
		byAddr[addr] = ev.runValue(ev.st.Runs[addr])
	}
	return instances("run", byAddr, keyed)
}

// runValue is what assertions see of a run; a run not in the state has
// status "not_run".
func (ev *evaluator) runValue(r *state.Run) cty.Value {
	if r == nil {
		return cty.ObjectVal(map[string]cty.Value{
			"status": cty.StringVal("not_run"), "output": cty.NullVal(cty.DynamicPseudoType), "error": cty.StringVal(""),
			"turns": cty.NumberIntVal(0), "usage": usageValue(model.Usage{}), "tool_calls": cty.EmptyTupleVal,
		})
	}
	// A transcript that cannot be read leaves tool_calls unknown: an
	// assertion over it fails rather than passing on an empty list.
	calls := cty.DynamicVal
	if steps, err := ev.e.Transcript(ev.ctx, r); err == nil {
		calls = toolCalls(steps)
	}
	return cty.ObjectVal(map[string]cty.Value{
		"status":     cty.StringVal(r.Status),
		"output":     jsonValue(r.Output),
		"error":      cty.StringVal(r.Error),
		"turns":      cty.NumberIntVal(int64(r.Turns)),
		"usage":      usageValue(r.Usage),
		"tool_calls": calls,
	})
}

func usageValue(u model.Usage) cty.Value {
	return cty.ObjectVal(map[string]cty.Value{
		"input_tokens":  cty.NumberIntVal(u.InputTokens),
		"output_tokens": cty.NumberIntVal(u.OutputTokens),
	})
}

// toolCalls lists the tool calls of a transcript in the order the model
// made them: name, call_id, agent, arguments (decoded when they are
// JSON), output (as the model saw it, scrubbed) and path (the nested
// agent-tool conversation, "" for the run's own).
func toolCalls(steps []agentloop.Step) cty.Value {
	outputs := map[string]string{}
	for _, s := range steps {
		if s.Kind == agentloop.StepTool && s.Result != nil {
			outputs[s.Result.CallID] = s.Result.Output
		}
	}
	var calls []cty.Value
	for _, s := range steps {
		if s.Kind != agentloop.StepModel || s.Response == nil {
			continue
		}
		for _, c := range s.Response.FunctionCalls() {
			out, done := outputs[c.CallID]
			ov := cty.StringVal(out)
			if !done {
				ov = cty.NullVal(cty.String)
			}
			calls = append(calls, cty.ObjectVal(map[string]cty.Value{
				"name":      cty.StringVal(c.Name),
				"call_id":   cty.StringVal(c.CallID),
				"agent":     cty.StringVal(s.Agent),
				"arguments": jsonValue([]byte(c.Arguments)),
				"output":    ov,
				"path":      cty.StringVal(s.Path),
			}))
		}
	}
	if len(calls) == 0 {
		return cty.EmptyTupleVal
	}
	return cty.TupleVal(calls)
}

func (ev *evaluator) sandboxes() cty.Value {
	byAddr := map[string]cty.Value{}
	keyed := map[string]bool{}
	for addr := range ev.e.Config.SandboxInstances {
		if strings.Contains(addr, "[") {
			keyed[strings.TrimPrefix(addr[:strings.Index(addr, "[")], "sandbox.")] = true
		}
		status := "not_created"
		if ss := ev.st.Sandboxes[addr]; ss != nil {
			status = ss.Status
		}
		byAddr[addr] = cty.ObjectVal(map[string]cty.Value{"address": cty.StringVal(addr), "status": cty.StringVal(status)})
	}
	return instances("sandbox", byAddr, keyed)
}

// planValue is plan.changes: the action of each object the plan changes,
// by address.
func planValue(p *engine.Plan) cty.Value {
	m := map[string]cty.Value{}
	if p != nil {
		for _, c := range p.Changes {
			if c.Action != engine.ActionNoop {
				m[c.Address] = cty.StringVal(string(c.Action))
			}
		}
	}
	return cty.ObjectVal(map[string]cty.Value{"changes": cty.ObjectVal(m)})
}

// sandboxFileFunc is sandbox_file(SANDBOX, PATH): the content of a file
// in a sandbox's workspace (PATH relative to its root), read through the
// provider and scrubbed of sensitive values; SANDBOX is sandbox.NAME or
// its address as a string. A stopped sandbox is started for the read and
// stopped again after the run block's assertions.
func (ev *evaluator) sandboxFileFunc() function.Function {
	return function.New(&function.Spec{
		Params: []function.Parameter{
			{Name: "sandbox", Type: cty.DynamicPseudoType},
			{Name: "path", Type: cty.String},
		},
		Type: function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			addr, err := sandboxAddr(args[0])
			if err != nil {
				return cty.NilVal, function.NewArgError(0, err)
			}
			rel := args[1].AsString()
			b, err := ev.readFile(addr, rel)
			if err != nil {
				return cty.NilVal, err
			}
			return cty.StringVal(string(b)), nil
		},
	})
}

func sandboxAddr(v cty.Value) (string, error) {
	v, _ = v.Unmark()
	switch {
	case v.Type() == cty.String && v.IsKnown() && !v.IsNull():
		return v.AsString(), nil
	case v.Type().IsObjectType() && v.Type().HasAttribute("address"):
		return v.GetAttr("address").AsString(), nil
	}
	return "", fmt.Errorf("give a sandbox: sandbox.NAME, or its address as a string")
}

func (ev *evaluator) readFile(addr, rel string) ([]byte, error) {
	if _, ok := ev.e.Config.SandboxInstances[addr]; !ok {
		var names []string
		for a := range ev.e.Config.SandboxInstances {
			names = append(names, a)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("there is no %s in the configuration (its sandboxes: %s)", addr, strings.Join(names, ", "))
	}
	if path.IsAbs(rel) || !pathLocal(rel) {
		return nil, fmt.Errorf("%s: the path %q must be relative to the workspace root, with no .. segment", addr, rel)
	}
	ws, ok := ev.open[addr]
	if !ok {
		var closer func() error
		var err error
		ws, closer, err = ev.e.OpenWorkspace(ev.ctx, ev.st, addr)
		if err != nil {
			return nil, err
		}
		ev.open[addr] = ws
		ev.closers = append(ev.closers, closer)
	}
	b, err := ws.ReadFile(ev.ctx, path.Clean(rel), maxFileRead)
	if err != nil {
		return nil, fmt.Errorf("%s: reading %s: %w", addr, rel, err)
	}
	return b, nil
}

func pathLocal(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return false
		}
	}
	return p != ""
}
