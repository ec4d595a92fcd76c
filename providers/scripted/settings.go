package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/hashicorp/hcl/v2"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/registry"
)

// ProviderSettings are a provider "scripted" block: the replies of each
// agent, from its script "AGENT" { reply { ... } } blocks.
type ProviderSettings struct {
	Scripts map[string][]ScriptReply
	// agents are where each script names its agent.
	agents map[string]hcl.Range
}

// ScriptReply is one reply block: text, tool calls, or both.
type ScriptReply struct {
	Text      string
	Calls     []Call
	DeclRange hcl.Range
}

var (
	providerSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "script", LabelNames: []string{"agent"}}}}
	scriptSchema   = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "reply"}}}
	replySchema    = &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "text"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "call", LabelNames: []string{"tool"}}},
	}
	callSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "arguments"}}}
)

// DecodeProvider decodes a provider "scripted" block
// (registry.Type.DecodeProvider).
func DecodeProvider(body hcl.Body) (any, hcl.Diagnostics) {
	s := &ProviderSettings{Scripts: map[string][]ScriptReply{}, agents: map[string]hcl.Range{}}
	content, diags := body.Content(providerSchema)
	for _, sb := range content.Blocks {
		agent := sb.Labels[0]
		if _, dup := s.Scripts[agent]; dup {
			diags = append(diags, registry.Errorf(sb.DefRange, "Duplicate script", "The scripted provider already has a script for agent %q. Put all its replies in one script block.", agent))
			continue
		}
		s.agents[agent] = sb.LabelRanges[0]
		var ds hcl.Diagnostics
		s.Scripts[agent], ds = decodeScript(sb)
		diags = append(diags, ds...)
	}
	return s, diags
}

func decodeScript(b *hcl.Block) ([]ScriptReply, hcl.Diagnostics) {
	content, diags := b.Body.Content(scriptSchema)
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
	return replies, diags
}

// ScriptAgents implements registry.ScriptRefs.
func (s *ProviderSettings) ScriptAgents() map[string]hcl.Range { return s.agents }

// Fingerprint implements registry.Fingerprinter: an agent's script
// decides its answers (where it is written does not).
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
