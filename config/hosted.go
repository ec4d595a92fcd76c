package config

import (
	"maps"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/providers/registry"
)

// hostedBlock is a tool block with a type, waiting for the agent's
// model provider to decode it (checkModelFeatures).
type hostedBlock struct {
	agent     string
	index     int // in the agent's HostedTools
	typeRange hcl.Range
	body      hcl.Body
}

// declareHostedTool records the tool block named name whose type is set
// by a: a tool the model's service runs, decoded once the providers are
// known. It reports whether it dealt with the block: a null type leaves
// it an agent tool.
func (l *loader) declareHostedTool(ag *Agent, name string, a *hcl.Attribute, rest hcl.Body, decl hcl.Range) bool {
	v, ok := l.eval(a.Expr, scope{where: "an agent"}, nil, nil)
	if !ok || !l.noSensitive(v, a.Expr.Range(), "A tool type") || !l.known(v, a.Expr.Range(), "type") {
		return true
	}
	if v.IsNull() {
		return false
	}
	typ, ok := l.toString(v, a.Expr.Range(), "type")
	if !ok {
		return true
	}
	for _, t := range ag.HostedTools {
		if t.Type == typ {
			l.errorf(a.Expr.Range(), "Duplicate hosted tool", "Agent %q already has a %s tool, %q at %s: an agent may have one of each hosted tool.", ag.Name, typ, t.Name, rangeString(t.DeclRange))
			return true
		}
	}
	ag.HostedTools = append(ag.HostedTools, HostedTool{Name: name, Type: typ, DeclRange: decl})
	l.hostedBlocks = append(l.hostedBlocks, hostedBlock{
		agent: ag.Name, index: len(ag.HostedTools) - 1, typeRange: a.Expr.Range(),
		// Hosted tools' arguments are sent to the model's service.
		body: &boundBody{l: l, body: rest, sc: scope{where: "a tool"}, refuse: "A hosted tool's argument"},
	})
	return true
}

// decodeModelFallback reads model_fallback: the models tried in order
// when the agent's model is unavailable.
func (l *loader) decodeModelFallback(ag *Agent, v cty.Value, r hcl.Range) {
	list, ok := l.toStringList(v, r, "model_fallback")
	if !ok || v.IsNull() {
		return
	}
	if ag.Model == "" {
		l.errorf(r, "model_fallback without model", "model_fallback lists the models tried after the agent's model is unavailable; set model = \"...\" on agent %q too.", ag.Name)
		return
	}
	seen := map[string]bool{ag.Model: true}
	for _, m := range list {
		switch {
		case m == "":
			l.errorf(r, "Invalid model_fallback", "model_fallback may not hold an empty model name.")
			return
		case seen[m]:
			l.errorf(r, "Invalid model_fallback", "model_fallback names %q twice (counting model): each model is tried once.", m)
			return
		}
		seen[m] = true
	}
	ag.ModelFallback = list
}

// checkModelFeatures checks each agent against its model provider: its
// hosted tools are decoded by the provider's type, which may refuse
// them, and each model setting it sets must be accepted by the
// provider's API (registry.SettingsSupport). It runs before provider
// overrides, against the providers the configuration declares.
func (l *loader) checkModelFeatures() {
	for _, hb := range l.hostedBlocks {
		ag := l.cfg.Agents[hb.agent]
		addr, settings, pt := l.agentModelProvider(ag)
		t := &ag.HostedTools[hb.index]
		if pt == nil || pt.DecodeHostedTool == nil {
			l.errorf(hb.typeRange, "Hosted tool not offered", "Agent %q uses %s, which has no hosted tools, so tool %q (type = %q) has nothing to run it. Hosted tools are offered by the openai provider on the Responses API.", ag.Name, addr, t.Name, t.Type)
			continue
		}
		ht, diags := pt.DecodeHostedTool(settings, t.Type, hb.typeRange, hb.body)
		l.diags = append(l.diags, diags...)
		t.Config = ht.Config
	}
	for _, name := range slices.Sorted(maps.Keys(l.cfg.Agents)) {
		ag := l.cfg.Agents[name]
		ranges := l.settingRanges[name]
		if len(ranges) == 0 {
			continue
		}
		addr, settings, _ := l.agentModelProvider(ag)
		ss, ok := settings.(registry.SettingsSupport)
		if !ok {
			continue
		}
		for _, setting := range slices.Sorted(maps.Keys(ranges)) {
			if why := ss.UnsupportedSetting(setting); why != "" {
				l.errorf(ranges[setting], "Setting not accepted by the model provider", "Agent %q uses %s: %s.", name, addr, why)
			}
		}
	}
}

// agentModelProvider is the address, the settings and the type of ag's
// model provider; settings are the type's defaults for a provider the
// configuration does not declare, and the type is nil for an unknown one.
func (l *loader) agentModelProvider(ag *Agent) (string, any, *registry.Type) {
	addr := l.cfg.ModelProvider(ag)
	pa, err := addrs.ParseProvider(addr)
	if err != nil {
		return addr, nil, nil
	}
	pt, _ := l.reg.Lookup(pa.Type)
	if p := l.cfg.Providers[pa.Name()]; p != nil {
		return addr, p.Settings, pt
	}
	settings, _ := l.reg.Default(pa.Type)
	return addr, settings, pt
}
