// Package agentmemory is the memory of an agent's workspace, as the
// Agents SDK's Memory has it: a completed run's conversation is written
// into the workspace as a rollout, a model extracts what is worth
// remembering from it (phase 1), and a model consolidates what was
// extracted into memory/MEMORY.md and memory/memory_summary.md (phase 2),
// the summary of which goes into the instructions of the agents that read
// the memory.
//
// The engine drives it: Targets and Instructions while it builds a run,
// Writer.AfterRun once a run completed, Writer.Process for the work left
// at the end of an apply, Pending for plan. Every step is recorded in the
// state (state.Memory) and every memory call in the memory's journal, so
// an interrupted apply carries the work on.
package agentmemory

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// The memory layout in a workspace, as the Agents SDK's Memory has it.
const (
	rolloutsDir          = "rollouts"
	memoryDir            = "memory"
	memoryRawDir         = memoryDir + "/raw_memories"
	memorySummariesDir   = memoryDir + "/rollout_summaries"
	memoryRawFile        = memoryDir + "/raw_memories.md"
	memoryFile           = memoryDir + "/MEMORY.md"
	memorySummaryFile    = memoryDir + "/memory_summary.md"
	memorySkillsDir      = memoryDir + "/skills"
	memoryReadLimit      = 8 << 20
	memoryCharsPerToken  = 4
	memoryRolloutMaxRead = 4 << 20
)

// Key is the address of one memory: a memory capability's memory in one
// sandbox's workspace. It prints as the state's key for it,
// capability.memory.NAME@sandbox.X (state.MemoryKey).
type Key struct {
	Capability addrs.Capability
	Sandbox    addrs.Instance
}

func (k Key) String() string { return state.MemoryKey(k.Capability.String(), k.Sandbox.String()) }

// ParseKey reads a memory's key back from the state.
func ParseKey(s string) (Key, error) {
	capAddr, sb, ok := strings.Cut(s, "@")
	if !ok {
		return Key{}, fmt.Errorf("memory %q: not CAPABILITY@SANDBOX", s)
	}
	c, err := addrs.ParseCapability(capAddr)
	if err != nil {
		return Key{}, fmt.Errorf("memory %q: %w", s, err)
	}
	i, err := addrs.ParseInstance(sb)
	if err != nil || i.Type != addrs.KindSandbox {
		return Key{}, fmt.Errorf("memory %q: %s is not a sandbox address", s, sb)
	}
	return Key{Capability: c, Sandbox: i}, nil
}

// Target is one memory capability with a write block on one agent of a
// run, in that agent's sandbox: a memory the run's rollout goes to.
type Target struct {
	Key   Key
	Agent string // the agent's name
}

// Targets lists the memories a run's rollout goes to: those of the memory
// capabilities with a write block of the run's agent and of the agents
// it reaches, each in the agent's sandbox.
func Targets(cfg *config.Config, ri *config.RunInstance) ([]Target, error) {
	if !anyMemory(cfg) {
		return nil, nil
	}
	seen := map[string]bool{}
	var out []Target
	for _, name := range cfg.AgentClosure(ri.Agent) {
		a := cfg.Agents[name]
		if a == nil {
			continue
		}
		sb := ri.AgentSandbox(a)
		for _, addr := range a.Capabilities {
			capAddr, err := addrs.ParseCapability(addr)
			if err != nil || sb == "" {
				continue // not a capability the configuration declares
			}
			c := cfg.Capabilities[capAddr.Key()]
			if c == nil || c.Memory == nil || c.Memory.Write == nil {
				continue
			}
			key, err := ParseKey(state.MemoryKey(addr, sb))
			if err != nil {
				return nil, fmt.Errorf("agent %q: %w", name, err)
			}
			if seen[key.String()] {
				continue
			}
			seen[key.String()] = true
			out = append(out, Target{Key: key, Agent: name})
		}
	}
	return out, nil
}

// anyMemory reports whether the configuration declares a memory
// capability.
func anyMemory(cfg *config.Config) bool {
	for _, c := range cfg.Capabilities {
		if c.Memory != nil {
			return true
		}
	}
	return false
}

// Instructions is the read side: the workspace's memory summary, cut to
// max_summary_tokens, with guidance to search MEMORY.md. An absent or
// empty summary gives no instructions; a sandbox that is unavailable is
// an error.
func Instructions(ctx context.Context, ws *sandbox.Workspace, r *config.MemoryRead) (string, error) {
	b, err := ws.ReadFile(ctx, memorySummaryFile, memoryReadLimit)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, sandbox.ErrNotFound) {
			return "", nil
		}
		if _, ok := errors.AsType[*sandbox.UnavailableError](err); ok {
			return "", err
		}
		return "", nil
	}
	summary := strings.TrimSpace(string(b))
	if summary == "" {
		return "", nil
	}
	if limit := r.MaxSummaryTokens * memoryCharsPerToken; len(summary) > limit {
		cut := limit
		for cut > 0 && summary[cut]&0xC0 == 0x80 {
			cut--
		}
		summary = summary[:cut] + "\n…(cut: the summary is longer than max_summary_tokens)"
	}
	var sb strings.Builder
	sb.WriteString("## Memory\n")
	sb.WriteString("You have a memory of earlier runs in this workspace, under `" + memoryDir + "/`. Its summary:\n\n")
	sb.WriteString("<memory_summary>\n" + summary + "\n</memory_summary>\n\n")
	sb.WriteString("Details are in `" + memoryFile + "`: search it (for example `grep -n -i KEYWORD " + memoryFile + "`) when the task touches something the summary mentions, rather than reading it whole. ")
	sb.WriteString("The rollouts of earlier runs are in `" + rolloutsDir + "/` and their summaries in `" + memorySummariesDir + "/`.")
	if r.LiveUpdate {
		sb.WriteString("\nIf you find an entry of `" + memoryFile + "` wrong or stale, correct it with apply_patch, and keep `" + memorySummaryFile + "` consistent.")
	}
	return sb.String(), nil
}

// Work is a memory with work waiting, as plan lists it.
type Work struct {
	// Address is the memory's key, capability.memory.NAME@sandbox.X.
	Address string `json:"address"`
	Reason  string `json:"reason"`
}

// Pending lists the memories of st with work waiting, for plan.
func Pending(st *state.State) []Work {
	var out []Work
	for _, key := range slices.Sorted(maps.Keys(st.Memories)) {
		m := st.Memories[key]
		if !m.Pending() {
			continue
		}
		var parts []string
		if n := len(m.Phase1); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s to extract (phase 1)", n, rollouts(n)))
		}
		if n := len(m.Phase2); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s to consolidate (phase 2)", n, rollouts(n)))
		}
		out = append(out, Work{Address: key, Reason: strings.Join(parts, ", ")})
	}
	return out
}

// rollouts is "rollout" or "rollouts", for n of them.
func rollouts(n int) string {
	if n == 1 {
		return "rollout"
	}
	return "rollouts"
}
