package config

import (
	"encoding/json"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

var providerTypes = []string{"openai", "scripted", "local", "docker", "daytona"}

// modelProviderTypes and sandboxProviderTypes split providerTypes by role.
var modelProviderTypes = []string{"openai", "scripted"}
var sandboxProviderTypes = []string{"local", "docker", "daytona"}

var providerSchemas = map[string]*hcl.BodySchema{
	"openai": {Attributes: []hcl.AttributeSchema{
		{Name: "alias"}, {Name: "base_url"}, {Name: "api"}, {Name: "organization"},
		{Name: "project"}, {Name: "api_key"}, {Name: "timeout"}, {Name: "max_retries"},
	}},
	"scripted": {
		Attributes: []hcl.AttributeSchema{{Name: "alias"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "script", LabelNames: []string{"agent"}}},
	},
	"local":  {Attributes: []hcl.AttributeSchema{{Name: "alias"}, {Name: "isolation"}}},
	"docker": {Attributes: []hcl.AttributeSchema{{Name: "alias"}, {Name: "host"}}},
	"daytona": {Attributes: []hcl.AttributeSchema{
		{Name: "alias"}, {Name: "api_key"}, {Name: "jwt_token"}, {Name: "organization_id"},
		{Name: "api_url"}, {Name: "target"},
	}},
}

// providerString evaluates a provider setting: sensitive values are
// allowed here and recorded for scrubbing.
func (l *loader) providerString(attrs hcl.Attributes, name string, credential bool) string {
	a, ok := attrs[name]
	if !ok {
		return ""
	}
	v, ok := l.eval(a.Expr, scope{where: "a provider setting"}, nil, nil)
	if !ok {
		return ""
	}
	s, _ := l.toString(v, a.Expr.Range(), name)
	if credential || v.ContainsMarked() {
		l.col.add(s)
	}
	return s
}

func (l *loader) decodeProvider(b *hcl.Block) {
	typ := b.Labels[0]
	schema, ok := providerSchemas[typ]
	if !ok {
		l.errorf(b.LabelRanges[0], "Unknown provider type",
			"There is no provider type %q.%s Provider types are %s.", typ, suggest(typ, providerTypes), quoteList(providerTypes))
		return
	}
	content, diags := b.Body.Content(schema)
	l.diags = append(l.diags, diags...)
	p := &Provider{Type: typ, DeclRange: b.DefRange}
	attrs := content.Attributes
	if a, ok := attrs["alias"]; ok {
		p.Alias, _ = l.staticString(a)
		if p.Alias != "" && !validIdent(p.Alias) {
			l.errorf(a.Expr.Range(), "Invalid provider alias", "%q is not a valid alias: use letters, digits, underscores and dashes, starting with a letter.", p.Alias)
			return
		}
	}
	key := typ
	if p.Alias != "" {
		key = typ + "." + p.Alias
	}
	p.Addr = "provider." + key
	if prev, ok := l.cfg.Providers[key]; ok {
		detail := "Give the second one an alias (alias = \"NAME\") and refer to it as provider.%s.NAME."
		l.errorf(b.DefRange, "Duplicate provider configuration",
			"A %s provider configuration was already declared at %s. "+detail, key, rangeString(prev.DeclRange), typ)
		return
	}
	l.cfg.Providers[key] = p
	switch typ {
	case "openai":
		o := &OpenAIProvider{API: "responses"}
		o.BaseURL = l.providerString(attrs, "base_url", false)
		if a, ok := attrs["api"]; ok {
			o.API = l.providerString(attrs, "api", false)
			if !oneOf(o.API, "responses", "chat_completions") {
				l.errorf(a.Expr.Range(), "Invalid api", "api must be \"responses\" or \"chat_completions\", not %q.%s", o.API, suggest(o.API, []string{"responses", "chat_completions"}))
			}
		}
		o.Organization = l.providerString(attrs, "organization", false)
		o.Project = l.providerString(attrs, "project", false)
		o.APIKey = l.providerString(attrs, "api_key", true)
		if a, ok := attrs["timeout"]; ok {
			if v, ok := l.eval(a.Expr, scope{where: "a provider setting"}, nil, nil); ok {
				o.Timeout, _ = l.toDuration(v, a.Expr.Range(), "timeout")
			}
		}
		if a, ok := attrs["max_retries"]; ok {
			if v, ok := l.eval(a.Expr, scope{where: "a provider setting"}, nil, nil); ok {
				if n, ok := l.toInt(v, a.Expr.Range(), "max_retries"); ok {
					if n < 0 {
						l.errorf(a.Expr.Range(), "Invalid max_retries", "max_retries must be 0 or more, got %d.", n)
					}
					o.MaxRetries = n
				}
			}
		}
		p.OpenAI = o
	case "scripted":
		s := &ScriptedProvider{Scripts: map[string][]ScriptReply{}}
		for _, sb := range content.Blocks {
			agent := sb.Labels[0]
			if _, dup := s.Scripts[agent]; dup {
				l.errorf(sb.DefRange, "Duplicate script", "The scripted provider already has a script for agent %q. Put all its replies in one script block.", agent)
				continue
			}
			l.scriptRefs = append(l.scriptRefs, nameRef{agent, sb.LabelRanges[0]})
			s.Scripts[agent] = l.decodeScript(sb)
		}
		p.Scripted = s
	case "local":
		lp := &LocalProvider{Isolation: "namespaces"}
		if a, ok := attrs["isolation"]; ok {
			lp.Isolation = l.providerString(attrs, "isolation", false)
			if !oneOf(lp.Isolation, "namespaces", "none") {
				l.errorf(a.Expr.Range(), "Invalid isolation", "isolation must be \"namespaces\" or \"none\", not %q.%s", lp.Isolation, suggest(lp.Isolation, []string{"namespaces", "none"}))
			}
		}
		p.Local = lp
	case "docker":
		p.Docker = &DockerProvider{Host: l.providerString(attrs, "host", false)}
	case "daytona":
		p.Daytona = &DaytonaProvider{
			APIKey:         l.providerString(attrs, "api_key", true),
			JWTToken:       l.providerString(attrs, "jwt_token", true),
			OrganizationID: l.providerString(attrs, "organization_id", false),
			APIURL:         l.providerString(attrs, "api_url", false),
			Target:         l.providerString(attrs, "target", false),
		}
	}
}

var scriptSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "reply"}}}
var replySchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "text"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "call", LabelNames: []string{"tool"}}},
}
var callSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "arguments"}}}

func (l *loader) decodeScript(b *hcl.Block) []ScriptReply {
	content, diags := b.Body.Content(scriptSchema)
	l.diags = append(l.diags, diags...)
	replies := []ScriptReply{}
	for _, rb := range content.Blocks {
		rc, diags := rb.Body.Content(replySchema)
		l.diags = append(l.diags, diags...)
		r := ScriptReply{DeclRange: rb.DefRange}
		if a, ok := rc.Attributes["text"]; ok {
			if v, ok := l.eval(a.Expr, scope{where: "a scripted reply"}, nil, nil); ok && l.noSensitive(v, a.Expr.Range(), "A scripted reply") {
				r.Text, _ = l.toString(v, a.Expr.Range(), "text")
			}
		}
		for _, cb := range rc.Blocks {
			cc, diags := cb.Body.Content(callSchema)
			l.diags = append(l.diags, diags...)
			call := ScriptCall{Name: cb.Labels[0], Arguments: json.RawMessage("{}")}
			if a, ok := cc.Attributes["arguments"]; ok {
				v, ok := l.eval(a.Expr, scope{where: "scripted call arguments"}, nil, nil)
				if ok && l.noSensitive(v, a.Expr.Range(), "Scripted call arguments") && l.known(v, a.Expr.Range(), "arguments") {
					if !v.Type().IsObjectType() && !v.Type().IsMapType() {
						l.typeErr(a.Expr.Range(), "arguments", "an object, like { cmd = \"ls\" }", nil)
					} else if js, err := ctyjson.Marshal(v, v.Type()); err != nil {
						l.typeErr(a.Expr.Range(), "arguments", "representable as JSON", err)
					} else {
						call.Arguments = js
					}
				}
			}
			r.Calls = append(r.Calls, call)
		}
		if r.Text == "" && len(r.Calls) == 0 {
			l.errorf(rb.DefRange, "Empty reply", "A reply needs text = \"...\", one or more call \"TOOL\" { arguments = {...} } blocks, or both.")
		}
		replies = append(replies, r)
	}
	return replies
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
// provider that has no block (as Terraform does). roles lists the types
// accepted here.
func (l *loader) resolveProvider(expr hcl.Expression, roles []string, what string) (string, bool) {
	tr, ok := l.traversalAddr(expr, "provider", "provider.TYPE or provider.TYPE.ALIAS")
	if !ok {
		return "", false
	}
	typ, trng, ok := stepName(tr, 1)
	if !ok || len(tr) > 3 {
		l.errorf(expr.Range(), "Invalid provider reference", "Expected provider.TYPE or provider.TYPE.ALIAS.")
		return "", false
	}
	if !oneOf(typ, roles...) {
		hint := suggest(typ, roles)
		if oneOf(typ, providerTypes...) {
			hint = fmt.Sprintf(" A %s provider can't be used by %s.", typ, what)
		}
		l.errorf(hcl.RangeBetween(tr[0].SourceRange(), trng), "Invalid provider type",
			"%s needs one of the provider types %s.%s", what, quoteList(roles), hint)
		return "", false
	}
	key := typ
	if len(tr) == 3 {
		alias, arng, ok := stepName(tr, 2)
		if !ok {
			l.errorf(expr.Range(), "Invalid provider reference", "Expected provider.TYPE.ALIAS.")
			return "", false
		}
		key = typ + "." + alias
		if _, ok := l.cfg.Providers[key]; !ok {
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
	if _, ok := l.cfg.Providers[key]; !ok {
		p := &Provider{Type: typ, Addr: "provider." + key, DeclRange: expr.Range()}
		switch typ {
		case "openai":
			p.OpenAI = &OpenAIProvider{API: "responses"}
		case "scripted":
			p.Scripted = &ScriptedProvider{Scripts: map[string][]ScriptReply{}}
		case "local":
			p.Local = &LocalProvider{Isolation: "namespaces"}
		case "docker":
			p.Docker = &DockerProvider{}
		case "daytona":
			p.Daytona = &DaytonaProvider{}
		}
		l.cfg.Providers[key] = p
	}
	return "provider." + key, true
}
