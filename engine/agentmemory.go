package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/model"
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

// memoryInstructions is the read side: the workspace's memory summary, cut
// to max_summary_tokens, with guidance to search MEMORY.md. An absent or
// empty summary gives no instructions.
func memoryInstructions(ctx context.Context, ws *sandbox.Workspace, r *config.MemoryRead) (string, error) {
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

// memoryTarget is one memory capability with a write block on one agent of
// a run, in that agent's sandbox.
type memoryTarget struct {
	key     string
	cap     *config.Capability
	agent   string
	sandbox string
}

// runMemoryTargets lists the memories a run's rollout goes to.
func runMemoryTargets(cfg *config.Config, ri *config.RunInstance) []memoryTarget {
	if !hasCapability(cfg, func(c *config.Capability) bool { return c.Memory != nil }) {
		return nil
	}
	seen := map[string]bool{}
	var out []memoryTarget
	for _, name := range cfg.AgentClosure(ri.Agent) {
		a := cfg.Agents[name]
		if a == nil {
			continue
		}
		sb := ri.AgentSandbox(a)
		for _, addr := range a.Capabilities {
			c := cfg.Capabilities[capKey(addr)]
			if c == nil || c.Memory == nil || c.Memory.Write == nil || sb == "" {
				continue
			}
			key := state.MemoryKey(addr, sb)
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, memoryTarget{key: key, cap: c, agent: name, sandbox: sb})
		}
	}
	return out
}

// rolloutID names a run's rollout: the run and its digest, so a changed
// run writes a new rollout and a resumed one the same.
func rolloutID(runAddr, digest string) string {
	return state.SafeName(runAddr) + "-" + digest[:min(12, len(digest))]
}

// rolloutJSONL renders a run's conversation as a rollout: a first line
// describing the run, then one line per item (the input, messages, tool
// calls and their outputs, the final answer); no instructions, reasoning
// or compaction items.
func rolloutJSONL(rid, runAddr, agent string, steps []agentloop.Step, output json.RawMessage, at time.Time) ([]byte, error) {
	items, err := agentloop.Transcript(steps)
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	line := func(v any) {
		j, _ := json.Marshal(v)
		b.Write(j)
		b.WriteByte('\n')
	}
	line(map[string]any{"rollout_id": rid, "run": runAddr, "agent": agent, "updated_at": at.Format(time.RFC3339), "terminal_state": "completed", "final_output": output})
	for _, it := range items {
		switch it.Type {
		case model.ItemMessage:
			if it.Role == "system" || it.Role == "developer" {
				continue
			}
			line(map[string]any{"type": "message", "role": it.Role, "content": it.Text})
		case model.ItemFunctionCall:
			line(map[string]any{"type": "function_call", "call_id": it.CallID, "name": it.Name, "arguments": it.Arguments})
		case model.ItemFunctionCallOutput:
			line(map[string]any{"type": "function_call_output", "call_id": it.CallID, "output": it.Output})
		}
	}
	return []byte(b.String()), nil
}

// memoryRecord is one memory call in a memory journal.
type memoryRecord struct {
	Phase    int             `json:"phase"`
	Rollout  string          `json:"rollout,omitempty"`
	Rollouts []string        `json:"rollouts,omitempty"`
	Response *model.Response `json:"response"`
}

// memoryAfterRun writes a completed run's rollout into the workspace of
// each memory its agents generate, queues it in the state, and extracts
// its memories (phase 1), consolidating when batch_size results wait.
func (a *applier) memoryAfterRun(ctx context.Context, ri *config.RunInstance, digest string, steps []agentloop.Step, output json.RawMessage, workspaces map[string]*sandbox.Workspace) error {
	targets := runMemoryTargets(a.e.Config, ri)
	if len(targets) == 0 {
		return nil
	}
	rid := rolloutID(ri.Addr, digest)
	var errs []error
	for _, t := range targets {
		ws := workspaces[t.sandbox]
		if ws == nil {
			continue
		}
		data, err := rolloutJSONL(rid, ri.Addr, ri.Agent, steps, output, time.Now().UTC())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := ws.Sandbox.WriteFile(ctx, path.Join(rolloutsDir, rid+".jsonl"), []byte(ws.Scrub.String(string(data))), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("%s: writing the rollout: %w", t.key, ws.Unavailable(ctx, err)))
			continue
		}
		turns := 0
		for _, s := range steps {
			if (s.Kind == agentloop.StepModel || s.Kind == agentloop.StepCompaction) && s.Agent == t.agent {
				turns++
			}
		}
		if err := a.update(func(st *state.State) {
			m := a.memoryRecord(st, t.key)
			if !slices.Contains(m.Phase1, rid) && !slices.Contains(m.Phase2, rid) {
				m.Phase1 = append(m.Phase1, rid)
			}
			m.Run, m.Agent, m.NextTurn = ri.Addr, t.agent, turns
		}, state.MemoryRef(t.key)); err != nil {
			return err
		}
		if err := a.processMemory(ctx, t.key, ws, ri.Addr, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// memoryRecord returns the state's record of the memory at key, creating
// it; callers hold a.mu (inside update).
func (a *applier) memoryRecord(st *state.State, key string) *state.Memory {
	if st.Memories == nil {
		st.Memories = map[string]*state.Memory{}
	}
	m := st.Memories[key]
	if m == nil {
		capAddr, sb, _ := strings.Cut(key, "@")
		m = &state.Memory{Capability: capAddr, Sandbox: sb, Journal: path.Join("journals", "memory."+state.ScopedName(st.Lineage, key)+".jsonl")}
		st.Memories[key] = m
	}
	return m
}

// memorySnapshot copies the state's record of the memory at key.
func (a *applier) memorySnapshot(key string) (state.Memory, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.st.Memories[key]
	if m == nil {
		return state.Memory{}, false
	}
	c := *m
	c.Phase1, c.Phase2 = slices.Clone(m.Phase1), slices.Clone(m.Phase2)
	return c, true
}

// processMemory runs the memory's waiting phase-1 extractions, then a
// consolidation when batch_size results wait, or any wait and final is
// set (the end of an apply). run, when set, is the run whose rollout is
// being extracted (its memory usage is recorded on it). It reports
// whether a consolidation ran.
func (a *applier) processMemory(ctx context.Context, key string, ws *sandbox.Workspace, run string, final bool) error {
	m, ok := a.memorySnapshot(key)
	if !ok {
		return nil
	}
	c := a.e.Config.Capabilities[capKey(m.Capability)]
	if c == nil || c.Memory == nil || c.Memory.Write == nil {
		return fmt.Errorf("memory %s has work waiting, but %s no longer generates memory: restore its write block, or forget the memory with agentctl state rm", key, m.Capability)
	}
	for _, rid := range m.Phase1 {
		if err := a.memoryPhase1(ctx, key, c, ws, rid, run); err != nil {
			return fmt.Errorf("%s: extracting memories from rollout %s (phase 1): %w", key, rid, err)
		}
	}
	m, _ = a.memorySnapshot(key)
	if len(m.Phase2) >= c.Memory.Write.BatchSize || (final && len(m.Phase2) > 0) {
		if err := a.memoryPhase2(ctx, key, c, ws); err != nil {
			return fmt.Errorf("%s: consolidating %d rollouts (phase 2): %w", key, len(m.Phase2), err)
		}
	}
	return nil
}

// memoryCall answers one memory call: from the memory journal when it
// was made before (a resume), otherwise from the model, the response
// checked by parse and appended to the journal before it is used.
func (a *applier) memoryCall(ctx context.Context, key string, rec memoryRecord, req *model.Request, modelName string, parse func(text string) error) (*model.Response, bool, error) {
	m, _ := a.memorySnapshot(key)
	var found *model.Response
	if _, err := a.e.State.ReadJournal(m.Journal, func(raw json.RawMessage) error {
		var r memoryRecord
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		if r.Phase == rec.Phase && r.Rollout == rec.Rollout && slices.Equal(r.Rollouts, rec.Rollouts) && r.Response != nil {
			found = r.Response
		}
		return nil
	}); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("reading the memory journal: %w", err)
	}
	if found != nil {
		if err := parse(found.Text()); err == nil {
			return found, false, nil
		}
	}
	mdl, err := a.memoryModel(m)
	if err != nil {
		return nil, false, err
	}
	req.Model = modelName
	req.Agent, req.AgentTurn = m.Agent, m.NextTurn
	resp, err := mdl.Respond(ctx, req, nil)
	if err != nil {
		return nil, false, fmt.Errorf("model call failed: %w", err)
	}
	if err := parse(resp.Text()); err != nil {
		return nil, false, fmt.Errorf("the model's answer is not the JSON asked for (%v): %.200q", err, resp.Text())
	}
	j, err := a.e.State.OpenJournal(m.Journal)
	if err != nil {
		return nil, false, err
	}
	defer j.Close()
	rec.Response = resp
	if err := j.Append(scrubMemoryRecord(a.e, rec)); err != nil {
		return nil, false, fmt.Errorf("checkpointing the memory call: %w", err)
	}
	return resp, true, nil
}

func scrubMemoryRecord(e *Engine, rec memoryRecord) memoryRecord {
	sc := e.scrubber()
	if rec.Response != nil {
		r := *rec.Response
		r.Output = make([]model.Item, len(rec.Response.Output))
		for i, it := range rec.Response.Output {
			r.Output[i] = scrubItem(sc, it)
		}
		rec.Response = &r
	}
	return rec
}

// memoryModel is the model of the agent whose run last fed the memory, as
// that run sees its provider.
func (a *applier) memoryModel(m state.Memory) (model.Model, error) {
	ag := a.e.Config.Agents[m.Agent]
	if ag == nil {
		return nil, fmt.Errorf("agent %q, whose model writes this memory, is no longer declared", m.Agent)
	}
	runName := ""
	if ri := a.e.Config.RunInstances[m.Run]; ri != nil {
		runName = ri.Name
	}
	mdl, _, err := a.e.provs().model(a.e, ag, runName)
	return mdl, err
}

// memoryModelName is the model name of a phase: its setting, or the
// agent's model.
func (a *applier) memoryModelName(m state.Memory, configured string) string {
	if configured != "" {
		return configured
	}
	if ag := a.e.Config.Agents[m.Agent]; ag != nil {
		return ag.Model
	}
	return ""
}

var slugRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-z0-9]+`) })

func memorySlug(s string) string {
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

// memoryPhase1 extracts the memories of one rollout: a model call over the
// rollout, then raw_memories/ID.md and rollout_summaries/ID_SLUG.md.
func (a *applier) memoryPhase1(ctx context.Context, key string, c *config.Capability, ws *sandbox.Workspace, rid, run string) error {
	rollout, err := ws.ReadFile(ctx, path.Join(rolloutsDir, rid+".jsonl"), memoryRolloutMaxRead)
	if err != nil {
		return fmt.Errorf("reading its rollout %s: %w", path.Join(rolloutsDir, rid+".jsonl"), err)
	}
	m, _ := a.memorySnapshot(key)
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
	resp, fresh, err := a.memoryCall(ctx, key, memoryRecord{Phase: 1, Rollout: rid}, req, a.memoryModelName(m, c.Memory.Write.Model), parse)
	if err != nil {
		return err
	}
	now := time.Now().UTC().Format(time.RFC3339)
	summaryFile := path.Join(memorySummariesDir, rid+"_"+memorySlug(out.Slug)+".md")
	raw := fmt.Sprintf("rollout_id: %s\nupdated_at: %s\nrollout_path: %s\nrollout_summary_file: %s\nterminal_state: completed\n\n%s\n",
		rid, now, path.Join(rolloutsDir, rid+".jsonl"), strings.TrimPrefix(summaryFile, memoryDir+"/"), strings.TrimSpace(out.Raw))
	summary := fmt.Sprintf("run: %s\nupdated_at: %s\nrollout_path: %s\nterminal_state: completed\n\n%s\n",
		m.Run, now, path.Join(rolloutsDir, rid+".jsonl"), strings.TrimSpace(out.Summary))
	for p, content := range map[string]string{path.Join(memoryRawDir, rid+".md"): raw, summaryFile: summary} {
		if err := ws.Sandbox.WriteFile(ctx, p, []byte(ws.Scrub.String(content)), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", p, ws.Unavailable(ctx, err))
		}
	}
	a.e.emit(Event{Type: EventApplyProgress, Address: "memory " + key, Message: "extracted the memories of " + m.Run + " (phase 1) into " + path.Join(memoryRawDir, rid+".md")})
	return a.update(func(st *state.State) {
		rec := a.memoryRecord(st, key)
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
	}, state.MemoryRef(key), state.RunRef(run))
}

// memoryPhase2 consolidates the waiting rollouts: raw_memories.md gains
// their raw memories, and a model call over it and the current MEMORY.md
// writes the new MEMORY.md and memory_summary.md.
func (a *applier) memoryPhase2(ctx context.Context, key string, c *config.Capability, ws *sandbox.Workspace) error {
	m, _ := a.memorySnapshot(key)
	ids := slices.Clone(m.Phase2)
	sort.Strings(ids)
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
	rawAll, err := readOpt(memoryRawFile)
	if err != nil {
		return err
	}
	var fresh strings.Builder
	for _, id := range ids {
		b, err := ws.ReadFile(ctx, path.Join(memoryRawDir, id+".md"), memoryReadLimit)
		if err != nil {
			return fmt.Errorf("reading %s: %w", path.Join(memoryRawDir, id+".md"), err)
		}
		fresh.WriteString(strings.TrimSpace(string(b)) + "\n\n")
		if !strings.Contains(rawAll, "rollout_id: "+id+"\n") {
			rawAll += "\n" + strings.TrimSpace(string(b)) + "\n"
		}
	}
	current, err := readOpt(memoryFile)
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
			"\n\nNew raw memories:\n\n" + fresh.String()}},
		OutputSchema:     phaseTwoSchema,
		OutputSchemaName: "memory_consolidation",
	}
	resp, isFresh, err := a.memoryCall(ctx, key, memoryRecord{Phase: 2, Rollouts: ids}, req, a.memoryModelName(m, c.Memory.Write.ConsolidationModel), parse)
	if err != nil {
		return err
	}
	for _, f := range []struct{ path, content string }{
		{memoryRawFile, strings.TrimLeft(rawAll, "\n")},
		{memoryFile, strings.TrimSpace(out.Memory) + "\n"},
		{memorySummaryFile, strings.TrimSpace(out.Summary) + "\n"},
	} {
		if err := ws.Sandbox.WriteFile(ctx, f.path, []byte(ws.Scrub.String(f.content)), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", f.path, ws.Unavailable(ctx, err))
		}
	}
	if err := ws.Sandbox.Mkdir(ctx, memorySkillsDir); err != nil {
		return fmt.Errorf("creating %s: %w", memorySkillsDir, ws.Unavailable(ctx, err))
	}
	a.e.emit(Event{Type: EventApplyProgress, Address: "memory " + key, Message: fmt.Sprintf("consolidated %d %s into %s and %s (phase 2)", len(ids), plural(len(ids), "rollout", "rollouts"), memoryFile, memorySummaryFile)})
	return a.update(func(st *state.State) {
		rec := a.memoryRecord(st, key)
		rec.Phase2 = slices.DeleteFunc(rec.Phase2, func(s string) bool { return slices.Contains(ids, s) })
		rec.Consolidations++
		rec.UpdatedAt = time.Now().UTC()
		if isFresh {
			rec.Calls++
			rec.NextTurn++
			rec.Usage.Add(resp.Usage)
		}
	}, state.MemoryRef(key))
}

// memoryFinish does the memory work still waiting at the end of an apply
// (this apply's, or an earlier one's that stopped): phase 1 of any
// rollout left, then a consolidation of everything extracted, and a
// snapshot of each sandbox whose memory changed so the memory survives
// in it. An interrupted apply leaves the work for the next one.
func (a *applier) memoryFinish(ctx context.Context) error {
	if a.e.interrupted() {
		return nil
	}
	a.mu.Lock()
	var keys []string
	for _, key := range slices.Sorted(maps.Keys(a.st.Memories)) {
		if a.st.Memories[key].Pending() {
			keys = append(keys, key)
		}
	}
	a.mu.Unlock()
	var errs []error
	for _, key := range keys {
		m, _ := a.memorySnapshot(key)
		if a.e.Config.SandboxInstances[m.Sandbox] == nil {
			errs = append(errs, fmt.Errorf("memory %s has work waiting, but %s is no longer in the configuration", key, m.Sandbox))
			continue
		}
		sb, err := a.ensureRunning(ctx, m.Sandbox)
		if err != nil {
			errs = append(errs, fmt.Errorf("memory %s: %w", key, err))
			continue
		}
		ws := a.e.workspace(m.Sandbox, sb)
		if err := a.processMemory(ctx, key, ws, "", true); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := a.snapshot(ctx, m.Sandbox, sb); err != nil {
			errs = append(errs, fmt.Errorf("memory %s: %w", key, err))
		}
	}
	return errors.Join(errs...)
}

// memoryWork lists the memories with work waiting, for plan.
func memoryWork(st *state.State) []MemoryWork {
	var out []MemoryWork
	for _, key := range slices.Sorted(maps.Keys(st.Memories)) {
		m := st.Memories[key]
		if !m.Pending() {
			continue
		}
		var parts []string
		if n := len(m.Phase1); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s to extract (phase 1)", n, plural(n, "rollout", "rollouts")))
		}
		if n := len(m.Phase2); n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s to consolidate (phase 2)", n, plural(n, "rollout", "rollouts")))
		}
		out = append(out, MemoryWork{Address: key, Reason: strings.Join(parts, ", ")})
	}
	return out
}
