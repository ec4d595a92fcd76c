package agentmemory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

const phaseOneInstructions = `You read the record of one completed run of an AI agent (a rollout: the task, the tool calls and their outputs, the final answer, one JSON object per line) and extract what is worth remembering for future runs in the same workspace.
Keep durable, reusable knowledge: facts about the workspace and its data, commands and approaches that worked, pitfalls and how they were resolved, preferences the user stated. Leave out what only mattered to this run, and never copy secrets.
Answer with JSON only:
- rollout_slug: 2 to 5 lowercase words joined by "-" naming the run's task;
- rollout_summary: a short summary of what the run did and how it ended;
- raw_memory: the memories, as Markdown bullet points, each one self-contained.`

const phaseTwoInstructions = `You maintain the long-term memory of an AI agent's workspace. You are given the current memory/MEMORY.md (possibly empty) and new raw memories extracted from recent runs.
Merge them into an updated MEMORY.md: organized Markdown with headings by topic, each entry specific and actionable; remove duplicates, and when a new memory contradicts an old one keep the newer and say what changed.
Then write memory_summary.md: a compact overview (at most about 300 words) of the most useful knowledge, which is put into the agent's instructions at the start of each run; details stay in MEMORY.md.
Never include secrets. Answer with JSON only:
- memory_md: the full new MEMORY.md;
- memory_summary: the full new memory_summary.md.`

var phaseOneSchema = json.RawMessage(`{"type":"object","properties":{"rollout_slug":{"type":"string"},"rollout_summary":{"type":"string"},"raw_memory":{"type":"string"}},"required":["rollout_slug","rollout_summary","raw_memory"],"additionalProperties":false}`)

var phaseTwoSchema = json.RawMessage(`{"type":"object","properties":{"memory_md":{"type":"string"},"memory_summary":{"type":"string"}},"required":["memory_md","memory_summary"],"additionalProperties":false}`)

var slugRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-z0-9]+`) })

// slug makes a rollout's slug safe for a file name.
func slug(s string) string {
	s = strings.Trim(slugRE().ReplaceAllString(strings.ToLower(s), "-"), "-")
	if len(s) > 60 {
		s = strings.TrimRight(s[:60], "-")
	}
	if s == "" {
		s = "run"
	}
	return s
}

func withExtra(instructions, extra string) string {
	if strings.TrimSpace(extra) == "" {
		return instructions
	}
	return instructions + "\n\nAlso: " + extra
}

// phase1 extracts the memories of one rollout: a model call over the
// rollout, then raw_memories/ID.md and rollout_summaries/ID_SLUG.md.
func (w *Writer) phase1(ctx context.Context, key Key, c *config.Capability, ws *sandbox.Workspace, rid, run string) error {
	rollout, err := ws.ReadFile(ctx, path.Join(rolloutsDir, rid+".jsonl"), memoryRolloutMaxRead)
	if err != nil {
		return fmt.Errorf("reading its rollout %s: %w", path.Join(rolloutsDir, rid+".jsonl"), err)
	}
	m, _ := w.snapshot(key)
	var out struct {
		Slug    string `json:"rollout_slug"`
		Summary string `json:"rollout_summary"`
		Raw     string `json:"raw_memory"`
	}
	parse := func(text string) error { return json.Unmarshal([]byte(text), &out) }
	req := &model.Request{
		Instructions:     withExtra(phaseOneInstructions, c.Memory.Write.ExtraPrompt),
		Input:            []model.Item{{Type: model.ItemMessage, Role: "user", Text: "The rollout:\n\n" + string(rollout)}},
		OutputSchema:     phaseOneSchema,
		OutputSchemaName: "memory_extraction",
	}
	resp, fresh, err := w.call(ctx, key, record{Phase: 1, Rollout: rid}, req, w.modelName(m, c.Memory.Write.Model), parse)
	if err != nil {
		return err
	}
	now := time.Now().UTC().Format(time.RFC3339)
	summaryFile := path.Join(memorySummariesDir, rid+"_"+slug(out.Slug)+".md")
	raw := fmt.Sprintf("rollout_id: %s\nupdated_at: %s\nrollout_path: %s\nrollout_summary_file: %s\nterminal_state: completed\n\n%s\n",
		rid, now, path.Join(rolloutsDir, rid+".jsonl"), strings.TrimPrefix(summaryFile, memoryDir+"/"), strings.TrimSpace(out.Raw))
	summary := fmt.Sprintf("run: %s\nupdated_at: %s\nrollout_path: %s\nterminal_state: completed\n\n%s\n",
		m.Run, now, path.Join(rolloutsDir, rid+".jsonl"), strings.TrimSpace(out.Summary))
	for p, content := range map[string]string{path.Join(memoryRawDir, rid+".md"): raw, summaryFile: summary} {
		if err := ws.Sandbox.WriteFile(ctx, p, []byte(ws.Scrub.String(content)), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", p, ws.Unavailable(ctx, err))
		}
	}
	w.Progress(key, "extracted the memories of "+m.Run+" (phase 1) into "+path.Join(memoryRawDir, rid+".md"))
	return w.State.Update(ctx, func(st *state.State) {
		rec := memoryRecord(st, key)
		rec.Phase1 = slices.DeleteFunc(rec.Phase1, func(s string) bool { return s == rid })
		if !slices.Contains(rec.Phase2, rid) {
			rec.Phase2 = append(rec.Phase2, rid)
		}
		rec.Extracted++
		rec.UpdatedAt = time.Now().UTC()
		if fresh {
			rec.Calls++
			rec.NextTurn++
			rec.Usage.Add(resp.Usage)
			if r := st.Runs[run]; r != nil {
				r.MemoryUsage.Add(resp.Usage)
			}
		}
	}, state.MemoryRef(key.String()), state.RunRef(run))
}

// phase2 consolidates the waiting rollouts: raw_memories.md gains their
// raw memories, and a model call over it and the current MEMORY.md
// writes the new MEMORY.md and memory_summary.md.
func (w *Writer) phase2(ctx context.Context, key Key, c *config.Capability, ws *sandbox.Workspace) error {
	m, _ := w.snapshot(key)
	ids := slices.Clone(m.Phase2)
	sort.Strings(ids)
	rawAll, fresh, current, err := consolidationInputs(ctx, ws, ids)
	if err != nil {
		return err
	}
	var out struct {
		Memory  string `json:"memory_md"`
		Summary string `json:"memory_summary"`
	}
	parse := func(text string) error {
		if err := json.Unmarshal([]byte(text), &out); err != nil {
			return err
		}
		if strings.TrimSpace(out.Summary) == "" {
			return errors.New("memory_summary is empty")
		}
		return nil
	}
	req := &model.Request{
		Instructions: withExtra(phaseTwoInstructions, c.Memory.Write.ExtraPrompt),
		Input: []model.Item{{Type: model.ItemMessage, Role: "user", Text: "Current " + memoryFile + ":\n\n" + strings.TrimSpace(current) +
			"\n\nNew raw memories:\n\n" + fresh}},
		OutputSchema:     phaseTwoSchema,
		OutputSchemaName: "memory_consolidation",
	}
	resp, isFresh, err := w.call(ctx, key, record{Phase: 2, Rollouts: ids}, req, w.modelName(m, c.Memory.Write.ConsolidationModel), parse)
	if err != nil {
		return err
	}
	if err := writeConsolidation(ctx, ws, rawAll, out.Memory, out.Summary); err != nil {
		return err
	}
	w.Progress(key, fmt.Sprintf("consolidated %d %s into %s and %s (phase 2)", len(ids), rollouts(len(ids)), memoryFile, memorySummaryFile))
	return w.State.Update(ctx, func(st *state.State) {
		rec := memoryRecord(st, key)
		rec.Phase2 = slices.DeleteFunc(rec.Phase2, func(s string) bool { return slices.Contains(ids, s) })
		rec.Consolidations++
		rec.UpdatedAt = time.Now().UTC()
		if isFresh {
			rec.Calls++
			rec.NextTurn++
			rec.Usage.Add(resp.Usage)
		}
	}, state.MemoryRef(key.String()))
}

// consolidationInputs reads what a consolidation of the rollouts ids
// works from: raw_memories.md with their raw memories added (rawAll),
// those raw memories alone (fresh), and the current MEMORY.md. A file
// not written yet reads as empty; a rollout's raw memories must be
// there.
func consolidationInputs(ctx context.Context, ws *sandbox.Workspace, ids []string) (rawAll, fresh, current string, err error) {
	readOpt := func(p string) (string, error) {
		b, err := ws.ReadFile(ctx, p, memoryReadLimit)
		if err != nil {
			if _, ok := errors.AsType[*sandbox.UnavailableError](err); ok {
				return "", err
			}
			return "", nil
		}
		return string(b), nil
	}
	if rawAll, err = readOpt(memoryRawFile); err != nil {
		return "", "", "", err
	}
	var b strings.Builder
	for _, id := range ids {
		raw, err := ws.ReadFile(ctx, path.Join(memoryRawDir, id+".md"), memoryReadLimit)
		if err != nil {
			return "", "", "", fmt.Errorf("reading %s: %w", path.Join(memoryRawDir, id+".md"), err)
		}
		b.WriteString(strings.TrimSpace(string(raw)) + "\n\n")
		if !strings.Contains(rawAll, "rollout_id: "+id+"\n") {
			rawAll += "\n" + strings.TrimSpace(string(raw)) + "\n"
		}
	}
	if current, err = readOpt(memoryFile); err != nil {
		return "", "", "", err
	}
	return rawAll, b.String(), current, nil
}

// writeConsolidation writes a consolidation's files into the workspace:
// raw_memories.md, MEMORY.md and memory_summary.md, and the skills
// directory.
func writeConsolidation(ctx context.Context, ws *sandbox.Workspace, rawAll, memory, summary string) error {
	for _, f := range []struct{ path, content string }{
		{memoryRawFile, strings.TrimLeft(rawAll, "\n")},
		{memoryFile, strings.TrimSpace(memory) + "\n"},
		{memorySummaryFile, strings.TrimSpace(summary) + "\n"},
	} {
		if err := ws.Sandbox.WriteFile(ctx, f.path, []byte(ws.Scrub.String(f.content)), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", f.path, ws.Unavailable(ctx, err))
		}
	}
	if err := ws.Sandbox.Mkdir(ctx, memorySkillsDir); err != nil {
		return fmt.Errorf("creating %s: %w", memorySkillsDir, ws.Unavailable(ctx, err))
	}
	return nil
}
