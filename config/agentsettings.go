package config

import (
	"maps"
	"slices"
	"sort"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
)

// agentSettingsSchema lists an agent's model settings: the Agents SDK's
// ModelSettings that the Responses and Chat Completions APIs accept, by
// the APIs' names (docs/openai-provider.md, "Model settings"). Whether
// the agent's provider's API accepts each one is checked once the
// providers are known (checkModelFeatures).
var agentSettingsSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "reasoning_effort"}, {Name: "reasoning_summary"}, {Name: "verbosity"}, {Name: "temperature"},
	{Name: "top_p"}, {Name: "max_output_tokens"}, {Name: "parallel_tool_calls"}, {Name: "tool_choice"},
	{Name: "frequency_penalty"}, {Name: "presence_penalty"}, {Name: "truncation"}, {Name: "store"},
	{Name: "metadata"}, {Name: "prompt_cache_retention"}, {Name: "prompt_cache_options"}, {Name: "include"},
}}

// includeValues are the values of the include setting (the Responses
// API's IncludeEnum).
var includeValues = []string{
	"file_search_call.results", "web_search_call.results", "web_search_call.action.sources",
	"message.input_image.image_url", "computer_call_output.output.image_url", "code_interpreter_call.outputs",
	"reasoning.encrypted_content", "message.output_text.logprobs",
}

// Limits of the metadata setting, as the OpenAI API sets them.
const (
	maxMetadataPairs  = 16
	maxMetadataKey    = 64
	maxMetadataString = 512
)

func (l *loader) decodeAgentSettings(ag *Agent, b *hcl.Block) {
	content, diags := b.Body.Content(agentSettingsSchema)
	l.diags = append(l.diags, diags...)
	ranges := map[string]hcl.Range{}
	for name, a := range content.Attributes {
		v, ok := l.eval(a.Expr, scope{where: "agent settings"}, nil, nil)
		if !ok || !l.noSensitive(v, a.Expr.Range(), "An agent setting") || v.IsNull() {
			continue
		}
		ranges[name] = a.Expr.Range()
		if !l.agentSetting(&ag.Settings, name, v, a.Expr.Range()) {
			l.agentSettingMore(&ag.Settings, name, v, a.Expr.Range())
		}
	}
	l.settingRanges[ag.Name] = ranges
}

// enumSetting reads v as one of allowed.
func (l *loader) enumSetting(name string, v cty.Value, r hcl.Range, allowed ...string) string {
	str, ok := l.toString(v, r, name)
	if ok && !oneOf(str, allowed...) {
		l.errorf(r, "Invalid "+name, "%s must be one of %s, not %q.%s", name, quoteList(allowed), str, suggest(str, allowed))
	}
	return str
}

// agentSetting decodes the settings agentctl has always had; false for
// another name.
func (l *loader) agentSetting(s *AgentSettings, name string, v cty.Value, r hcl.Range) bool {
	switch name {
	case "reasoning_effort":
		s.ReasoningEffort = l.enumSetting(name, v, r, "none", "minimal", "low", "medium", "high", "xhigh")
	case "reasoning_summary":
		s.ReasoningSummary = l.enumSetting(name, v, r, "auto", "concise", "detailed")
	case "verbosity":
		s.Verbosity = l.enumSetting(name, v, r, "low", "medium", "high")
	case "tool_choice":
		s.ToolChoice, _ = l.toString(v, r, name)
	case "temperature":
		if f, ok := l.toFloat(v, r, name); ok {
			s.Temperature = &f
		}
	case "top_p":
		if f, ok := l.toFloat(v, r, name); ok {
			s.TopP = &f
		}
	case "max_output_tokens":
		s.MaxOutputTokens, _ = l.toInt64(v, r, name)
	case "parallel_tool_calls":
		if bv, ok := l.toBool(v, r, name); ok {
			s.ParallelToolCalls = &bv
		}
	default:
		return false
	}
	return true
}

// agentSettingMore decodes the rest of the Agents SDK's model settings.
func (l *loader) agentSettingMore(s *AgentSettings, name string, v cty.Value, r hcl.Range) {
	switch name {
	case "frequency_penalty", "presence_penalty":
		f, ok := l.toFloat(v, r, name)
		if !ok {
			return
		}
		if f < -2 || f > 2 {
			l.errorf(r, "Invalid "+name, "%s must be from -2 to 2, got %g.", name, f)
		}
		if name == "frequency_penalty" {
			s.FrequencyPenalty = &f
		} else {
			s.PresencePenalty = &f
		}
	case "truncation":
		s.Truncation = l.enumSetting(name, v, r, "auto", "disabled")
	case "store":
		if bv, ok := l.toBool(v, r, name); ok {
			s.Store = &bv
		}
	case "metadata":
		s.Metadata = l.metadataSetting(v, r)
	case "prompt_cache_retention":
		s.PromptCacheRetention = l.enumSetting(name, v, r, "in_memory", "24h")
	case "prompt_cache_options":
		s.PromptCacheMode, s.PromptCacheTTL = l.promptCacheOptions(v, r)
	case "include":
		list, ok := l.toStringList(v, r, name)
		for _, inc := range list {
			if ok && !oneOf(inc, includeValues...) {
				l.errorf(r, "Invalid include", "include values are %s; %q is not one.%s", quoteList(includeValues), inc, suggest(inc, includeValues))
				ok = false
			}
		}
		s.Include = list
	}
}

// metadataSetting reads the metadata map within the API's limits.
func (l *loader) metadataSetting(v cty.Value, r hcl.Range) map[string]string {
	m, ok := l.toStringMap(v, r, "metadata")
	if !ok {
		return nil
	}
	if len(m) > maxMetadataPairs {
		l.errorf(r, "Invalid metadata", "metadata may hold at most %d pairs, not %d.", maxMetadataPairs, len(m))
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch {
		case utf8.RuneCountInString(k) > maxMetadataKey:
			l.errorf(r, "Invalid metadata", "metadata key %q is longer than %d characters.", k, maxMetadataKey)
		case utf8.RuneCountInString(m[k]) > maxMetadataString:
			l.errorf(r, "Invalid metadata", "metadata value of %q is longer than %d characters.", k, maxMetadataString)
		}
	}
	return m
}

// promptCacheOptions reads prompt_cache_options = { mode, ttl }.
func (l *loader) promptCacheOptions(v cty.Value, r hcl.Range) (mode, ttl string) {
	m, ok := l.toStringMap(v, r, "prompt_cache_options")
	if !ok {
		return "", ""
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch k {
		case "mode":
			mode = l.enumSetting("prompt_cache_options.mode", cty.StringVal(m[k]), r, "implicit", "explicit")
		case "ttl":
			// The only lifetime the API accepts today.
			ttl = l.enumSetting("prompt_cache_options.ttl", cty.StringVal(m[k]), r, "30m")
		default:
			l.errorf(r, "Invalid prompt_cache_options", "prompt_cache_options has no %q: it may set \"mode\" and \"ttl\".%s", k, suggest(k, []string{"mode", "ttl"}))
		}
	}
	return mode, ttl
}
