package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/hcl/v2"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/registry"
)

// ProviderSettings are a provider "scripted" block: the replies of each
// agent, from its script "AGENT" { reply { ... } } blocks.
type ProviderSettings struct {
	// Scripts are the agent-wide scripts, by agent.
	Scripts map[string][]ScriptReply
	// RunScripts are the scripts scoped to one run block
	// (script "AGENT" { run = "RUN" ... }), by run name, then agent. For
	// that run they win over the agent-wide script.
	RunScripts map[string]map[string][]ScriptReply
	// ChatScripts are the scripts scoped to one agentctl chat session
	// (script "AGENT" { chat = "SESSION" ... }), by session, then agent.
	// In that session they win over the agent-wide script.
	ChatScripts map[string]map[string][]ScriptReply
	// agents are where each script names its agent; runs where each
	// scoped script names its run.
	agents map[string]hcl.Range
	runs   map[string]hcl.Range
}

// ScriptReply is one reply block: text, tool calls, or both.
type ScriptReply struct {
	Text      string
	Calls     []Call
	DeclRange hcl.Range
}

var (
	providerSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "script", LabelNames: []string{"agent"}}}}
	scriptSchema   = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "run"}, {Name: "chat"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "reply"}},
	}
	replySchema = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "text"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "call", LabelNames: []string{"tool"}}},
	}
	callSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "arguments"}}}
)

// DecodeProvider decodes a provider "scripted" block
// (registry.Type.DecodeProvider).
func DecodeProvider(body hcl.Body) (any, hcl.Diagnostics) {
	s := &ProviderSettings{
		Scripts: map[string][]ScriptReply{}, RunScripts: map[string]map[string][]ScriptReply{},
		ChatScripts: map[string]map[string][]ScriptReply{},
		agents:      map[string]hcl.Range{}, runs: map[string]hcl.Range{},
	}
	content, diags := body.Content(providerSchema)
	for _, sb := range content.Blocks {
		agent := sb.Labels[0]
		sc, ds := decodeScript(sb)
		diags = append(diags, ds...)
		if sc.badRun {
			continue // the script's scope is unknown
		}
		scripts := s.Scripts
		if sc.run != "" {
			if s.RunScripts[sc.run] == nil {
				s.RunScripts[sc.run] = map[string][]ScriptReply{}
			}
			scripts = s.RunScripts[sc.run]
			if _, seen := s.runs[sc.run]; !seen {
				s.runs[sc.run] = sc.runRange
			}
		}
		if sc.chat != "" {
			if s.ChatScripts[sc.chat] == nil {
				s.ChatScripts[sc.chat] = map[string][]ScriptReply{}
			}
			scripts = s.ChatScripts[sc.chat]
		}
		if _, dup := scripts[agent]; dup {
			if sc.chat != "" {
				diags = append(diags, registry.Errorf(sb.DefRange, "Duplicate script", "The scripted provider already has a script for agent %q scoped to chat session %q. Put all its replies for that session in one script block.", agent, sc.chat))
			} else if sc.run != "" {
				diags = append(diags, registry.Errorf(sb.DefRange, "Duplicate script", "The scripted provider already has a script for agent %q scoped to run %q. Put all its replies for that run in one script block.", agent, sc.run))
			} else {
				diags = append(diags, registry.Errorf(sb.DefRange, "Duplicate script", "The scripted provider already has a script for agent %q. Put all its replies in one script block, or scope one to a run with run = \"NAME\".", agent))
			}
			continue
		}
		if _, seen := s.agents[agent]; !seen {
			s.agents[agent] = sb.LabelRanges[0]
		}
		scripts[agent] = sc.replies
	}
	return s, diags
}

// script is one decoded script block.
type script struct {
	// run is the run block the script is scoped to, "" for agent-wide;
	// runRange is where it is named; badRun says the run argument is
	// invalid.
	run      string
	runRange hcl.Range
	badRun   bool
	// chat is the chat session the script is scoped to, "" for none.
	chat    string
	replies []ScriptReply
}

func decodeScript(b *hcl.Block) (script, hcl.Diagnostics) {
	content, diags := b.Body.Content(scriptSchema)
	var sc script
	if a, ok := content.Attributes["run"]; ok {
		sc.runRange = a.Expr.Range()
		var ds hcl.Diagnostics
		registry.Attr(content.Attributes, "run", &sc.run, &ds)
		diags = append(diags, ds...)
		switch {
		case ds.HasErrors():
			sc.badRun = true
		case sc.run == "":
			sc.badRun = true
			diags = append(diags, registry.Errorf(a.Expr.Range(), "Invalid run", "run names the run block this script is for, like run = \"followup\"; it can't be empty. Leave run out for a script every run of the agent uses."))
		}
	}
	if a, ok := content.Attributes["chat"]; ok {
		var ds hcl.Diagnostics
		registry.Attr(content.Attributes, "chat", &sc.chat, &ds)
		diags = append(diags, ds...)
		switch {
		case ds.HasErrors():
			sc.badRun = true
		case sc.chat == "":
			sc.badRun = true
			diags = append(diags, registry.Errorf(a.Expr.Range(), "Invalid chat", "chat names the agentctl chat session this script is for, like chat = \"demo\"; it can't be empty. Leave chat out for a script every run and session of the agent uses."))
		case sc.run != "":
			sc.badRun = true
			diags = append(diags, registry.Errorf(a.Expr.Range(), "Conflicting script scope", "A script is scoped to one run (run = \"...\") or one chat session (chat = \"...\"), not both. Write one script block for each."))
		}
	}
	replies := []ScriptReply{}
	for _, rb := range content.Blocks {
		rc, ds := rb.Body.Content(replySchema)
		diags = append(diags, ds...)
		r := ScriptReply{DeclRange: rb.DefRange}
		registry.Attr(rc.Attributes, "text", &r.Text, &diags)
		for _, cb := range rc.Blocks {
			cc, ds := cb.Body.Content(callSchema)
			diags = append(diags, ds...)
			call := Call{Name: cb.Labels[0], Arguments: json.RawMessage("{}")}
			if a, ok := cc.Attributes["arguments"]; ok {
				v, ds := a.Expr.Value(nil)
				diags = append(diags, ds...)
				switch {
				case ds.HasErrors() || v.IsNull():
				case !v.Type().IsObjectType() && !v.Type().IsMapType():
					diags = append(diags, registry.Errorf(a.Expr.Range(), "Incorrect attribute value type", "arguments must be an object, like { cmd = \"ls\" }."))
				default:
					js, err := ctyjson.Marshal(v, v.Type())
					if err != nil {
						diags = append(diags, registry.Errorf(a.Expr.Range(), "Incorrect attribute value type", "arguments must be representable as JSON: %s.", err))
						break
					}
					call.Arguments = js
				}
			}
			r.Calls = append(r.Calls, call)
		}
		if r.Text == "" && len(r.Calls) == 0 {
			diags = append(diags, registry.Errorf(rb.DefRange, "Empty reply", "A reply needs text = \"...\", one or more call \"TOOL\" { arguments = {...} } blocks, or both."))
		}
		replies = append(replies, r)
	}
	sc.replies = replies
	return sc, diags
}

// ScriptAgents implements registry.ScriptRefs.
func (s *ProviderSettings) ScriptAgents() map[string]hcl.Range { return s.agents }

// ScriptRuns implements registry.RunRefs: the runs scripts are scoped to.
func (s *ProviderSettings) ScriptRuns() map[string]hcl.Range { return s.runs }

// ForRun implements registry.RunScoper: the settings as run (a run
// block's name) sees them, its scoped scripts replacing the agent-wide
// ones of the same agents. scoped is false when no script is scoped to
// run.
func (s *ProviderSettings) ForRun(run string) (settings any, scoped bool) {
	rs := s.RunScripts[run]
	if len(rs) == 0 {
		return s, false
	}
	out := &ProviderSettings{Scripts: maps.Clone(s.Scripts), agents: s.agents, runs: s.runs}
	maps.Copy(out.Scripts, rs)
	return out, true
}

// ForChat implements registry.ChatScoper: the settings as the agentctl
// chat session named session sees them, its scoped scripts replacing the
// agent-wide ones of the same agents. scoped is false when no script is
// scoped to session.
func (s *ProviderSettings) ForChat(session string) (settings any, scoped bool) {
	cs := s.ChatScripts[session]
	if len(cs) == 0 {
		return s, false
	}
	out := &ProviderSettings{Scripts: maps.Clone(s.Scripts), agents: s.agents, runs: s.runs}
	maps.Copy(out.Scripts, cs)
	return out, true
}

// Fingerprint implements registry.Fingerprinter: an agent's script
// decides its answers (where it is written does not). For the script a
// run uses, fingerprint the settings ForRun returns.
func (s *ProviderSettings) Fingerprint(agent string) map[string]any {
	script := slices.Clone(s.Scripts[agent])
	for i := range script {
		script[i].DeclRange = hcl.Range{}
	}
	return map[string]any{"script": script}
}

// Model is the scripted model answering from these scripts.
func (s *ProviderSettings) Model() *Model {
	scripts := map[string][]Reply{}
	for agent, replies := range s.Scripts {
		for _, r := range replies {
			scripts[agent] = append(scripts[agent], Reply{Text: r.Text, Calls: r.Calls})
		}
	}
	return New(scripts)
}

// Type is the scripted provider type.
func Type() *registry.Type {
	return &registry.Type{
		Name: "scripted", Role: registry.RoleModel, DecodeProvider: DecodeProvider,
		NewModel: func(_ context.Context, settings any, _ registry.Env) (model.Model, error) {
			s, ok := settings.(*ProviderSettings)
			if !ok {
				return nil, fmt.Errorf("scripted: provider settings are %T, not *scripted.ProviderSettings", settings)
			}
			return s.Model(), nil
		},
	}
}
