package agentmemory

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/local"
)

// lockedState is the state behind a lock, as an apply holds it.
type lockedState struct {
	mu sync.Mutex
	st *state.State
}

func (s *lockedState) Update(_ context.Context, fn func(*state.State), _ ...state.Ref) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.st)
	return nil
}

func (s *lockedState) View(fn func(*state.State)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.st)
}

// memoryModel answers the two memory prompts with fixed JSON, counting
// its calls.
type memoryModel struct {
	mu     sync.Mutex
	calls  []string // the phase of each call
	refuse string   // a phase the model must not be asked for
}

func (m *memoryModel) Respond(_ context.Context, req *model.Request, _ func(model.Event)) (*model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var answer any
	switch {
	case strings.HasPrefix(req.Instructions, "You read the record"):
		m.calls = append(m.calls, "phase1")
		answer = map[string]string{"rollout_slug": "Count the Files!", "rollout_summary": "counted the files", "raw_memory": "- the data is in data/ (token s3cret)"}
	case strings.HasPrefix(req.Instructions, "You maintain"):
		m.calls = append(m.calls, "phase2")
		answer = map[string]string{"memory_md": "# Data\n- in data/", "memory_summary": "The data is in data/."}
	default:
		return nil, errors.New("not a memory prompt")
	}
	if last := m.calls[len(m.calls)-1]; last == m.refuse {
		return nil, errors.New(last + " must not be asked again")
	}
	b, _ := json.Marshal(answer)
	return &model.Response{Output: []model.Item{{Type: model.ItemMessage, Role: "assistant", Text: string(b)}}, Usage: model.Usage{InputTokens: 10, OutputTokens: 5}}, nil
}

// fixture is one agent with a memory in sandbox.s, its workspace a host
// directory, and a writer over a fresh state.
type fixture struct {
	cfg   *config.Config
	ri    *config.RunInstance
	st    *lockedState
	dir   string // the workspace
	ws    *sandbox.Workspace
	model *memoryModel
	w     *Writer
}

func newFixture(t *testing.T, batch int) *fixture {
	t.Helper()
	cfg := &config.Config{
		Agents: map[string]*config.Agent{"analyst": {Name: "analyst", Model: "m1", Sandbox: "sandbox.s", Capabilities: []string{"capability.memory.default", "capability.shell.default"}}},
		Capabilities: map[string]*config.Capability{
			"memory.default": {Type: "memory", Name: "default", Addr: "capability.memory.default", Memory: &config.MemoryCapability{
				Read: &config.MemoryRead{MaxSummaryTokens: 100}, Write: &config.MemoryWrite{BatchSize: batch}}},
			"shell.default": {Type: "shell", Name: "default", Addr: "capability.shell.default"},
		},
		RunInstances: map[string]*config.RunInstance{},
	}
	ri := &config.RunInstance{Addr: `run.count["a"]`, Name: "count", Key: "a", Agent: "analyst"}
	cfg.RunInstances[ri.Addr] = ri
	dir := t.TempDir()
	sb, err := hostfs.NewHostDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	sd, err := local.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	scrub := sandbox.NewScrubber([]string{"s3cret"})
	f := &fixture{cfg: cfg, ri: ri, st: &lockedState{st: state.New()}, dir: dir, model: &memoryModel{},
		ws: &sandbox.Workspace{Sandbox: sb, Address: "sandbox.s", Scrub: scrub}}
	f.st.st.Runs[ri.Addr] = &state.Run{Address: ri.Addr}
	f.w = &Writer{
		Config:   cfg,
		State:    f.st,
		Journals: sd,
		Model:    func(*config.Agent, string) (model.Model, error) { return f.model, nil },
		Scrub: func(it model.Item) model.Item {
			it.Text = scrub.String(it.Text)
			return it
		},
		Progress: func(Key, string) {},
	}
	return f
}

func (f *fixture) rollout(t *testing.T) Rollout {
	t.Helper()
	run, err := addrs.ParseInstance(f.ri.Addr)
	if err != nil {
		t.Fatal(err)
	}
	steps := []agentloop.Step{
		{Kind: agentloop.StepInput, Agent: "analyst", Input: "count the files"},
		{Kind: agentloop.StepModel, Agent: "analyst", Response: &model.Response{Output: []model.Item{{Type: model.ItemMessage, Role: "assistant", Text: "3 files"}}}},
	}
	return Rollout{Run: run, Agent: "analyst", Digest: "0123456789abcdef0123", Steps: steps, Output: json.RawMessage(`"3 files"`)}
}

func (f *fixture) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAfterRunWritesTheMemoryIntoTheWorkspace(t *testing.T) {
	f := newFixture(t, 1)
	targets, err := Targets(f.cfg, f.ri)
	if err != nil || len(targets) != 1 || targets[0].Key.String() != "capability.memory.default@sandbox.s" || targets[0].Agent != "analyst" {
		t.Fatalf("targets %+v, %v", targets, err)
	}
	if err := f.w.AfterRun(context.Background(), f.rollout(t), targets, map[string]*sandbox.Workspace{"sandbox.s": f.ws}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.model.calls, ","); got != "phase1,phase2" {
		t.Errorf("memory calls %s, want phase1,phase2", got)
	}
	rollout := f.read(t, "rollouts/"+state.SafeName(f.ri.Addr)+"-0123456789ab.jsonl")
	if !strings.Contains(rollout, `"run":"run.count[\"a\"]"`) || !strings.Contains(rollout, `"content":"3 files"`) {
		t.Errorf("rollout:\n%s", rollout)
	}
	if got := f.read(t, "memory/memory_summary.md"); got != "The data is in data/.\n" {
		t.Errorf("memory_summary.md = %q", got)
	}
	if raw := f.read(t, "memory/raw_memories.md"); strings.Contains(raw, "s3cret") || !strings.Contains(raw, "the data is in data/") {
		t.Errorf("raw_memories.md (the secret masked, the memory kept):\n%s", raw)
	}
	m := f.st.st.Memories["capability.memory.default@sandbox.s"]
	if m == nil || m.Pending() || m.Extracted != 1 || m.Consolidations != 1 || m.Calls != 2 || m.Run != f.ri.Addr || m.NextTurn != 3 {
		t.Fatalf("memory record %+v", m)
	}
	if u := f.st.st.Runs[f.ri.Addr].MemoryUsage; u.InputTokens != 10 {
		t.Errorf("the run's memory usage %+v: want phase 1's call on it", u)
	}
	instr, err := Instructions(context.Background(), f.ws, &config.MemoryRead{MaxSummaryTokens: 100})
	if err != nil || !strings.Contains(instr, "<memory_summary>\nThe data is in data/.\n</memory_summary>") {
		t.Errorf("instructions %q, %v", instr, err)
	}
}

func TestProcessResumesFromTheJournal(t *testing.T) {
	f := newFixture(t, 5) // no consolidation during the run
	targets, _ := Targets(f.cfg, f.ri)
	if err := f.w.AfterRun(context.Background(), f.rollout(t), targets, map[string]*sandbox.Workspace{"sandbox.s": f.ws}); err != nil {
		t.Fatal(err)
	}
	if got := Pending(f.st.st); len(got) != 1 || got[0].Reason != "1 rollout to consolidate (phase 2)" {
		t.Fatalf("pending %+v", got)
	}
	// The rollout goes back to phase 1, as if the apply had stopped after
	// the call was journaled: the journal answers it, the model is not
	// asked again, and the secret never reached the journal.
	m := f.st.st.Memories["capability.memory.default@sandbox.s"]
	m.Phase1, m.Phase2 = m.Phase2, nil
	f.model.calls, f.model.refuse = nil, "phase1"
	key := targets[0].Key
	if err := f.w.Process(context.Background(), key, f.ws); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(f.model.calls, ","); got != "phase2" {
		t.Errorf("memory calls on resume %q, want only the consolidation", got)
	}
	journal, err := os.ReadFile(f.w.Journals.(*local.Dir).Abs(m.Journal))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(journal), "s3cret") {
		t.Errorf("the memory journal holds the secret:\n%s", journal)
	}
	if m.Pending() || m.Extracted != 2 || m.Consolidations != 1 || m.Calls != 2 {
		t.Errorf("memory record %+v", m)
	}
}

func TestParseKey(t *testing.T) {
	k, err := ParseKey(`capability.memory.notes@sandbox.s["x@y"]`)
	if err != nil || k.Capability.Key() != "memory.notes" || k.Sandbox.String() != `sandbox.s["x@y"]` {
		t.Fatalf("%+v, %v", k, err)
	}
	for _, bad := range []string{"capability.memory.notes", "capability.memory.notes@run.r", "agent.a@sandbox.s"} {
		if _, err := ParseKey(bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseKey(%q) = %v, want an error naming it", bad, err)
		}
	}
}
