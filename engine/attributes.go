package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// attributes collects the values a digest covers, by attribute path, as
// the state records them (state.Attribute) so that plan can name what
// changed from what. A value holding a sensitive value (the scrubber's
// rules) is kept only as its digest, as is one too long to keep.
type attributes struct {
	sc *sandbox.Scrubber
	m  map[string]state.Attribute
}

func newAttributes(sc *sandbox.Scrubber) *attributes {
	return &attributes{sc: sc, m: map[string]state.Attribute{}}
}

// set records v (plain data) at path.
func (a *attributes) set(path string, v any) {
	b := attributeJSON(v)
	switch {
	case a.sc.Contains(b) || isSensitiveString(a.sc, v):
		a.m[path] = state.Attribute{Digest: digestString(string(b)), Sensitive: true}
	case len(b) > state.MaxAttributeBytes:
		a.m[path] = state.Attribute{Digest: digestString(string(b))}
	default:
		a.m[path] = state.Attribute{Value: b}
	}
}

// setDigest records only v's digest at path, for a value that is not
// worth showing (a scripted provider's replies).
func (a *attributes) setDigest(path string, v any) {
	b := attributeJSON(v)
	a.m[path] = state.Attribute{Digest: digestString(string(b)), Sensitive: a.sc.Contains(b)}
}

func isSensitiveString(sc *sandbox.Scrubber, v any) bool {
	s, ok := v.(string)
	return ok && sc.Contains([]byte(s))
}

// attributeJSON is v's compact JSON without HTML escapes; a duration is
// its text ("2m0s").
func attributeJSON(v any) json.RawMessage {
	if d, ok := v.(time.Duration); ok {
		v = d.String()
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only plain data is recorded; a failure must not look like a
		// value.
		return attributeJSON("unencodable: " + err.Error())
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// agentAttributes records what agentDigest covers for agent name in the
// run block named run, under agent.NAME.
func agentAttributes(cfg *config.Config, name, run string, at *attributes) {
	a := cfg.Agents[name]
	if a == nil {
		return
	}
	p := agentAddr(name) + "."
	set := func(path string, v any, ok bool) {
		if ok {
			at.set(p+path, v)
		}
	}
	set("model", a.Model, a.Model != "")
	provAddr := cfg.ModelProvider(a)
	set("provider", provAddr, true)
	if prov := cfg.Providers[providerKey(provAddr)]; prov != nil {
		settings, _ := runSettings(prov.Settings, run)
		if f, ok := settings.(registry.Fingerprinter); ok {
			// What the provider type says determines answers: scalars by
			// value, anything larger (a scripted provider's script) by
			// digest.
			fp := f.Fingerprint(name)
			for _, k := range slices.Sorted(maps.Keys(fp)) {
				switch v := fp[k].(type) {
				case string:
					set("provider."+k, v, v != "")
				case bool, int, int64, float64:
					set("provider."+k, v, true)
				default:
					if v != nil {
						at.setDigest(p+"provider."+k, v)
					}
				}
			}
		}
	}
	set("instructions", a.Instructions, a.Instructions != "")
	s := a.Settings
	set("settings.reasoning_effort", s.ReasoningEffort, s.ReasoningEffort != "")
	set("settings.reasoning_summary", s.ReasoningSummary, s.ReasoningSummary != "")
	set("settings.verbosity", s.Verbosity, s.Verbosity != "")
	set("settings.tool_choice", s.ToolChoice, s.ToolChoice != "")
	set("settings.max_output_tokens", s.MaxOutputTokens, s.MaxOutputTokens != 0)
	if s.Temperature != nil {
		set("settings.temperature", *s.Temperature, true)
	}
	if s.TopP != nil {
		set("settings.top_p", *s.TopP, true)
	}
	if s.ParallelToolCalls != nil {
		set("settings.parallel_tool_calls", *s.ParallelToolCalls, true)
	}
	moreSettingAttributes(s, set)
	set("capabilities", a.Capabilities, len(a.Capabilities) > 0)
	for _, addr := range a.Capabilities {
		c := cfg.Capabilities[capKey(addr)]
		if c == nil {
			continue
		}
		cp := addr + "."
		switch {
		case c.Shell != nil:
			set(cp+"timeout", c.Shell.Timeout, c.Shell.Timeout != 0)
			set(cp+"max_output_tokens", c.Shell.MaxOutputTokens, c.Shell.MaxOutputTokens != 0)
			set(cp+"needs_approval", c.Shell.NeedsApproval.Value(), approvalSet(c.Shell.NeedsApproval))
			set(cp+"run_as", c.Shell.RunAs, c.Shell.RunAs != "")
		case c.Filesystem != nil:
			set(cp+"max_image_bytes", c.Filesystem.MaxImageBytes, c.Filesystem.MaxImageBytes != 0)
			set(cp+"needs_approval", c.Filesystem.NeedsApproval.Value(), approvalSet(c.Filesystem.NeedsApproval))
		case c.Compaction != nil:
			set(cp+"threshold", c.Compaction.Threshold, c.Compaction.Threshold != 0)
		case c.Command != nil:
			cc := c.Command
			set(cp+"description", cc.Description, cc.Description != "")
			set(cp+"parameters", cc.Parameters, len(cc.Parameters) > 0)
			set(cp+"command", cc.Command, len(cc.Command) > 0)
			set(cp+"timeout", cc.Timeout, cc.Timeout != 0)
			set(cp+"needs_approval", cc.NeedsApproval.Value(), approvalSet(cc.NeedsApproval))
			set(cp+"run_as", cc.RunAs, cc.RunAs != "")
		}
	}
	set("handoffs", a.Handoffs, len(a.Handoffs) > 0)
	for _, t := range a.Tools {
		set("tool."+t.Name, map[string]string{"agent": agentAddr(t.Agent), "description": t.Description}, true)
		set("tool."+t.Name+".needs_approval", t.NeedsApproval.Value(), approvalSet(t.NeedsApproval))
	}
	for _, t := range a.HostedTools {
		set("tool."+t.Name, t.Config, true)
	}
	for _, h := range slices.Sorted(maps.Keys(a.HandoffFilters)) {
		set("handoff."+h+".input_filter", a.HandoffFilters[h], true)
	}
	set("output_schema", a.OutputSchema, len(a.OutputSchema) > 0)
}

// moreSettingAttributes records the model settings beyond the first
// ones, each when it is set.
func moreSettingAttributes(s config.AgentSettings, set func(path string, v any, ok bool)) {
	if s.FrequencyPenalty != nil {
		set("settings.frequency_penalty", *s.FrequencyPenalty, true)
	}
	if s.PresencePenalty != nil {
		set("settings.presence_penalty", *s.PresencePenalty, true)
	}
	if s.Store != nil {
		set("settings.store", *s.Store, true)
	}
	set("settings.truncation", s.Truncation, s.Truncation != "")
	set("settings.metadata", s.Metadata, len(s.Metadata) > 0)
	set("settings.prompt_cache_retention", s.PromptCacheRetention, s.PromptCacheRetention != "")
	set("settings.prompt_cache_options.mode", s.PromptCacheMode, s.PromptCacheMode != "")
	set("settings.prompt_cache_options.ttl", s.PromptCacheTTL, s.PromptCacheTTL != "")
	set("settings.include", s.Include, len(s.Include) > 0)
}

// sandboxAttributes records what sandboxConfigDigest covers, and the
// manifest's persisted environment (env.NAME), of one sandbox.
func sandboxAttributes(cfg *config.Config, sb *config.SandboxInstance, sc *sandbox.Scrubber) map[string]state.Attribute {
	at := newAttributes(sc)
	set := func(path string, v any, ok bool) {
		if ok {
			at.set(path, v)
		}
	}
	set("provider", sb.Provider, true)
	if p := cfg.Providers[providerKey(sb.Provider)]; p != nil {
		set("provider.type", p.Type, true)
		if f, ok := p.Settings.(registry.Fingerprinter); ok {
			if iso, _ := f.Fingerprint("")["isolation"].(string); iso != "" {
				set("isolation", iso, true)
			}
		}
	}
	set("image", sb.Image, sb.Image != "")
	set("network", sb.Network, sb.Network != "")
	set("ports", sb.Ports, len(sb.Ports) > 0)
	r := sb.Resources
	set("resources.cpus", r.CPUs, r.CPUs != 0)
	set("resources.memory", r.MemoryMB, r.MemoryMB != 0)
	set("resources.disk", r.DiskGB, r.DiskGB != 0)
	set("resources.pids", r.PIDs, r.PIDs != 0)
	set("resources.gpus", r.GPUs, r.GPUs != 0)
	// The provider type's settings, by the JSON names the digest uses.
	var settings map[string]any
	if b, err := json.Marshal(sb.Settings); err == nil {
		_ = json.Unmarshal(b, &settings)
	}
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		set("settings."+k, settings[k], true)
	}
	set("root", manifestRoot(cfg, sb), true)
	accts := sandboxAccounts(cfg, sb)
	for _, u := range accts.Users {
		set("user."+u.Name, map[string]any{"uid": u.UID}, true)
	}
	for _, g := range accts.Groups {
		set("group."+g.Name, map[string]any{"gid": g.GID, "users": g.Users}, true)
	}
	setMountAttributes(cfg, sb, func(p, v string) { set(p, v, true) })
	if m := cfg.Manifests[sb.Manifest]; m != nil {
		for k, v := range m.Env {
			set("env."+k, v, true)
		}
	}
	return at.m
}

// isEnvAttribute reports whether a sandbox attribute comes from the
// manifest (its digest is the manifest digest, not the config digest).
func isEnvAttribute(path string) bool { return strings.HasPrefix(path, "env.") }

// attributeReasons names the attributes that differ between old and cur
// among those keep selects, one reason each: "PATH OLD → NEW", with
// label(path) for PATH. Values are shown through the scrubber; a
// sensitive one is "(sensitive value)".
func attributeReasons(sc *sandbox.Scrubber, old, cur map[string]state.Attribute, keep func(string) bool, label func(string) string) []string {
	paths := map[string]bool{}
	for p := range old {
		paths[p] = true
	}
	for p := range cur {
		paths[p] = true
	}
	var out []string
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		if !keep(p) {
			continue
		}
		o, inOld := old[p]
		n, inCur := cur[p]
		if inOld && inCur && sameAttribute(o, n) {
			continue
		}
		out = append(out, attributeChange(sc, label(p), o, inOld, n, inCur))
	}
	return out
}

// sameAttribute reports whether two recorded attributes hold the same
// value. Values compare as JSON texts in one form: the state file escapes
// <, > and & in strings (\u0026), the attributes computed now do not.
func sameAttribute(a, b state.Attribute) bool {
	return bytes.Equal(plainJSON(a.Value), plainJSON(b.Value)) && a.Digest == b.Digest && a.Sensitive == b.Sensitive
}

// plainJSON is the JSON text v in the form attributes are computed in:
// compact, no HTML escapes. Text that is not JSON is returned as it is.
func plainJSON(v json.RawMessage) []byte {
	if !bytes.Contains(v, []byte(`\u00`)) {
		return v
	}
	var x any
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if err := dec.Decode(&x); err != nil {
		return v
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return v
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// attributeChange is one reason: LABEL OLD → NEW, or LABEL changed when
// neither value can be shown.
func attributeChange(sc *sandbox.Scrubber, label string, o state.Attribute, inOld bool, n state.Attribute, inCur bool) string {
	shown := func(a state.Attribute, in bool) bool { return !in || len(a.Value) > 0 }
	if !shown(o, inOld) && !shown(n, inCur) {
		if o.Sensitive || n.Sensitive {
			return label + " changed (sensitive value)"
		}
		return label + " changed (its value is too long to show)"
	}
	ot, nt := attributeText(o, inOld), attributeText(n, inCur)
	if len(o.Value) > 0 && len(n.Value) > 0 {
		ot, nt = excerpts(ot, nt)
	}
	return fmt.Sprintf("%s %s → %s", label, sc.String(ot), sc.String(nt))
}

func attributeText(a state.Attribute, in bool) string {
	switch {
	case !in:
		return "(unset)"
	case a.Sensitive:
		return "(sensitive value)"
	case len(a.Value) == 0:
		return "(a value too long to show)"
	}
	return string(plainJSON(a.Value))
}

// excerptRunes is how much of a long value a reason shows.
const excerptRunes = 60

// excerpts shortens two long texts to the part around their first
// difference, marking what is left out with "…".
func excerpts(a, b string) (string, string) {
	if utf8.RuneCountInString(a) <= excerptRunes && utf8.RuneCountInString(b) <= excerptRunes {
		return a, b
	}
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	// Start a little before the difference, on a rune boundary.
	start := max(i-excerptRunes/3, 0)
	for start > 0 && !utf8.RuneStart(a[start]) {
		start--
	}
	return excerpt(a, start), excerpt(b, start)
}

func excerpt(s string, start int) string {
	out := s[start:]
	if n := utf8.RuneCountInString(out); n > excerptRunes {
		out = string([]rune(out)[:excerptRunes]) + "…"
	}
	if start > 0 {
		out = "…" + out
	}
	return out
}

// inputReasons names what differs between a run's recorded digest inputs
// and attributes and the current ones: per changed input, the attributes
// that changed from what to what ("agent.a: model "gpt-4.1" → "gpt-5"",
// "input: "old" → "new""), or "NAME changed" when the state has no
// attributes for it (written by an older agentctl) or what changed is
// not recorded as an attribute (a sandbox: its own change says why).
func inputReasons(sc *sandbox.Scrubber, prev *state.Run, inputs map[string]string, attrs map[string]state.Attribute) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(inputs)) {
		ov, ok := prev.DigestInputs[name]
		switch {
		case !ok:
			out = append(out, name+" was added")
		case ov != inputs[name]:
			var rs []string
			if prev.Attributes != nil {
				keep := func(p string) bool { return p == name || strings.HasPrefix(p, name+".") }
				label := func(p string) string {
					if p == name {
						return name + ":"
					}
					return name + ": " + strings.TrimPrefix(p, name+".")
				}
				rs = attributeReasons(sc, prev.Attributes, attrs, keep, label)
			}
			if len(rs) == 0 {
				rs = []string{name + " changed"}
			}
			out = append(out, rs...)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(prev.DigestInputs)) {
		if _, ok := inputs[name]; !ok {
			out = append(out, name+" was removed")
		}
	}
	return out
}

// approvalSet reports a needs_approval worth recording: an expression,
// or the constant true (false asks nothing, as when it is absent).
func approvalSet(p config.ApprovalPolicy) bool {
	v, constant := p.Constant()
	return v || !constant
}
