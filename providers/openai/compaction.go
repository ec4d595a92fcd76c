package openai

import (
	"strings"
	"sync"
)

// DefaultCompactThreshold is the compaction threshold, in tokens, for
// models whose context window is not known; it matches the Agents SDK's
// static compaction policy.
const DefaultCompactThreshold = 240_000

// compactWindowFraction is the share of a known model's context window at
// which compaction triggers (the Agents SDK's dynamic policy).
const compactWindowFraction = 0.9

// contextWindows returns the context window sizes the Agents SDK knows,
// keyed by lower-cased model name without "." and "-"; built on first use.
var contextWindows = sync.OnceValue(func() map[string]int64 {
	m := map[string]int64{}
	add := func(window int64, models ...string) {
		for _, name := range models {
			m[modelKey(name)] = window
		}
	}
	add(1_047_576,
		"gpt-5.4", "gpt-5.4-2026-03-05", "gpt-5.4-pro", "gpt-5.4-pro-2026-03-05",
		"gpt-5.5", "gpt-5.5-2026-04-23", "gpt-5.5-pro", "gpt-5.5-pro-2026-04-23",
		"gpt-5.6", "gpt-5.6-sol", "gpt-5.6-terra", "gpt-5.6-luna",
		"gpt-4.1", "gpt-4.1-2025-04-14", "gpt-4.1-mini", "gpt-4.1-mini-2025-04-14",
		"gpt-4.1-nano", "gpt-4.1-nano-2025-04-14")
	add(400_000,
		"gpt-5", "gpt-5-2025-08-07", "gpt-5-codex", "gpt-5-mini", "gpt-5-mini-2025-08-07",
		"gpt-5-nano", "gpt-5-nano-2025-08-07", "gpt-5-pro", "gpt-5-pro-2025-10-06",
		"gpt-5.1", "gpt-5.1-2025-11-13", "gpt-5.1-codex", "gpt-5.1-codex-max", "gpt-5.1-codex-mini",
		"gpt-5.2", "gpt-5.2-2025-12-11", "gpt-5.2-codex", "gpt-5.2-pro", "gpt-5.2-pro-2025-12-11",
		"gpt-5.3-codex", "gpt-5.4-mini", "gpt-5.4-mini-2026-03-17", "gpt-5.4-nano", "gpt-5.4-nano-2026-03-17")
	add(200_000,
		"codex-mini-latest", "o1", "o1-2024-12-17", "o1-pro", "o1-pro-2025-03-19",
		"o3", "o3-2025-04-16", "o3-deep-research", "o3-deep-research-2025-06-26",
		"o3-mini", "o3-mini-2025-01-31", "o3-pro", "o3-pro-2025-06-10",
		"o4-mini", "o4-mini-2025-04-16", "o4-mini-deep-research", "o4-mini-deep-research-2025-06-26")
	add(128_000,
		"gpt-4o", "gpt-4o-2024-05-13", "gpt-4o-2024-08-06", "gpt-4o-2024-11-20",
		"gpt-4o-mini", "gpt-4o-mini-2024-07-18",
		"gpt-5-chat-latest", "gpt-5.1-chat-latest", "gpt-5.2-chat-latest", "gpt-5.3-chat-latest")
	return m
})

// modelKeyReplacer drops "." and "-" (a Replacer builds its tables on
// first use).
var modelKeyReplacer = strings.NewReplacer(".", "", "-", "")

func modelKey(name string) string {
	name = strings.TrimPrefix(strings.ToLower(strings.TrimSpace(name)), "openai/")
	return modelKeyReplacer.Replace(name)
}

// ContextWindow returns the context window of a known model.
func ContextWindow(modelName string) (int64, bool) {
	w, ok := contextWindows()[modelKey(modelName)]
	return w, ok
}

// CompactionThreshold is the compact_threshold sent with the Responses
// context_management setting: the configured threshold when set,
// otherwise 90% of the model's context window when the model is known,
// otherwise 240,000 tokens, as the Agents SDK's compaction capability
// does.
func CompactionThreshold(modelName string, configured int64) int64 {
	if configured > 0 {
		return configured
	}
	if w, ok := ContextWindow(modelName); ok {
		return int64(float64(w) * compactWindowFraction)
	}
	return DefaultCompactThreshold
}
