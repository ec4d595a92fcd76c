package openai

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/zclconf/go-cty/cty"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/registry"
)

// The hosted tools of the Responses API that an agent's tool block may
// name with type = "...": the service runs them itself.
const (
	HostedWebSearch       = "web_search"
	HostedFileSearch      = "file_search"
	HostedCodeInterpreter = "code_interpreter"
	HostedImageGeneration = "image_generation"
)

// HostedToolTypes lists the hosted tools, in the order the documentation
// gives them.
var HostedToolTypes = []string{HostedWebSearch, HostedFileSearch, HostedCodeInterpreter, HostedImageGeneration}

// hostedSchemas are the arguments of each hosted tool's block, named as
// the Responses API names the tool's fields (docs/openai-provider.md,
// "Hosted tools").
var hostedSchemas = map[string]*hcl.BodySchema{
	HostedWebSearch: {Attributes: []hcl.AttributeSchema{
		{Name: "search_context_size"}, {Name: "allowed_domains"}, {Name: "user_location"}, {Name: "external_web_access"},
	}},
	HostedFileSearch: {Attributes: []hcl.AttributeSchema{
		{Name: "vector_store_ids", Required: true}, {Name: "max_num_results"}, {Name: "ranking_options"},
	}},
	HostedCodeInterpreter: {Attributes: []hcl.AttributeSchema{{Name: "container"}}},
	HostedImageGeneration: {Attributes: []hcl.AttributeSchema{
		{Name: "model"}, {Name: "quality"}, {Name: "size"}, {Name: "output_format"}, {Name: "output_compression"},
		{Name: "moderation"}, {Name: "background"}, {Name: "input_fidelity"}, {Name: "action"},
	}},
}

// DecodeHostedTool decodes the body of an agent's tool block whose type
// is one of HostedToolTypes, for an agent whose provider has settings s
// (registry.Type.DecodeHostedTool): the tool's definition as the
// Responses API takes it. A provider speaking Chat Completions has no
// hosted tools, which is reported at typeRange.
func DecodeHostedTool(settings any, typ string, typeRange hcl.Range, body hcl.Body) (model.HostedTool, hcl.Diagnostics) {
	schema, ok := hostedSchemas[typ]
	if !ok {
		return model.HostedTool{}, hcl.Diagnostics{registry.Errorf(typeRange, "Unknown tool type",
			"The openai provider has no hosted tool %q.%s Its hosted tools are %s; leave type out for a tool that runs another agent (agent = agent.NAME).",
			typ, registry.Suggest(typ, HostedToolTypes), quoted(HostedToolTypes))}
	}
	if s, ok := settings.(*ProviderSettings); ok && s.API == APIChatCompletions {
		return model.HostedTool{}, hcl.Diagnostics{registry.Errorf(typeRange, "Hosted tool needs the Responses API",
			"%s is a hosted tool of the Responses API, and this agent's provider speaks Chat Completions (api = %q), which has none. Use a provider with api = %q (the default), or remove the tool.",
			typ, APIChatCompletions, APIResponses)}
	}
	content, diags := body.Content(schema)
	d := &hostedDecoder{attrs: content.Attributes, def: map[string]any{"type": typ}, diags: diags}
	switch typ {
	case HostedWebSearch:
		d.webSearch()
	case HostedFileSearch:
		d.fileSearch()
	case HostedCodeInterpreter:
		d.codeInterpreter()
	case HostedImageGeneration:
		d.imageGeneration()
	}
	js, err := json.Marshal(d.def)
	if err != nil {
		d.diags = append(d.diags, registry.Errorf(typeRange, "Invalid tool", "The tool's definition cannot be encoded as JSON: %v.", err))
	}
	return model.HostedTool{Type: typ, Config: js}, d.diags
}

// hostedDecoder builds one hosted tool's definition (def) from its
// block's arguments, reporting each problem at its argument.
type hostedDecoder struct {
	attrs hcl.Attributes
	def   map[string]any
	diags hcl.Diagnostics
}

func (d *hostedDecoder) errorf(name, summary, detail string, args ...any) {
	d.diags = append(d.diags, registry.Errorf(d.attrs[name].Expr.Range(), summary, detail, args...))
}

// enum copies the string argument name to field of def when it is one of
// allowed.
func (d *hostedDecoder) enum(name string, def map[string]any, field string, allowed ...string) {
	var s string
	if !registry.Attr(d.attrs, name, &s, &d.diags) {
		return
	}
	if !slices.Contains(allowed, s) {
		d.errorf(name, "Invalid "+name, "%s must be one of %s, not %q.%s", name, quoted(allowed), s, registry.Suggest(s, allowed))
		return
	}
	def[field] = s
}

// intIn copies the whole-number argument name to def when it lies in
// [lo, hi].
func (d *hostedDecoder) intIn(name string, lo, hi int64) {
	var n int64
	if !registry.Attr(d.attrs, name, &n, &d.diags) {
		return
	}
	if n < lo || n > hi {
		d.errorf(name, "Invalid "+name, "%s must be from %d to %d, got %d.", name, lo, hi, n)
		return
	}
	d.def[name] = n
}

// strings decodes the list of non-empty strings argument name.
func (d *hostedDecoder) strings(name string) ([]string, bool) {
	var list []string
	if !registry.Attr(d.attrs, name, &list, &d.diags) {
		return nil, false
	}
	for _, s := range list {
		if strings.TrimSpace(s) == "" {
			d.errorf(name, "Invalid "+name, "%s may not hold an empty string.", name)
			return nil, false
		}
	}
	return list, true
}

// object decodes the object argument name, whose keys must be among
// allowed, into its attribute values.
func (d *hostedDecoder) object(name string, allowed ...string) (map[string]cty.Value, bool) {
	a, ok := d.attrs[name]
	if !ok {
		return nil, false
	}
	var v cty.Value
	if ds := gohcl.DecodeExpression(a.Expr, nil, &v); ds.HasErrors() {
		d.diags = append(d.diags, ds...)
		return nil, false
	}
	if v.IsNull() || !v.IsWhollyKnown() || !(v.Type().IsObjectType() || v.Type().IsMapType()) {
		d.errorf(name, "Invalid "+name, "%s must be an object like { %s = ... }.", name, allowed[0])
		return nil, false
	}
	out := map[string]cty.Value{}
	for k, e := range v.AsValueMap() {
		if !slices.Contains(allowed, k) {
			d.errorf(name, "Invalid "+name, "%s has no %q: it may set %s.%s", name, k, quoted(allowed), registry.Suggest(k, allowed))
			return nil, false
		}
		out[k] = e
	}
	return out, true
}

func (d *hostedDecoder) webSearch() {
	d.enum("search_context_size", d.def, "search_context_size", "low", "medium", "high")
	if list, ok := d.strings("allowed_domains"); ok {
		d.def["filters"] = map[string]any{"allowed_domains": list}
	}
	var external bool
	if registry.Attr(d.attrs, "external_web_access", &external, &d.diags) {
		d.def["external_web_access"] = external
	}
	fields, ok := d.object("user_location", "country", "city", "region", "timezone")
	if !ok {
		return
	}
	loc := map[string]any{"type": "approximate"}
	for k, v := range fields {
		if v.IsNull() {
			continue
		}
		if v.Type() != cty.String || v.AsString() == "" {
			d.errorf("user_location", "Invalid user_location", "user_location.%s must be a non-empty string.", k)
			return
		}
		loc[k] = v.AsString()
	}
	if c, ok := loc["country"].(string); ok && (len(c) != 2 || strings.ToUpper(c) != c) {
		d.errorf("user_location", "Invalid user_location", "user_location.country is the two-letter ISO country code, like \"GB\", not %q.", c)
		return
	}
	d.def["user_location"] = loc
}

func (d *hostedDecoder) fileSearch() {
	if list, ok := d.strings("vector_store_ids"); ok {
		if len(list) == 0 {
			d.errorf("vector_store_ids", "Invalid vector_store_ids", "vector_store_ids must name at least one vector store, like [\"vs_abc123\"].")
		}
		d.def["vector_store_ids"] = list
	}
	d.intIn("max_num_results", 1, 50)
	fields, ok := d.object("ranking_options", "ranker", "score_threshold")
	if !ok {
		return
	}
	opts := map[string]any{}
	if v := fields["ranker"]; v != cty.NilVal && !v.IsNull() {
		rankers := []string{"auto", "default-2024-11-15"}
		if v.Type() != cty.String || !slices.Contains(rankers, v.AsString()) {
			d.errorf("ranking_options", "Invalid ranking_options", "ranking_options.ranker must be one of %s.", quoted(rankers))
			return
		}
		opts["ranker"] = v.AsString()
	}
	if v := fields["score_threshold"]; v != cty.NilVal && !v.IsNull() {
		if v.Type() != cty.Number {
			d.errorf("ranking_options", "Invalid ranking_options", "ranking_options.score_threshold must be a number from 0 to 1.")
			return
		}
		f, _ := v.AsBigFloat().Float64()
		if f < 0 || f > 1 {
			d.errorf("ranking_options", "Invalid ranking_options", "ranking_options.score_threshold must be from 0 to 1, got %g.", f)
			return
		}
		opts["score_threshold"] = f
	}
	d.def["ranking_options"] = opts
}

// codeInterpreter sets the container: a container id, or an automatic
// one ({type = "auto"}, the default) with files and a memory limit.
func (d *hostedDecoder) codeInterpreter() {
	auto := map[string]any{"type": "auto"}
	d.def["container"] = auto
	a, ok := d.attrs["container"]
	if !ok {
		return
	}
	var v cty.Value
	if ds := gohcl.DecodeExpression(a.Expr, nil, &v); ds.HasErrors() {
		d.diags = append(d.diags, ds...)
		return
	}
	if !v.IsNull() && v.IsKnown() && v.Type() == cty.String {
		if v.AsString() == "" {
			d.errorf("container", "Invalid container", "container is a container id like \"cntr_abc123\", or an object like { file_ids = [...], memory_limit = \"4g\" }; it can't be empty.")
			return
		}
		d.def["container"] = v.AsString()
		return
	}
	fields, ok := d.object("container", "file_ids", "memory_limit")
	if !ok {
		return
	}
	if v := fields["file_ids"]; v != cty.NilVal && !v.IsNull() {
		var ids []string
		if !(v.Type().IsListType() || v.Type().IsTupleType()) {
			d.errorf("container", "Invalid container", "container.file_ids must be a list of file ids.")
			return
		}
		for _, e := range v.AsValueSlice() {
			if e.Type() != cty.String || e.AsString() == "" {
				d.errorf("container", "Invalid container", "container.file_ids must be a list of file ids like \"file-abc123\".")
				return
			}
			ids = append(ids, e.AsString())
		}
		if len(ids) > 50 {
			d.errorf("container", "Invalid container", "container.file_ids may name at most 50 files, not %d.", len(ids))
			return
		}
		auto["file_ids"] = ids
	}
	if v := fields["memory_limit"]; v != cty.NilVal && !v.IsNull() {
		limits := []string{"1g", "4g", "16g", "64g"}
		if v.Type() != cty.String || !slices.Contains(limits, v.AsString()) {
			d.errorf("container", "Invalid container", "container.memory_limit must be one of %s.", quoted(limits))
			return
		}
		auto["memory_limit"] = v.AsString()
	}
}

func (d *hostedDecoder) imageGeneration() {
	var s string
	if registry.Attr(d.attrs, "model", &s, &d.diags) {
		if s == "" {
			d.errorf("model", "Invalid model", "model names the image model, like \"gpt-image-1\"; it can't be empty.")
		}
		d.def["model"] = s
	}
	if registry.Attr(d.attrs, "size", &s, &d.diags) {
		if !validImageSize(s) {
			d.errorf("size", "Invalid size", "size must be \"auto\" or WIDTHxHEIGHT, like \"1024x1024\", not %q.", s)
		}
		d.def["size"] = s
	}
	d.enum("quality", d.def, "quality", "low", "medium", "high", "auto")
	d.enum("output_format", d.def, "output_format", "png", "webp", "jpeg")
	d.intIn("output_compression", 0, 100)
	d.enum("moderation", d.def, "moderation", "auto", "low")
	d.enum("background", d.def, "background", "transparent", "opaque", "auto")
	d.enum("input_fidelity", d.def, "input_fidelity", "high", "low")
	d.enum("action", d.def, "action", "generate", "edit", "auto")
}

func validImageSize(s string) bool {
	if s == "auto" {
		return true
	}
	w, h, ok := strings.Cut(s, "x")
	var wi, hi int
	_, err1 := fmt.Sscanf(w, "%d", &wi)
	_, err2 := fmt.Sscanf(h, "%d", &hi)
	return ok && err1 == nil && err2 == nil && wi > 0 && hi > 0 && fmt.Sprintf("%dx%d", wi, hi) == s
}

func quoted(list []string) string {
	q := make([]string, len(list))
	for i, s := range list {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// responsesOnly and chatOnly are the agent settings (by their names in an
// agent's settings block) that only one of the two APIs accepts; every
// other setting is accepted by both.
var (
	responsesOnly = []string{"reasoning_summary", "truncation", "include"}
	chatOnly      = []string{"frequency_penalty", "presence_penalty"}
)

// UnsupportedSetting implements registry.SettingsSupport: why the agent
// setting name is not accepted by the API these settings speak, "" when
// it is.
func (s *ProviderSettings) UnsupportedSetting(name string) string {
	switch {
	case s.API == APIChatCompletions && slices.Contains(responsesOnly, name):
		return fmt.Sprintf("%s is a setting of the Responses API, and this agent's provider speaks Chat Completions (api = %q), which does not accept it. Use a provider with api = %q (the default), or remove the setting", name, APIChatCompletions, APIResponses)
	case s.API != APIChatCompletions && slices.Contains(chatOnly, name):
		return fmt.Sprintf("%s is a setting of the Chat Completions API, and this agent's provider speaks the Responses API, which does not accept it. Use a provider with api = %q, or remove the setting", name, APIChatCompletions)
	}
	return ""
}

// HostedCallSummary is a one-line account of a hosted tool call item (the
// Responses API's encoding, raw) for transcripts: what the tool did and
// how it ended, without its results.
func HostedCallSummary(itemType string, raw json.RawMessage) string {
	var c struct {
		Status string `json:"status"`
		Action struct {
			Type    string   `json:"type"`
			Query   string   `json:"query"`
			Queries []string `json:"queries"`
			URL     string   `json:"url"`
			Pattern string   `json:"pattern"`
		} `json:"action"`
		Queries []string          `json:"queries"`
		Results []json.RawMessage `json:"results"`
		Code    string            `json:"code"`
		Outputs []struct {
			Type string `json:"type"`
		} `json:"outputs"`
		Result string `json:"result"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Sprintf("%s (unreadable: %v)", itemType, err)
	}
	var what string
	switch itemType {
	case "web_search_call":
		switch a := c.Action; a.Type {
		case "search":
			qs := a.Queries
			if a.Query != "" && !slices.Contains(qs, a.Query) {
				qs = append([]string{a.Query}, qs...)
			}
			what = "web search " + quoted(qs)
		case "open_page":
			what = "open page " + a.URL
		case "find", "find_in_page":
			what = fmt.Sprintf("find %q in %s", a.Pattern, a.URL)
		default:
			what = "web search"
		}
	case "file_search_call":
		what = "file search " + quoted(c.Queries)
		if c.Results != nil {
			what += fmt.Sprintf(", %d results", len(c.Results))
		}
	case "code_interpreter_call":
		lines := strings.Count(strings.TrimRight(c.Code, "\n"), "\n") + 1
		first, _, _ := strings.Cut(c.Code, "\n")
		what = fmt.Sprintf("code interpreter: %s", first)
		if lines > 1 {
			what += fmt.Sprintf(" (+%d lines)", lines-1)
		}
		if len(c.Outputs) > 0 {
			what += fmt.Sprintf(", %d outputs", len(c.Outputs))
		}
	case "image_generation_call":
		what = "image generation"
		if c.Result != "" {
			what += fmt.Sprintf(", %d bytes of base64 image", len(c.Result))
		}
	default:
		what = itemType
	}
	if c.Status != "" {
		what += " (" + c.Status + ")"
	}
	return what
}
