package config

import (
	"maps"
	"slices"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/addrs"
)

// DefaultMemorySummaryTokens bounds memory_summary.md in the instructions
// when read sets no max_summary_tokens (the Agents SDK's 15,000).
const DefaultMemorySummaryTokens = 15000

// MemoryCapability is capability "memory": the Agents SDK's Memory. Read
// puts the workspace's memory summary into the agent's instructions;
// Write extracts memories from each completed run (phase 1) and
// consolidates them (phase 2). At least one is set.
type MemoryCapability struct {
	Read  *MemoryRead  `json:",omitempty"`
	Write *MemoryWrite `json:",omitempty"`
}

// MemoryRead is a memory capability's read block.
type MemoryRead struct {
	LiveUpdate       bool
	MaxSummaryTokens int
}

// MemoryWrite is a memory capability's write block.
type MemoryWrite struct {
	// Model and ConsolidationModel are the models of phase 1 and 2 (""
	// = the agent's model).
	Model              string `json:",omitempty"`
	ConsolidationModel string `json:",omitempty"`
	// BatchSize is how many phase-1 results wait before a consolidation
	// during the apply (one always runs at the end of an apply).
	BatchSize   int
	ExtraPrompt string `json:",omitempty"`
}

var memorySchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "read"}, {Type: "write"}}}

var memoryReadSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "live_update"}, {Name: "max_summary_tokens"}}}

var memoryWriteSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "model"}, {Name: "consolidation_model"}, {Name: "batch_size"}, {Name: "extra_prompt"},
}}

func (l *loader) decodeMemory(c *Capability, b *hcl.Block) {
	content, diags := b.Body.Content(memorySchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return
	}
	m := &MemoryCapability{}
	c.Memory = m
	sc := scope{where: "a capability"}
	seen := map[string]hcl.Range{}
	for _, blk := range content.Blocks {
		if prev, ok := seen[blk.Type]; ok {
			l.errorf(blk.DefRange, "Duplicate "+blk.Type+" block", "A memory capability has one %s block; another is at %s.", blk.Type, rangeString(prev))
			continue
		}
		seen[blk.Type] = blk.DefRange
		switch blk.Type {
		case "read":
			bc, diags := blk.Body.Content(memoryReadSchema)
			l.diags = append(l.diags, diags...)
			r := &MemoryRead{MaxSummaryTokens: DefaultMemorySummaryTokens}
			if v, rng, ok := l.settingAttr(bc.Attributes, "live_update", sc, nil, "A capability setting"); ok {
				r.LiveUpdate, _ = l.toBool(v, rng, "live_update")
			}
			if _, ok := bc.Attributes["max_summary_tokens"]; ok {
				if n := l.nonNegativeAttr(bc.Attributes, "max_summary_tokens", sc, nil, "A capability setting"); n > 0 {
					r.MaxSummaryTokens = int(n)
				} else {
					l.errorf(bc.Attributes["max_summary_tokens"].Expr.Range(), "Invalid max_summary_tokens", "max_summary_tokens must be at least 1; omit the read block to turn reading off.")
				}
			}
			m.Read = r
		case "write":
			bc, diags := blk.Body.Content(memoryWriteSchema)
			l.diags = append(l.diags, diags...)
			w := &MemoryWrite{BatchSize: 1}
			str := func(name string) string {
				v, rng, ok := l.settingAttr(bc.Attributes, name, sc, nil, "A capability setting")
				if !ok {
					return ""
				}
				s, _ := l.toString(v, rng, name)
				return s
			}
			w.Model, w.ConsolidationModel, w.ExtraPrompt = str("model"), str("consolidation_model"), str("extra_prompt")
			if a, ok := bc.Attributes["batch_size"]; ok {
				if n := l.nonNegativeAttr(bc.Attributes, "batch_size", sc, nil, "A capability setting"); n >= 1 {
					w.BatchSize = int(n)
				} else {
					l.errorf(a.Expr.Range(), "Invalid batch_size", "batch_size must be at least 1: the number of phase-1 results that wait before a consolidation.")
				}
			}
			m.Write = w
		}
	}
	if m.Read == nil && m.Write == nil {
		l.errorf(b.DefRange, "Empty memory capability", "capability %q %q has neither a read nor a write block: add read {} to give agents the memory summary, write {} to generate memories, or both.", c.Type, c.Name)
	}
}

// checkMemory requires the shell and filesystem capabilities on every
// agent with a memory capability: the agent reads memory with the shell
// and repairs it with apply_patch.
func (l *loader) checkMemory() {
	for _, name := range slices.Sorted(maps.Keys(l.cfg.Agents)) {
		ag := l.cfg.Agents[name]
		var memRef string
		has := map[string]bool{}
		for _, c := range ag.Capabilities {
			ca, err := addrs.ParseCapability(c)
			if err != nil {
				continue
			}
			has[ca.Type] = true
			if ca.Type == "memory" && memRef == "" {
				memRef = c
			}
		}
		if memRef == "" {
			continue
		}
		var missing []string
		for _, need := range []string{"shell", "filesystem"} {
			if !has[need] {
				missing = append(missing, need)
			}
		}
		if len(missing) > 0 {
			l.errorf(l.capRefs[name+" "+memRef], "Memory needs shell and filesystem",
				"%s needs the shell and filesystem capabilities on agent %q (it reads memory with the shell and updates it with apply_patch), which lacks %s. Add them to its capabilities.", memRef, name, quoteList(missing))
		}
	}
}
