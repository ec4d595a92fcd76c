package config

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/providers/registry"
)

// providerNames lists the registered provider types with roles.
func (l *loader) providerNames(roles ...registry.Role) []string { return l.reg.Names(roles...) }

var aliasSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "alias"}}}

func (l *loader) decodeProvider(b *hcl.Block) {
	typ := b.Labels[0]
	pt, ok := l.reg.Lookup(typ)
	if !ok {
		names := l.providerNames()
		l.errorf(b.LabelRanges[0], "Unknown provider type",
			"There is no provider type %q.%s Provider types are %s.", typ, suggest(typ, names), quoteList(names))
		return
	}
	content, rest, diags := b.Body.PartialContent(aliasSchema)
	l.diags = append(l.diags, diags...)
	p := &Provider{Type: typ, Role: pt.Role, DeclRange: b.DefRange}
	if a, ok := content.Attributes["alias"]; ok {
		p.Alias, _ = l.staticString(a)
		if p.Alias != "" && !validIdent(p.Alias) {
			l.errorf(a.Expr.Range(), "Invalid provider alias", "%q is not a valid alias: use letters, digits, underscores and dashes, starting with a letter.", p.Alias)
			return
		}
	}
	pa := addrs.Provider{Type: typ, Alias: p.Alias}
	key := pa.Name()
	p.Addr = pa.String()
	if prev, ok := l.cfg.Providers[key]; ok {
		detail := "Give the second one an alias (alias = \"NAME\") and refer to it as provider.%s.NAME."
		l.errorf(b.DefRange, "Duplicate provider configuration",
			"A %s provider configuration was already declared at %s. "+detail, key, rangeString(prev.DeclRange), typ)
		return
	}
	l.cfg.Providers[key] = p
	// Provider settings may hold sensitive values (credentials): they are
	// recorded for scrubbing, as are the values the type calls secrets.
	// Nested blocks (scripted replies) may not: they are sent to models
	// and stored.
	body := &boundBody{l: l, body: rest, sc: scope{where: "a provider setting"}, nested: "A " + typ + " provider's nested setting"}
	settings, diags := pt.DecodeProvider(body)
	l.diags = append(l.diags, diags...)
	p.Settings = settings
	if sec, ok := settings.(registry.Secrets); ok {
		for _, v := range sec.Secrets() {
			l.col.add(v)
		}
	}
	if refs, ok := settings.(registry.ScriptRefs); ok {
		agents := refs.ScriptAgents()
		for _, name := range slices.Sorted(maps.Keys(agents)) {
			l.scriptRefs = append(l.scriptRefs, nameRef{name, agents[name]})
		}
	}
}

// checkScripts verifies that every scripted provider script names a
// declared agent.
func (l *loader) checkScripts() {
	for _, r := range l.scriptRefs {
		if !l.declared("agent", r.name) {
			l.errorf(r.rng, "Script for undeclared agent",
				"The scripted provider has a script for %q, but there is no agent with that name.%s", r.name, suggest(r.name, l.declaredNames("agent")))
		}
	}
}

// resolveProvider reads provider = provider.TYPE[.ALIAS] and returns the
// address, creating the implicit default configuration of an unaliased
// provider that has no block (as Terraform does). role is the role of the
// types accepted here.
func (l *loader) resolveProvider(expr hcl.Expression, role registry.Role, what string) (string, bool) {
	tr, ok := l.traversalAddr(expr, "provider", "provider.TYPE or provider.TYPE.ALIAS")
	if !ok {
		return "", false
	}
	typ, trng, ok := stepName(tr, 1)
	if !ok || len(tr) > 3 {
		l.errorf(expr.Range(), "Invalid provider reference", "Expected provider.TYPE or provider.TYPE.ALIAS.")
		return "", false
	}
	if !oneOf(typ, l.providerNames(role)...) {
		roles := l.providerNames(role)
		hint := suggest(typ, roles)
		if _, known := l.reg.Lookup(typ); known {
			hint = fmt.Sprintf(" A %s provider can't be used by %s.", typ, what)
		}
		l.errorf(hcl.RangeBetween(tr[0].SourceRange(), trng), "Invalid provider type",
			"%s needs one of the provider types %s.%s", what, quoteList(roles), hint)
		return "", false
	}
	pa := addrs.Provider{Type: typ}
	if len(tr) == 3 {
		alias, arng, ok := stepName(tr, 2)
		if !ok {
			l.errorf(expr.Range(), "Invalid provider reference", "Expected provider.TYPE.ALIAS.")
			return "", false
		}
		pa.Alias = alias
		if _, ok := l.cfg.Providers[pa.Name()]; !ok {
			var aliases []string
			for k, p := range l.cfg.Providers {
				if p.Type == typ && p.Alias != "" {
					aliases = append(aliases, k[len(typ)+1:])
				}
			}
			l.errorf(hcl.RangeBetween(tr[0].SourceRange(), arng), "Reference to undeclared provider",
				"There is no %s provider with alias %q.%s Declare it with provider %q { alias = %q }.", typ, alias, suggest(alias, aliases), typ, alias)
			return "", false
		}
	}
	key := pa.Name()
	if _, ok := l.cfg.Providers[key]; !ok {
		settings, err := l.reg.Default(typ)
		if err != nil {
			l.errorf(expr.Range(), "Provider needs a configuration", "%s. Declare it with provider %q { ... }.", err, typ)
			return "", false
		}
		l.cfg.Providers[key] = &Provider{Type: typ, Role: role, Addr: pa.String(), Settings: settings, DeclRange: expr.Range()}
	}
	return pa.String(), true
}

// overrideType is the provider type that replaces a model provider in
// an override (Options.ProviderOverrides).
const overrideType = "scripted"

// applyOverrides replaces the model providers that Options.ProviderOverrides
// names with scripted providers decoded from the overrides' bodies, after
// the agents resolved their providers (which creates the implicit
// default ones). An override of a provider the configuration does not
// have, or of a sandbox provider, is an error at the override.
func (l *loader) applyOverrides() {
	pt, ok := l.reg.Lookup(overrideType)
	for _, key := range slices.Sorted(maps.Keys(l.opts.ProviderOverrides)) {
		o := l.opts.ProviderOverrides[key]
		if !ok {
			l.errorf(o.DeclRange, "Provider override unavailable", "The provider type %q that overrides use is not registered.", overrideType)
			return
		}
		p := l.cfg.Providers[key]
		if p == nil {
			var models []string
			for k, p := range l.cfg.Providers {
				if p.Role == registry.RoleModel {
					models = append(models, k)
				}
			}
			l.errorf(o.DeclRange, "Override of an unused provider",
				"The configuration has no model provider %q that an agent uses, so this override would do nothing.%s The model providers are %s.", key, suggest(key, models), quoteList(models))
			continue
		}
		if p.Role != registry.RoleModel {
			l.errorf(o.DeclRange, "Invalid provider override", "provider.%s is a sandbox provider: only model providers can be replaced by scripted replies.", key)
			continue
		}
		body := &boundBody{l: l, body: o.Body, sc: scope{where: "a provider setting"}, nested: "An override_provider's nested setting"}
		settings, diags := pt.DecodeProvider(body)
		l.diags = append(l.diags, diags...)
		p.Type, p.Settings, p.DeclRange = overrideType, settings, o.DeclRange
		if refs, ok := settings.(registry.ScriptRefs); ok {
			agents := refs.ScriptAgents()
			for _, name := range slices.Sorted(maps.Keys(agents)) {
				l.scriptRefs = append(l.scriptRefs, nameRef{name, agents[name]})
			}
		}
	}
}
