package config

import (
	"encoding/json"
	"sort"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/internal/jsonschema"
)

var capabilityTypes = []string{"shell", "filesystem", "compaction", "command", "skills", "memory"}

var capabilitySchemas = map[string]*hcl.BodySchema{
	"shell":      {Attributes: []hcl.AttributeSchema{{Name: "timeout"}, {Name: "max_output_tokens"}, {Name: "needs_approval"}, {Name: "run_as"}}},
	"filesystem": {Attributes: []hcl.AttributeSchema{{Name: "max_image_bytes"}, {Name: "needs_approval"}}},
	"compaction": {Attributes: []hcl.AttributeSchema{{Name: "threshold"}}},
	"skills":     skillsSchema,
	"memory":     memorySchema,
	"command": {Attributes: []hcl.AttributeSchema{
		{Name: "description", Required: true}, {Name: "parameters"}, {Name: "command", Required: true},
		{Name: "timeout"}, {Name: "needs_approval"}, {Name: "run_as"},
	}},
}

var jsonSchemaTypes = []string{"string", "number", "integer", "boolean", "array", "object"}

func (l *loader) decodeCapability(b *hcl.Block) {
	typ, name := b.Labels[0], b.Labels[1]
	schema, ok := capabilitySchemas[typ]
	if !ok {
		l.errorf(b.LabelRanges[0], "Unknown capability type", "There is no capability type %q.%s Capability types are %s.", typ, suggest(typ, capabilityTypes), quoteList(capabilityTypes))
		return
	}
	c := &Capability{Type: typ, Name: name, Addr: addrs.Capability{Type: typ, Name: name}.String(), DeclRange: b.DefRange}
	l.cfg.Capabilities[typ+"."+name] = c
	switch typ {
	case "skills":
		l.decodeSkills(c, b)
		return
	case "memory":
		l.decodeMemory(c, b)
		return
	}
	content, diags := b.Body.Content(schema)
	l.diags = append(l.diags, diags...)
	sc := scope{where: "a capability"}
	val := func(attr string) (cty.Value, hcl.Range, bool) {
		return l.settingAttr(content.Attributes, attr, sc, nil, "A capability setting")
	}
	positive := func(attr string) int64 {
		return l.nonNegativeAttr(content.Attributes, attr, sc, nil, "A capability setting")
	}
	switch typ {
	case "shell":
		s := &ShellCapability{}
		if v, r, ok := val("timeout"); ok {
			s.Timeout, _ = l.toDuration(v, r, "timeout")
		}
		if s.Timeout == 0 {
			s.Timeout = defaultShellTimeout
		}
		s.MaxOutputTokens = int(positive("max_output_tokens"))
		s.NeedsApproval = l.approvalPolicy(content.Attributes["needs_approval"])
		s.RunAs = l.decodeRunAs(c, content.Attributes)
		c.Shell = s
	case "filesystem":
		c.Filesystem = &FilesystemCapability{MaxImageBytes: positive("max_image_bytes"), NeedsApproval: l.approvalPolicy(content.Attributes["needs_approval"])}
	case "compaction":
		c.Compaction = &CompactionCapability{Threshold: positive("threshold")}
	case "command":
		cc := &CommandCapability{}
		if v, r, ok := val("description"); ok {
			cc.Description, _ = l.toString(v, r, "description")
		}
		if v, r, ok := val("command"); ok {
			if cc.Command, ok = l.toStringList(v, r, "command"); ok && len(cc.Command) == 0 {
				l.errorf(r, "Empty command", "command must name the program and its arguments, like [\"python3\", \"tools/query.py\"].")
			}
		}
		if v, r, ok := val("timeout"); ok {
			cc.Timeout, _ = l.toDuration(v, r, "timeout")
		}
		cc.NeedsApproval = l.approvalPolicy(content.Attributes["needs_approval"])
		cc.Parameters = l.commandParameters(content.Attributes["parameters"])
		cc.RunAs = l.decodeRunAs(c, content.Attributes)
		c.Command = cc
	}
}

// commandParameters builds the JSON Schema of a command tool's
// parameters map: every parameter is required, no others are allowed.
func (l *loader) commandParameters(a *hcl.Attribute) json.RawMessage {
	props := map[string]any{}
	required := []string{}
	if a != nil {
		v, ok := l.eval(a.Expr, scope{where: "a capability"}, nil, nil)
		if !ok || !l.noSensitive(v, a.Expr.Range(), "Command parameters") || !l.known(v, a.Expr.Range(), "parameters") {
			return nil
		}
		if !v.IsNull() {
			if !v.Type().IsObjectType() && !v.Type().IsMapType() {
				l.typeErr(a.Expr.Range(), "parameters", "an object of parameter schemas, like { sql = { type = \"string\", description = \"...\" } }", nil)
				return nil
			}
			js, err := ctyjson.Marshal(v, v.Type())
			if err != nil {
				l.typeErr(a.Expr.Range(), "parameters", "representable as JSON", err)
				return nil
			}
			var m map[string]map[string]any
			if err := json.Unmarshal(js, &m); err != nil {
				l.typeErr(a.Expr.Range(), "parameters", "an object whose values are objects like { type = \"string\" }", nil)
				return nil
			}
			for name, p := range m {
				t, _ := p["type"].(string)
				if !oneOf(t, jsonSchemaTypes...) {
					l.errorf(a.Expr.Range(), "Invalid parameter type", "Parameter %q needs type = one of %s.%s", name, quoteList(jsonSchemaTypes), suggest(t, jsonSchemaTypes))
					return nil
				}
				props[name] = p
				required = append(required, name)
			}
		}
	}
	sort.Strings(required)
	js, _ := json.Marshal(map[string]any{
		"type": "object", "properties": props, "required": required, "additionalProperties": false,
	})
	if _, err := jsonschema.Compile(js); err != nil {
		l.errorf(a.Expr.Range(), "Invalid parameters", "The parameters are not a valid JSON Schema: %v. Give each parameter a JSON Schema, like { type = \"string\", description = \"...\" }.", err)
		return nil
	}
	return js
}
