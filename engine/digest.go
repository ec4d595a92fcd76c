package engine

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/providers/registry"
)

// digestJSON is the hex SHA-256 of v's JSON encoding (encoding/json sorts
// map keys, so equal values digest equally).
func digestJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		// Only plain data is digested; a failure is a programming error
		// that must not silently collide.
		b = []byte("unencodable: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func digestString(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// agentDigest covers everything about one agent that determines what it
// does in the run block named run: model and non-secret provider settings
// as that run sees them (the scripted provider's script for it in that
// run included), instructions, settings, capabilities, handoffs and
// their input filters, agent tools, hosted tools and output schema.
// Credentials never enter it, nor do max_turns and model_fallback.
func agentDigest(cfg *config.Config, name, run string) string {
	a := cfg.Agents[name]
	if a == nil {
		return digestString("missing agent " + name)
	}
	type capDigest struct {
		Addr string
		Cap  *config.Capability
	}
	caps := make([]capDigest, 0, len(a.Capabilities))
	for _, addr := range a.Capabilities {
		c := cfg.Capabilities[capKey(addr)]
		if c == nil {
			continue
		}
		cc := *c
		cc.DeclRange = zeroRange
		caps = append(caps, capDigest{Addr: addr, Cap: &cc})
	}
	tools := slices.Clone(a.Tools)
	for i := range tools {
		tools[i].DeclRange = zeroRange
	}
	d := map[string]any{
		"model":         a.Model,
		"provider":      providerDigestData(cfg, cfg.ModelProvider(a), name, run),
		"instructions":  a.Instructions,
		"settings":      a.Settings,
		"capabilities":  caps,
		"handoffs":      a.Handoffs,
		"tools":         tools,
		"output_schema": string(a.OutputSchema),
		// max_turns is left out on purpose: it bounds a run without
		// changing what it does, and raising it is how a run that ran out
		// of turns is resumed rather than re-run. So is model_fallback:
		// adding one is how a run whose model was unavailable is resumed.
	}
	// Left out when unset, so that the digests of agents without them
	// stay as they were.
	if len(a.HostedTools) > 0 {
		hosted := slices.Clone(a.HostedTools)
		for i := range hosted {
			hosted[i].DeclRange = zeroRange
		}
		d["hosted_tools"] = hosted
	}
	if len(a.HandoffFilters) > 0 {
		d["handoff_filters"] = a.HandoffFilters
	}
	return digestJSON(d)
}

// providerDigestData is the non-secret part of a model provider that
// determines agent's answers in the run block named run.
func providerDigestData(cfg *config.Config, addr, agent, run string) map[string]any {
	p := cfg.Providers[providerKey(addr)]
	if p == nil {
		return map[string]any{"addr": addr}
	}
	out := map[string]any{"addr": addr, "type": p.Type}
	settings, _ := runSettings(p.Settings, run)
	if f, ok := settings.(registry.Fingerprinter); ok {
		maps.Copy(out, f.Fingerprint(agent))
	}
	return out
}

// runSettings returns model provider settings as the run block named run
// sees them (registry.RunScoper), and whether they differ from settings.
func runSettings(settings any, run string) (any, bool) {
	if rs, ok := settings.(registry.RunScoper); ok && run != "" {
		return rs.ForRun(run)
	}
	return settings, false
}

// sandboxConfigDigest covers the settings whose change replaces a sandbox.
func sandboxConfigDigest(cfg *config.Config, sb *config.SandboxInstance) string {
	isolation := ""
	kind := ""
	if p := cfg.Providers[providerKey(sb.Provider)]; p != nil {
		kind = p.Type
		if f, ok := p.Settings.(registry.Fingerprinter); ok {
			isolation, _ = f.Fingerprint("")["isolation"].(string)
		}
	}
	d := map[string]any{
		"provider":  sb.Provider,
		"kind":      kind,
		"isolation": isolation,
		"image":     sb.Image,
		"network":   sb.Network,
		"ports":     sb.Ports,
		"resources": sb.Resources,
		"settings":  sb.Settings,
		"root":      manifestRoot(cfg, sb),
	}
	// The manifest's users and groups are created with the sandbox: a
	// change replaces it. Left out when there are none, so the digests
	// of sandboxes without them stay as they were.
	if a := sandboxAccounts(cfg, sb); !a.Empty() {
		d["accounts"] = a
	}
	// Mounts are bound into the sandbox when it is made; their
	// definitions, not the buckets' contents, are digested.
	if md := mountDigestData(cfg, sb); md != nil {
		d["mounts"] = md
	}
	return digestJSON(d)
}

// runDigest combines the named inputs into the run's digest.
func runDigest(inputs map[string]string) string {
	return digestJSON(inputs)
}
