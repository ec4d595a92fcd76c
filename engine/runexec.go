package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/engine/agentmemory"
	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// tracedRunNode is runNode in a span of its own, the parent of the run's
// agent turns.
func (a *applier) tracedRunNode(ctx context.Context, c *Change) (err error) {
	if c.Action == ActionNoop {
		return nil
	}
	attrs := []attribute.KeyValue{attrAddress.String(c.Address), attrAction.String(string(c.Action))}
	if ri := a.e.Config.RunInstances[c.Address]; ri != nil {
		attrs = append(attrs, semconv.GenAIAgentName(ri.Agent))
	}
	ctx, span := a.e.startSpan(ctx, "run "+c.Address, attrs...)
	defer func() {
		a.mu.Lock()
		if r := a.st.Runs[c.Address]; r != nil && c.Action != ActionForget {
			runSpanResult(span, r)
		}
		a.mu.Unlock()
		endSpan(span, err)
	}()
	return a.runNode(ctx, c)
}

// runNode executes, re-runs or resumes one run: a runExec through its
// phases, in order. A phase that fails ends the run; what the run holds
// (journal, MCP servers, interactive sessions) is released either way.
func (a *applier) runNode(ctx context.Context, c *Change) error {
	switch c.Action {
	case ActionForget:
		return a.forgetRun(ctx, c.Address)
	case ActionNoop:
		return nil
	}
	x, err := newRunExec(a, c)
	if err != nil {
		return err
	}
	defer x.release()
	if err := x.prepare(ctx); err != nil {
		return err
	}
	if err := x.acquireSandboxes(ctx); err != nil {
		return err
	}
	if err := x.acquireServers(ctx); err != nil {
		return err
	}
	if err := x.recordStart(ctx); err != nil {
		return err
	}
	x.loop(ctx)
	x.postconditions()
	x.runEndHooks(ctx, x.hooks())
	x.finishMemory(ctx)
	x.finishSnapshots(ctx)
	return x.finishRecord(ctx)
}

// runExec is one run node being carried out. Its phases, each a method
// run once in this order by runNode:
//
//   - prepare: the run's inputs and digest, the record of its previous
//     attempt, whether it resumes (and the steps it resumes from), or
//     that it has nothing to do (errUnchanged);
//   - acquireSandboxes: its sandboxes running (restored or started), the
//     input evaluated with their URLs;
//   - acquireServers: its interactive sessions, agents and MCP servers
//     (whose tools join the digest);
//   - recordStart: its journal opened and the run recorded as running;
//   - loop: the agent turn loop (agentloop.Runner), every step
//     checkpointed in the journal; input and output guardrails and hooks
//     belong here, around Runner.Run;
//   - finishMemory, finishSnapshots, finishRecord: a completed run's
//     memory written, its sandboxes snapshotted, and its result recorded.
//
// The fields below each phase's comment are what it sets for the later
// ones.
type runExec struct {
	a     *applier
	e     *Engine
	c     *Change
	run   addrs.Instance
	addr  string // run.String(): the key of the configuration and the state
	ri    *config.RunInstance
	scrub *sandbox.Scrubber

	// prepare
	in         *runInputs
	prev       *state.Run // the record of the previous attempt, nil for none
	digest     string
	resume     bool
	history    []agentloop.Step // the steps a resumed run starts from
	journalRel string

	// acquireSandboxes
	workspaces map[string]*sandbox.Workspace
	input      string // the input text, with the sandboxes' URLs

	// acquireServers
	sessions *tools.Sessions
	agents   map[string]*agentloop.Agent
	mcps     *mcpSessions

	// recordStart
	journal state.JournalWriter

	// loop
	res     *agentloop.Result
	runErr  error
	status  string
	errText string
	// answered are the model_fallback models that answered a model
	// call of this attempt (its steps are checkpointed concurrently).
	answeredMu sync.Mutex
	answered   map[string]bool
}

// newRunExec starts carrying out the run change c.
func newRunExec(a *applier, c *Change) (*runExec, error) {
	run, err := addrs.ParseInstance(c.Address)
	if err != nil || run.Type != addrs.KindRun {
		return nil, fmt.Errorf("%s: not a run address: %v", c.Address, err)
	}
	ri := a.e.Config.RunInstances[c.Address]
	if ri == nil {
		return nil, fmt.Errorf("%s is not in the configuration", c.Address)
	}
	return &runExec{a: a, e: a.e, c: c, run: run, addr: c.Address, ri: ri, scrub: a.e.scrubber()}, nil
}

// release stops what the run holds: its journal, MCP servers and
// interactive sessions. The loop stops the servers and sessions already
// (before the sandboxes are snapshotted); stopping them again does
// nothing.
func (x *runExec) release() {
	if x.journal != nil {
		x.journal.Close()
	}
	x.mcps.close()
	if x.sessions != nil {
		x.sessions.Close()
	}
}

// prepare evaluates the run's inputs and digest against the state and
// decides whether the run starts anew, resumes its previous attempt, or
// has nothing to do (errUnchanged).
func (x *runExec) prepare(ctx context.Context) error {
	a, e := x.a, x.e
	if err := a.listMCP(ctx, x.ri); err != nil {
		return fmt.Errorf("%s: %w", x.addr, err)
	}
	if err := e.resolveSkills(ctx, x.ri); err != nil {
		return fmt.Errorf("%s: %w", x.addr, err)
	}
	a.mu.Lock()
	sbDigest := map[string]string{}
	for _, sbAddr := range e.Config.RunSandboxes(x.ri) {
		if ss := a.st.Sandboxes[sbAddr]; ss != nil {
			sbDigest[sbAddr] = digestJSON([]string{ss.ConfigDigest, ss.ManifestDigest})
		}
	}
	in, err := e.runInputs(ctx, a.st, x.ri, sbDigest, nil)
	x.prev = a.st.Runs[x.addr]
	a.mu.Unlock()
	if err != nil {
		return err
	}
	x.in = in
	if err := x.preconditions(); err != nil {
		return err
	}
	x.digest = runDigest(in.digests)
	forced := slices.Contains(a.p.Replace, x.addr)
	if prev := x.prev; prev != nil && prev.Digest == x.digest && !forced {
		switch prev.Status {
		case RunCompleted:
			// An upstream re-ran but produced the same output.
			return errUnchanged
		case RunPending:
		default:
			x.resume = true
		}
	}
	// A new attempt's journal is named for this state's lineage; a resumed
	// one is the journal its record names.
	x.journalRel = state.ScopedJournalName(a.lineage(), x.addr)
	if x.resume {
		if x.history, err = e.readJournal(ctx, x.prev); err != nil {
			return err
		}
		x.journalRel = x.prev.JournalFile()
	}
	return nil
}

// acquireSandboxes makes the run's sandboxes ready for its tools
// (ensureRunning), and those whose URLs its input takes, then evaluates
// the input with those URLs.
func (x *runExec) acquireSandboxes(ctx context.Context) error {
	a, e := x.a, x.e
	x.workspaces = map[string]*sandbox.Workspace{}
	for _, sbAddr := range e.Config.RunSandboxes(x.ri) {
		sb, err := a.ensureRunning(ctx, sbAddr)
		if err != nil {
			return fmt.Errorf("%s: %w", x.addr, err)
		}
		x.workspaces[sbAddr] = e.workspace(sbAddr, sb)
	}
	// The sandboxes whose URLs the input takes are running, and their URLs
	// recorded, before the input is evaluated with them.
	for _, sbAddr := range urlSandboxes(e.Config, x.ri) {
		if _, ok := x.workspaces[sbAddr]; ok {
			continue
		}
		if _, err := a.ensureRunning(ctx, sbAddr); err != nil {
			return fmt.Errorf("%s: %w", x.addr, err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	input, err := e.runInputText(a.st, x.ri, x.in.input)
	for sbAddr, ws := range x.workspaces {
		if ss := a.st.Sandboxes[sbAddr]; ss != nil {
			ws.URLs = maps.Clone(ss.URLs)
		}
	}
	x.input = input
	return err
}

// acquireServers opens the run's interactive sessions, builds its agents
// and starts its MCP servers, whose tools join the agents and the digest.
func (x *runExec) acquireServers(ctx context.Context) error {
	a, e := x.a, x.e
	// The run's interactive sessions end with it; a resumed run starts
	// with none, numbering after the ids its earlier attempt used.
	var outputs []string
	for _, s := range x.history {
		if s.Kind == agentloop.StepTool && s.Result != nil {
			outputs = append(outputs, s.Result.Output)
		}
	}
	x.sessions = tools.NewSessions(tools.SessionIDsUsed(outputs))
	agents, err := e.buildAgents(ctx, x.ri, x.workspaces, x.sessions)
	if err != nil {
		return fmt.Errorf("%s: %w", x.addr, err)
	}
	x.agents = agents
	// The run's MCP servers start now and stop when it ends; the digest
	// covers the tools they list now.
	if x.mcps, err = e.startMCP(ctx, a.lineage(), x.ri, x.workspaces, x.resume); err != nil {
		return fmt.Errorf("%s: %w", x.addr, err)
	}
	if err := x.mcps.addTools(e.Config, agents); err != nil {
		return fmt.Errorf("%s: %w", x.addr, err)
	}
	if len(x.mcps.sessions) > 0 {
		a.mu.Lock()
		e.mcpInputs(a.st, x.ri, x.in.digests, &attributes{sc: x.scrub, m: x.in.attrs})
		a.mu.Unlock()
		x.digest = runDigest(x.in.digests)
	}
	return nil
}

// recordStart opens the run's journal (a new attempt's replaces the
// previous attempt's) and records the run as running, with its digest
// and provenance.
func (x *runExec) recordStart(ctx context.Context) error {
	a, e := x.a, x.e
	if !x.resume {
		// The previous attempt's journal (its transcript) goes only now,
		// when its record is about to be replaced, with a file of this name
		// that a crash left before its record was written.
		stale := []string{x.journalRel}
		if x.prev != nil && x.prev.Journal != "" && x.prev.Journal != x.journalRel {
			stale = append(stale, x.prev.Journal)
		}
		for _, j := range stale {
			if err := e.State.RemoveJournal(context.WithoutCancel(ctx), j); err != nil {
				return fmt.Errorf("%s: clearing old journal: %w", x.addr, err)
			}
		}
	}
	journal, err := e.State.OpenJournal(ctx, x.journalRel)
	if err != nil {
		return fmt.Errorf("%s: opening journal: %w", x.addr, err)
	}
	x.journal = journal
	r := x.runningRecord(ctx)
	return a.update(ctx, func(st *state.State) { st.Runs[x.addr] = r }, state.RunRef(x.addr))
}

// noteAnswered notes the fallback model that answered step s, if any.
func (x *runExec) noteAnswered(s agentloop.Step) {
	if s.Kind != agentloop.StepModel || s.Response == nil || s.Response.Model == "" {
		return
	}
	x.answeredMu.Lock()
	defer x.answeredMu.Unlock()
	if x.answered == nil {
		x.answered = map[string]bool{}
	}
	x.answered[s.Response.Model] = true
}

// answeredModels is models (the run's agents' own) with the fallback
// models that answered a call of the run, in this attempt or the ones it
// resumes, sorted.
func (x *runExec) answeredModels(models []string) []string {
	for _, s := range x.history {
		x.noteAnswered(s)
	}
	x.answeredMu.Lock()
	defer x.answeredMu.Unlock()
	out := slices.Clone(models)
	for m := range x.answered {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	slices.Sort(out)
	return out
}

// runningRecord is the state's record of the run as it starts: running,
// with the turns, usage and spending of the steps it resumes from.
func (x *runExec) runningRecord(ctx context.Context) *state.Run {
	e, prev := x.e, x.prev
	models := map[string]bool{}
	for _, ag := range x.agents {
		if ag.ModelName != "" {
			models[ag.ModelName] = true
		}
	}
	r := &state.Run{Address: x.addr, Agent: x.ri.Agent, Status: RunRunning, Digest: x.digest, DigestInputs: x.in.digests, Attributes: x.in.attrs,
		Sandboxes: slices.Sorted(maps.Keys(x.workspaces)), Journal: x.journalRel, Steps: len(x.history), TraceID: traceID(ctx)}
	r.Turns, r.Usage = agentloop.Replay(x.history)
	spent := agentloop.Spend(x.history)
	r.ToolCalls, r.RunningTime, r.Budgets = spent.ToolCalls, spent.Duration, runBudgets(e.Config, x.ri)
	r.Provenance = state.Provenance{
		ConfigDigest: e.ConfigDigest(),
		GitCommit:    x.a.gitCommit(),
		Models:       slices.Sorted(maps.Keys(models)),
		StartedAt:    time.Now().UTC(),
	}
	if x.resume && prev != nil {
		r.Provenance.StartedAt = prev.Provenance.StartedAt
		r.Approvals = prev.Approvals
		r.ToolDecisions = prev.ToolDecisions
	}
	return r
}

// loop runs the agent turn loop over the run's input, every step
// checkpointed in its journal, and sets the run's result and status. It
// is where input and output guardrails and hooks go: before Runner.Run
// sees x.input, after it returns x.res. The MCP servers and interactive
// sessions stop with it, before the sandboxes are snapshotted.
func (x *runExec) loop(ctx context.Context) {
	events := newRunEvents(x.scrub, func(ev agentloop.Event) {
		x.e.emit(Event{Type: EventRuntime, Address: x.addr, Runtime: &ev})
	})
	runner := x.runner(events)
	stop := x.a.progress(x.addr, x.c.Action)
	x.res, x.runErr = runner.Run(ctx, x.ri.Agent, x.input, x.history)
	events.Flush()
	stop()
	x.mcps.close()
	x.sessions.Close()
	x.status = RunCompleted
	switch err := x.runErr; {
	case err == nil:
	case errors.Is(err, agentloop.ErrInterrupted) || errors.Is(err, context.Canceled):
		x.status, x.errText = RunInterrupted, err.Error()
	case isAwaiting(err):
		x.status = RunAwaiting
	case guardrailTrip(err) != nil:
		x.status, x.errText = RunGuardrailTripped, err.Error()
	default:
		x.status, x.errText = RunFailed, err.Error()
	}
}

// runner is the run's turn loop: its agents and limits, the steps it
// resumes from, and where its steps, events and approvals go.
func (x *runExec) runner(events *runEvents) *agentloop.Runner {
	scrub := x.scrub
	return &agentloop.Runner{
		Agents:    x.agents,
		MaxTurns:  x.ri.MaxTurns,
		Budget:    loopBudget(x.ri.Budget),
		Interrupt: x.e.Interrupt,
		Tracer:    x.e.tracer(),
		Prior:     x.in.prior, // continue = run.X (continue.go)
		// Journals and events hold nothing sensitive: model text and tool
		// calls are scrubbed as they are recorded.
		Checkpoint: func(_ context.Context, s agentloop.Step) error {
			x.noteAnswered(s)
			return x.journal.Append(scrubStep(scrub, s))
		},
		Events:     events.Event,
		Decisions:  decisions(x.prev, x.resume),
		Redact:     func(args string) string { return scrubJSONString(scrub, args) },
		Ask:        x.a.asker(x.addr, scrub),
		Hook:       x.hooks().runHooks,
		Guardrails: loopGuardrails(x.e.Config, x.ri.Guardrails),
	}
}

// finishMemory lets the memories of a completed run's agents learn from
// it (engine/agentmemory), before its sandboxes are snapshotted. A memory
// failure leaves the run completed and the memory work waiting for the
// next apply; it fails the apply at its end (applier.memErrs).
func (x *runExec) finishMemory(ctx context.Context) {
	if x.status != RunCompleted {
		return
	}
	targets, err := agentmemory.Targets(x.e.Config, x.ri)
	if err == nil && len(targets) == 0 {
		return
	}
	var steps []agentloop.Step
	if err == nil {
		steps, err = x.e.readJournal(ctx, &state.Run{Address: x.addr, Journal: x.journalRel, Steps: x.journal.Len(), Status: RunRunning})
	}
	if err == nil {
		r := agentmemory.Rollout{Run: x.run, Agent: x.ri.Agent, Digest: x.digest, Steps: steps, Output: x.res.Output}
		err = x.a.memory().AfterRun(ctx, r, targets, x.workspaces)
	}
	if err != nil {
		err = fmt.Errorf("%s completed, but its memory was not written: %w; the next apply carries the memory work on", x.addr, err)
		x.e.emit(Event{Type: EventApplyProgress, Address: x.addr, Message: err.Error()})
		x.a.mu.Lock()
		x.a.memErrs = append(x.a.memErrs, err)
		x.a.mu.Unlock()
	}
}

// finishSnapshots snapshots the sandboxes of a completed run; a snapshot
// that fails fails the run.
func (x *runExec) finishSnapshots(ctx context.Context) {
	if x.status != RunCompleted {
		return
	}
	for _, sbAddr := range slices.Sorted(maps.Keys(x.workspaces)) {
		if err := x.a.snapshot(ctx, sbAddr, x.workspaces[sbAddr].Sandbox); err != nil {
			x.status, x.errText, x.runErr = RunFailed, err.Error(), err
			return
		}
	}
}

// finishRecord records the run's result in the state and returns the
// run's error: an awaiting run's errRunAwaiting, an interrupted run's
// errRunInterrupted (with the turn it stopped at), a failed run's cause.
func (x *runExec) finishRecord(ctx context.Context) error {
	res := x.res
	if err := x.a.update(ctx, func(st *state.State) {
		r := st.Runs[x.addr]
		r.Status = x.status
		r.Error = x.scrub.String(x.errText)
		r.Guardrail = scrubTrip(x.scrub, guardrailTrip(x.runErr))
		r.Steps = x.journal.Len()
		if res != nil {
			r.Turns = res.Turns
			r.Usage = res.Usage
			r.ToolCalls, r.RunningTime = res.Spending.ToolCalls, res.Spending.Duration
			if x.status == RunCompleted {
				r.Output = scrubJSON(x.scrub, res.Output)
			}
		}
		if x.status == RunCompleted {
			r.Provenance.CompletedAt = time.Now().UTC()
		}
		r.Provenance.Models = x.answeredModels(r.Provenance.Models)
		recordPending(r, x.runErr, x.scrub)
	}, state.RunRef(x.addr)); err != nil {
		return err
	}
	switch {
	case x.status == RunAwaiting:
		return x.a.awaiting(x.addr)
	case x.status == RunInterrupted:
		turns := 0
		if res != nil {
			turns = res.Turns
		}
		return fmt.Errorf("%s: %w at turn %d: its progress is checkpointed; run agentctl apply again to resume it", x.addr, errRunInterrupted, turns)
	case x.runErr != nil:
		return fmt.Errorf("%s: %w", x.addr, x.runErr)
	}
	return nil
}
