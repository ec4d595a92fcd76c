package agentmemory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"time"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// State is the state of the apply the memory work is done in, behind the
// apply's lock.
type State interface {
	// Update changes the state with fn and records the change of the
	// objects refs name durably.
	Update(ctx context.Context, fn func(st *state.State), refs ...state.Ref) error
	// View calls fn with the state, which fn neither changes nor keeps.
	View(fn func(st *state.State))
}

// Journals holds the memories' journals, where every memory call's
// response is checkpointed (a state.Store).
type Journals interface {
	OpenJournal(ctx context.Context, name string) (state.JournalWriter, error)
	ReadJournal(ctx context.Context, name string, fn func(raw json.RawMessage) error) (int, error)
}

// Writer does the memory work of one apply.
type Writer struct {
	Config   *config.Config
	State    State
	Journals Journals
	// Model is the model of agent in the run block named run ("" when
	// that run is no longer declared), as the run sees its provider.
	Model func(agent *config.Agent, run string) (model.Model, error)
	// Scrub masks the sensitive values in a response's item before it is
	// checkpointed.
	Scrub func(model.Item) model.Item
	// Progress reports what was done to the memory at key.
	Progress func(key Key, message string)
}

// record is one memory call in a memory journal.
type record struct {
	Phase    int             `json:"phase"`
	Rollout  string          `json:"rollout,omitempty"`
	Rollouts []string        `json:"rollouts,omitempty"`
	Response *model.Response `json:"response"`
}

// AfterRun writes a completed run's rollout into the workspace of each of
// the targets (Targets) that has one in workspaces (by sandbox address),
// queues it in the state, and extracts its memories (phase 1),
// consolidating when batch_size results wait.
func (w *Writer) AfterRun(ctx context.Context, r Rollout, targets []Target, workspaces map[string]*sandbox.Workspace) error {
	rid := r.id()
	var errs []error
	for _, t := range targets {
		ws := workspaces[t.Key.Sandbox.String()]
		if ws == nil {
			continue
		}
		data, err := r.jsonl(time.Now().UTC())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := ws.Sandbox.WriteFile(ctx, path.Join(rolloutsDir, rid+".jsonl"), []byte(ws.Scrub.String(string(data))), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("%s: writing the rollout: %w", t.Key, ws.Unavailable(ctx, err)))
			continue
		}
		turns, run := r.turns(t.Agent), r.Run.String()
		if err := w.State.Update(ctx, func(st *state.State) {
			m := memoryRecord(st, t.Key)
			if !slices.Contains(m.Phase1, rid) && !slices.Contains(m.Phase2, rid) {
				m.Phase1 = append(m.Phase1, rid)
			}
			m.Run, m.Agent, m.NextTurn = run, t.Agent, turns
		}, state.MemoryRef(t.Key.String())); err != nil {
			return err
		}
		if err := w.process(ctx, t.Key, ws, run, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Process does the work waiting on the memory at key in workspace ws at
// the end of an apply: its phase-1 extractions, then a consolidation of
// everything extracted.
func (w *Writer) Process(ctx context.Context, key Key, ws *sandbox.Workspace) error {
	return w.process(ctx, key, ws, "", true)
}

// process runs the memory's waiting phase-1 extractions, then a
// consolidation when batch_size results wait, or any wait and final is
// set (the end of an apply). run, when set, is the run whose rollout is
// being extracted (its memory usage is recorded on it).
func (w *Writer) process(ctx context.Context, key Key, ws *sandbox.Workspace, run string, final bool) error {
	m, ok := w.snapshot(key)
	if !ok {
		return nil
	}
	c := w.Config.Capabilities[key.Capability.Key()]
	if c == nil || c.Memory == nil || c.Memory.Write == nil {
		return fmt.Errorf("memory %s has work waiting, but %s no longer generates memory: restore its write block, or forget the memory with agentctl state rm", key, m.Capability)
	}
	for _, rid := range m.Phase1 {
		if err := w.phase1(ctx, key, c, ws, rid, run); err != nil {
			return fmt.Errorf("%s: extracting memories from rollout %s (phase 1): %w", key, rid, err)
		}
	}
	m, _ = w.snapshot(key)
	if len(m.Phase2) >= c.Memory.Write.BatchSize || (final && len(m.Phase2) > 0) {
		if err := w.phase2(ctx, key, c, ws); err != nil {
			return fmt.Errorf("%s: consolidating %d rollouts (phase 2): %w", key, len(m.Phase2), err)
		}
	}
	return nil
}

// memoryRecord returns the state's record of the memory at key, creating
// it; callers hold the state's lock (inside Update).
func memoryRecord(st *state.State, key Key) *state.Memory {
	if st.Memories == nil {
		st.Memories = map[string]*state.Memory{}
	}
	k := key.String()
	m := st.Memories[k]
	if m == nil {
		m = &state.Memory{Capability: key.Capability.String(), Sandbox: key.Sandbox.String(), Journal: path.Join("journals", "memory."+state.ScopedName(st.Lineage, k)+".jsonl")}
		st.Memories[k] = m
	}
	return m
}

// snapshot copies the state's record of the memory at key.
func (w *Writer) snapshot(key Key) (state.Memory, bool) {
	var c state.Memory
	found := false
	w.State.View(func(st *state.State) {
		m := st.Memories[key.String()]
		if m == nil {
			return
		}
		c, found = *m, true
		c.Phase1, c.Phase2 = slices.Clone(m.Phase1), slices.Clone(m.Phase2)
	})
	return c, found
}

// call answers one memory call: from the memory journal when it was made
// before (a resume), otherwise from the model, the response checked by
// parse and appended to the journal before it is used. It reports
// whether the model was called.
func (w *Writer) call(ctx context.Context, key Key, rec record, req *model.Request, modelName string, parse func(text string) error) (*model.Response, bool, error) {
	m, _ := w.snapshot(key)
	found, err := w.recorded(ctx, m.Journal, rec)
	if err != nil {
		return nil, false, err
	}
	if found != nil {
		if err := parse(found.Text()); err == nil {
			return found, false, nil
		}
	}
	mdl, err := w.model(m)
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
	j, err := w.Journals.OpenJournal(ctx, m.Journal)
	if err != nil {
		return nil, false, err
	}
	defer j.Close()
	rec.Response = resp
	if err := j.Append(w.scrub(rec)); err != nil {
		return nil, false, fmt.Errorf("checkpointing the memory call: %w", err)
	}
	return resp, true, nil
}

// recorded returns the response the journal holds for the call rec, nil
// when it holds none.
func (w *Writer) recorded(ctx context.Context, journal string, rec record) (*model.Response, error) {
	var found *model.Response
	if _, err := w.Journals.ReadJournal(ctx, journal, func(raw json.RawMessage) error {
		var r record
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		if r.Phase == rec.Phase && r.Rollout == rec.Rollout && slices.Equal(r.Rollouts, rec.Rollouts) && r.Response != nil {
			found = r.Response
		}
		return nil
	}); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the memory journal: %w", err)
	}
	return found, nil
}

// scrub masks the sensitive values in rec's response.
func (w *Writer) scrub(rec record) record {
	if rec.Response != nil && w.Scrub != nil {
		r := *rec.Response
		r.Output = make([]model.Item, len(rec.Response.Output))
		for i, it := range rec.Response.Output {
			r.Output[i] = w.Scrub(it)
		}
		rec.Response = &r
	}
	return rec
}

// model is the model of the agent whose run last fed the memory, as
// that run sees its provider.
func (w *Writer) model(m state.Memory) (model.Model, error) {
	ag := w.Config.Agents[m.Agent]
	if ag == nil {
		return nil, fmt.Errorf("agent %q, whose model writes this memory, is no longer declared", m.Agent)
	}
	runName := ""
	if ri := w.Config.RunInstances[m.Run]; ri != nil {
		runName = ri.Name
	}
	return w.Model(ag, runName)
}

// modelName is the model name of a phase: its setting, or the agent's
// model.
func (w *Writer) modelName(m state.Memory, configured string) string {
	if configured != "" {
		return configured
	}
	if ag := w.Config.Agents[m.Agent]; ag != nil {
		return ag.Model
	}
	return ""
}
