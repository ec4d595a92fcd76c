package agentloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
)

// DefaultMaxTurns is the turn limit when neither the run nor the agent
// sets one, as in the Agents SDK.
const DefaultMaxTurns = 10

var (
	// ErrMaxTurns ends a run that used up its turns; the run stays
	// resumable.
	ErrMaxTurns = errors.New("max turns exceeded")
	// ErrInterrupted ends a run stopped by Runner.Interrupt: between
	// steps, or by abandoning the model call in flight.
	ErrInterrupted = errors.New("interrupted")
)

// Agent is one agent as the runtime sees it: everything resolved, tools
// bound to the agent's own workspace.
type Agent struct {
	Name      string
	Model     model.Model
	ModelName string
	// Provider is the model provider's type (openai, scripted), for
	// traces.
	Provider string
	// Instructions are the fully assembled instructions (agent, then
	// capability instructions, then the workspace rendering).
	Instructions string
	Settings     model.Settings
	// ModelFallback are the models asked in order, with the same Model,
	// when the one before was unavailable (model.IsUnavailable).
	ModelFallback []string
	// HostedTools are the tools the model's service runs itself; their
	// calls are recorded and shown, never executed here.
	HostedTools  []model.HostedTool
	OutputSchema json.RawMessage
	Compaction   *model.Compaction
	// MaxTurns bounds a nested run of this agent used as a tool (0 =
	// DefaultMaxTurns).
	MaxTurns   int
	Tools      []tools.Tool
	Handoffs   []Handoff
	AgentTools []AgentTool
	// Budget bounds what this agent spends within a run (zero: no
	// limit).
	Budget Budget
	// Approvals are the approval policies of the agent's tools, by the
	// function name the model calls (exec_command, apply_patch, a
	// command or agent tool's name). A tool without one never asks.
	Approvals map[string]ApprovalPolicy
	// Guardrails are the agent's guardrails (guardrail.go).
	Guardrails []Guardrail
}

// Handoff lets an agent transfer the conversation to another agent.
type Handoff struct {
	Agent       string
	Description string
	// InputFilter, when set, is what of the conversation Agent is given
	// (handoff.go); nil: all of it.
	InputFilter *InputFilter
}

// AgentTool exposes another agent as a function tool.
type AgentTool struct {
	Name        string
	Agent       string
	Description string
}

// Runner runs agents. It is safe to use one Runner for one run at a time.
type Runner struct {
	Agents map[string]*Agent
	// Checkpoint receives every step and must persist it before
	// returning; the runner waits for it. An error ends the run. It is
	// called concurrently for the results of concurrent tool calls.
	Checkpoint func(ctx context.Context, s Step) error
	// Events, when set, receives events as they happen (from several
	// goroutines, serialized by the runner).
	Events func(Event)
	// Interrupt, when closed, stops the run: a model call in flight is
	// abandoned at once (with its retries; it is not checkpointed, so a
	// resume makes it again), tool calls in flight finish and are
	// checkpointed, and no new step starts.
	Interrupt <-chan struct{}
	// MaxTurns bounds the run's top-level conversation (0 = the start
	// agent's MaxTurns, else DefaultMaxTurns).
	MaxTurns int
	// Budget bounds what the whole run spends, every agent in it
	// included (zero: no limit). Agent.Budget bounds one agent.
	Budget Budget
	// Prior are the items a new run's conversation starts from, before
	// its input (the transcript of the run it continues). They are
	// recorded in its input step, so a resume does not need them again.
	Prior []model.Item
	// Decisions are the reviewer's decisions on calls that need approval,
	// by the call's conversation and id; each binds to the call's tool
	// and arguments (Decision.Digest). A call that needs approval and has
	// no matching decision ends the run with an *AwaitingApprovalError
	// once the calls that may run did.
	Decisions map[DecisionKey]Decision
	// Redact, when set, is what a reviewer and the journal see of a
	// call's arguments (sensitive values scrubbed); a decision binds to
	// the call's digest over it (CallDigest).
	Redact func(arguments string) string
	// Ask, when set, is asked about a call that needs approval and has no
	// decision, one call at a time, before the response's calls run; ok
	// false defers it (the run ends awaiting approval).
	Ask func(ctx context.Context, c PendingCall) (d Decision, ok bool)
	// Tracer, when set, records a span for each agent turn
	// (invoke_agent), model call (chat), tool call (execute_tool) and
	// approval, as children of the span in the context Run is given; nil
	// records nothing.
	Tracer trace.Tracer
	// Hook, when set, runs the hooks of an event (hook.go); each
	// occurrence's run is checkpointed (StepHook) and not repeated when
	// the run resumes. An error ends the run.
	Hook func(ctx context.Context, ev HookEvent) (HookResult, error)
	// Guardrails are the run's own guardrails, checked before each
	// agent's (guardrail.go).
	Guardrails []Guardrail
}

// Result is a finished run.
type Result struct {
	// Output is the final output as JSON: a string, or the structured
	// object when the final agent has an output schema.
	Output json.RawMessage
	// Agent is the agent that gave the final answer.
	Agent string
	Turns int
	Usage model.Usage
	// Spending is what the run spent over all its attempts: tokens, tool
	// calls, running time, in total and by agent.
	Spending Spending
}

// Replay reads a run's steps: the number of model turns and the usage
// they recorded.
func Replay(steps []Step) (turns int, usage model.Usage) {
	for _, s := range steps {
		if s.Kind == StepModel && s.Response != nil {
			if s.Path == "" {
				turns++
			}
			usage.Add(s.Response.Usage)
		}
		if s.Kind == StepCompaction && s.Response != nil {
			usage.Add(s.Response.Usage)
		}
	}
	return turns, usage
}

// Run runs agent on input, continuing from history (the steps of an
// earlier, unfinished attempt of the same run; nil for a new run). Tool
// calls of the last recorded response that have no recorded output are
// executed again.
func (r *Runner) Run(ctx context.Context, agent, input string, history []Step) (*Result, error) {
	st := &runState{r: r, byPath: map[string][]Step{}, agentTurns: map[string]int{}, callIDs: map[string]bool{}, passed: map[string]bool{}, started: time.Now()}
	for _, s := range history {
		st.recordVerdict(s)
		st.byPath[s.Path] = append(st.byPath[s.Path], s)
		if s.Kind == StepModel && s.Response != nil {
			for _, c := range s.Response.FunctionCalls() {
				st.callIDs[c.CallID] = true
			}
		}
		if (s.Kind == StepModel || s.Kind == StepCompaction) && s.Response != nil {
			st.agentTurns[s.Agent]++
		}
		st.spent.add(s)
	}
	st.baseElapsed = st.spent.Duration
	st.recordHooks(history)
	if len(history) > 0 && history[0].Kind == StepInput && history[0].Path == "" {
		agent, input = history[0].Agent, history[0].Input
	}
	maxTurns := r.MaxTurns
	if maxTurns <= 0 {
		if a := r.Agents[agent]; a != nil && a.MaxTurns > 0 {
			maxTurns = a.MaxTurns
		} else {
			maxTurns = DefaultMaxTurns
		}
	}
	f := &frame{st: st, path: "", agent: agent, input: input, maxTurns: maxTurns}
	out, err := f.run(ctx)
	st.mu.Lock()
	st.spent.Duration = st.elapsedLocked()
	res := &Result{Agent: f.agent, Turns: f.turns, Usage: st.spent.Usage, Spending: st.spent.clone()}
	st.mu.Unlock()
	if out != nil {
		res.Output = out
	}
	return res, err
}

// runState is shared by a run's top-level and nested conversations.
type runState struct {
	r          *Runner
	mu         sync.Mutex
	byPath     map[string][]Step
	agentTurns map[string]int
	// callIDs are the ids of every call the model made in the run, in
	// any conversation: an id may be used once.
	callIDs map[string]bool
	// passed are the guardrail verdicts checkpointed as passed
	// (verdictKey): a resumed run does not check them again.
	passed map[string]bool
	// withheld are the tool_output trips the history records, by
	// withheldKey: their calls do not run again (guardrail.go).
	withheld map[string]GuardrailVerdict
	// spent is what the run spent so far; baseElapsed is the running
	// time its earlier attempts recorded, started when this one began.
	spent       Spending
	baseElapsed time.Duration
	started     time.Time
	eventMu     sync.Mutex
	// hooksRan are the hooks that ran, by occurrence (hook.go).
	hooksRan map[string]*HookRecord
}

func (st *runState) emit(e Event) {
	if st.r.Events == nil {
		return
	}
	st.eventMu.Lock()
	defer st.eventMu.Unlock()
	st.r.Events(e)
}

// checkpoint hands s to Runner.Checkpoint and counts its usage. Steps of
// concurrent calls are checkpointed concurrently (the journal commits
// them together), so Checkpoint must be safe for concurrent use.
func (st *runState) checkpoint(ctx context.Context, s Step) error {
	st.mu.Lock()
	s.Elapsed = st.elapsedLocked()
	st.mu.Unlock()
	if st.r.Checkpoint != nil {
		if err := st.r.Checkpoint(ctx, s); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	st.mu.Lock()
	st.spent.add(s)
	st.mu.Unlock()
	return nil
}

// claimCallIDs records the ids of resp's calls, refusing an empty id and
// one the run already used (a reused id must never reach the decision or
// the output recorded for another call).
func (st *runState) claimCallIDs(resp *model.Response) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	calls := resp.FunctionCalls()
	seen := map[string]bool{}
	for _, c := range calls {
		switch {
		case c.CallID == "":
			return fmt.Errorf("the model sent a call of %s with no call id", c.Name)
		case st.callIDs[c.CallID] || seen[c.CallID]:
			return fmt.Errorf("the model reused call id %q (a call of %s): call ids must be unique within a run", c.CallID, c.Name)
		}
		seen[c.CallID] = true
	}
	for id := range seen {
		st.callIDs[id] = true
	}
	return nil
}

func (st *runState) nextAgentTurn(agent string) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := st.agentTurns[agent]
	st.agentTurns[agent]++
	return n
}

func (st *runState) interrupted() bool {
	if st.r.Interrupt == nil {
		return false
	}
	select {
	case <-st.r.Interrupt:
		return true
	default:
		return false
	}
}

// untilInterrupt returns ctx cancelled also by Runner.Interrupt, for a
// model call: an interrupt abandons the call in flight, with its retries
// and backoff, since nothing of it is checkpointed yet (tool calls are
// left to finish). stop releases it.
func (st *runState) untilInterrupt(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	interrupt := st.r.Interrupt
	if interrupt == nil {
		return ctx, cancel
	}
	go func() {
		select {
		case <-interrupt:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// frame is one conversation: the run itself or a nested agent-tool run.
type frame struct {
	st       *runState
	path     string
	agent    string
	input    string
	maxTurns int

	conv    []model.Item
	turns   int
	pending *model.Response // last response whose calls are not all answered
	outputs map[string]model.Item
	// turnStarts are the indexes in conv where each model turn's output
	// begins; lastTokens is the context size the last response reported
	// (client-side compaction, compact.go).
	turnStarts []int
	lastTokens int64
	// filter is the input filter of the handoff taken in the pending
	// response, applied when its outputs are flushed.
	filter *InputFilter
}

func (f *frame) run(ctx context.Context) (_ json.RawMessage, err error) {
	// turn is the span of the turn under way: its model call and the tool
	// calls answering it. tctx carries it.
	var turn trace.Span
	tctx := ctx
	endTurn := func(err error) {
		if turn != nil {
			endSpan(turn, err)
			turn = nil
		}
	}
	defer func() { endTurn(err) }()
	steps := f.st.byPath[f.path]
	if len(steps) == 0 || steps[0].Kind != StepInput {
		if _, ok := f.st.r.Agents[f.agent]; !ok {
			return nil, fmt.Errorf("unknown agent %q", f.agent)
		}
		if _, err := f.hook(ctx, HookEvent{Event: "agent_start", Agent: f.agent, Input: f.input}, f.agent+"/0"); err != nil {
			return nil, err
		}
		s := Step{Kind: StepInput, Path: f.path, Agent: f.agent, Input: f.input}
		if f.path == "" {
			s.Prior = f.st.r.Prior
		}
		if err := f.st.checkpoint(ctx, s); err != nil {
			return nil, err
		}
		steps = append([]Step{s}, steps...)
	}
	for _, s := range steps {
		if err := f.replay(s); err != nil {
			return nil, err
		}
	}
	var waitGuards func() error
	if f.path == "" {
		if waitGuards, err = f.inputGuards(ctx); err != nil {
			return nil, err
		}
		if wait := waitGuards; wait != nil {
			// Never return with the parallel guardrails still running.
			defer func() { _ = wait() }()
		}
	}
	for {
		if f.pending != nil && waitGuards != nil {
			// The parallel input guardrails decide before any call runs.
			if err := waitGuards(); err != nil {
				return nil, err
			}
			waitGuards = nil
		}
		if f.pending != nil {
			if calls := f.pending.FunctionCalls(); len(calls) == 0 {
				out, err := f.final(ctx)
				if err == nil {
					err = f.agentEnd(ctx, out)
				}
				return out, err
			}
			if f.st.interrupted() {
				// Interrupted during the model turn: stop with it
				// checkpointed; its calls run on resume.
				return nil, ErrInterrupted
			}
			if turn == nil {
				// A turn checkpointed before an interruption: its calls
				// run now.
				tctx, turn = f.startTurn(ctx, true)
			}
			if err := f.answerCalls(tctx); err != nil {
				return nil, err
			}
			endTurn(nil)
		}
		if f.st.interrupted() {
			return nil, ErrInterrupted
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err := f.st.overBudget(f.st.r.Agents[f.agent]); err != nil {
			return nil, err
		}
		if f.turns >= f.maxTurns {
			return nil, fmt.Errorf("%w: agent %q used all %d turns without a final answer; raise max_turns on the run or agent and apply again", ErrMaxTurns, f.agent, f.maxTurns)
		}
		tctx, turn = f.startTurn(ctx, false)
		if err := f.callModel(tctx); err != nil {
			return nil, err
		}
	}
}

// replay applies one recorded step to the frame.
func (f *frame) replay(s Step) error {
	switch s.Kind {
	case StepInput:
		f.agent = s.Agent
		f.input = s.Input
		f.conv = append(append(f.conv[:0], s.Prior...), model.Item{Type: model.ItemMessage, Role: "user", Text: s.Input})
		f.turnStarts, f.lastTokens = nil, 0
	case StepModel:
		if s.Response == nil {
			return fmt.Errorf("journal: model step without a response")
		}
		f.flush()
		f.agent = s.Agent
		f.addResponse(s.Response)
	case StepCompaction:
		if s.Compacted == nil {
			return fmt.Errorf("journal: compaction step without its record")
		}
		f.flush()
		return f.applyCompaction(s.Compacted)
	case StepTool:
		if s.Result == nil {
			return fmt.Errorf("journal: tool step without a result")
		}
		if f.outputs == nil {
			f.outputs = map[string]model.Item{}
		}
		f.outputs[s.Result.CallID] = *s.Result
		if s.Handoff != "" {
			f.filter = s.InputFilter
		}
	}
	return nil
}

func (f *frame) addResponse(resp *model.Response) {
	f.turnStarts = append(f.turnStarts, len(f.conv))
	f.lastTokens = resp.Usage.InputTokens + resp.Usage.OutputTokens
	for _, it := range resp.Output {
		if it.Type == model.ItemMessage || it.Type == model.ItemFunctionCall || it.Type == model.ItemHostedToolCall {
			it.Agent = f.agent
		}
		f.conv = append(f.conv, it)
	}
	f.turns++
	f.pending = resp
	f.outputs = map[string]model.Item{}
}

// flush appends the outputs of the pending response's calls in call order
// and follows a handoff taken in it.
func (f *frame) flush() {
	if f.pending == nil {
		return
	}
	a := f.st.r.Agents[f.agent]
	for _, c := range f.pending.FunctionCalls() {
		if out, ok := f.outputs[c.CallID]; ok {
			f.conv = append(f.conv, out)
		}
	}
	if target := takenHandoff(a, f.pending.FunctionCalls()); target != "" {
		f.agent = target
	}
	if f.filter != nil {
		// The filter was recorded with the handoff, so a replay (and a
		// transcript, which knows no agents) filters the same way.
		f.conv = f.filter.apply(f.conv)
		f.turnStarts, f.lastTokens = nil, 0
	}
	f.pending = nil
	f.outputs = nil
	f.filter = nil
}

// takenHandoff is the target of the first transfer call of calls that names
// one of a's handoffs, as the Agents SDK takes only the first.
func takenHandoff(a *Agent, calls []model.Item) string {
	if a == nil {
		return ""
	}
	for _, c := range calls {
		for _, h := range a.Handoffs {
			if c.Name == tools.HandoffToolName(h.Agent) {
				return h.Agent
			}
		}
	}
	return ""
}

func (f *frame) callModel(ctx context.Context) error {
	a := f.st.r.Agents[f.agent]
	if a == nil {
		return fmt.Errorf("unknown agent %q", f.agent)
	}
	if err := f.maybeCompact(ctx, a); err != nil {
		return err
	}
	req := &model.Request{
		Agent:            a.Name,
		AgentTurn:        f.st.nextAgentTurn(a.Name),
		Model:            a.ModelName,
		Instructions:     a.Instructions,
		Input:            f.conv[:len(f.conv):len(f.conv)], // no copy; providers must not modify items
		Tools:            toolDefinitions(a),
		HostedTools:      a.HostedTools,
		OutputSchema:     a.OutputSchema,
		OutputSchemaName: "final_output",
		Settings:         a.Settings,
		Compaction:       a.Compaction,
	}
	f.st.emit(Event{Type: EventTurn, Path: f.path, Agent: a.Name, Turn: f.turns + 1})
	began := time.Now()
	resp, err := f.respond(ctx, a, req, true)
	if err != nil {
		if f.st.interrupted() {
			return fmt.Errorf("agent %q, turn %d: %w: the model call in flight (and its retries) was abandoned; it was not checkpointed and is made again on resume", a.Name, f.turns+1, ErrInterrupted)
		}
		return &modelError{fmt.Errorf("agent %q, turn %d: model call failed: %w", a.Name, f.turns+1, err)}
	}
	if err := f.st.claimCallIDs(resp); err != nil {
		return &modelError{fmt.Errorf("agent %q, turn %d: %w; the response was not recorded, and the model is asked again when the run resumes", a.Name, f.turns+1, err)}
	}
	if err := f.st.checkpoint(ctx, Step{Kind: StepModel, Path: f.path, Agent: a.Name, Response: resp, Duration: time.Since(began)}); err != nil {
		return err
	}
	f.addResponse(resp)
	return nil
}

// respond asks a's model for req, then, while the model is unavailable,
// each of its fallback models in order (model_fallback). Each model asked
// is a chat span of its own; a response from a fallback model names it.
// stream shows the answer's text as it comes.
func (f *frame) respond(ctx context.Context, a *Agent, req *model.Request, stream bool) (*model.Response, error) {
	models := append([]string{a.ModelName}, a.ModelFallback...)
	var tried []string
	for i, name := range models {
		req.Model = name
		resp, err := f.respondWith(ctx, a, req, i > 0, stream)
		if err == nil {
			if i > 0 {
				resp.Model, resp.Fallbacks = name, tried
			}
			return resp, nil
		}
		last := i == len(models)-1
		if last || !model.IsUnavailable(err) || f.st.interrupted() || ctx.Err() != nil {
			if i > 0 && model.IsUnavailable(err) {
				return nil, fmt.Errorf("every model was unavailable (%s before it): %w", strings.Join(tried, "; "), err)
			}
			return nil, err
		}
		tried = append(tried, fmt.Sprintf("%s: %v", name, err))
		f.st.emit(Event{Type: EventRetry, Path: f.path, Agent: a.Name, Turn: f.turns + 1,
			Text: fmt.Sprintf("model %s unavailable, falling back to %s: %v", name, models[i+1], err)})
	}
	return nil, errors.New("no model to ask") // unreachable: models holds a.ModelName
}

// respondWith makes one model call of req, in a chat span.
func (f *frame) respondWith(ctx context.Context, a *Agent, req *model.Request, fallback, stream bool) (*model.Response, error) {
	cctx, span := f.startChat(ctx, a, req.Model, fallback)
	mctx, stop := f.st.untilInterrupt(cctx)
	defer stop()
	resp, err := a.Model.Respond(mctx, req, func(e model.Event) {
		switch e.Type {
		case model.EventTextDelta:
			if stream {
				f.st.emit(Event{Type: EventTextDelta, Path: f.path, Agent: a.Name, Text: e.Delta})
			}
		case model.EventHostedToolCall:
			if stream {
				f.st.emit(Event{Type: EventHostedToolCall, Path: f.path, Agent: a.Name, Name: e.Name, CallID: e.CallID, Text: preview(e.Delta)})
			}
		case model.EventRetry:
			f.st.emit(Event{Type: EventRetry, Path: f.path, Agent: a.Name, Turn: f.turns + 1, Text: RetryText(e.Delay, e.After)})
		}
	})
	chatResult(span, req.Model, resp)
	if err != nil && f.st.interrupted() {
		endSpan(span, ErrInterrupted)
	} else {
		endSpan(span, err)
	}
	return resp, err
}

// toolDefinitions lists the tools offered to a: its capability tools, its
// handoffs and its agent tools.
func toolDefinitions(a *Agent) []model.Tool {
	defs := make([]model.Tool, 0, len(a.Tools)+len(a.Handoffs)+len(a.AgentTools))
	for _, t := range a.Tools {
		defs = append(defs, t.Definition())
	}
	for _, h := range a.Handoffs {
		defs = append(defs, tools.HandoffTool(h.Agent, h.Description))
	}
	for _, at := range a.AgentTools {
		defs = append(defs, tools.AgentToolDefinition(at.Name, at.Description))
	}
	return defs
}

// callJob is one unanswered call of a response: to run, or to answer
// with text (a refusal, an error the model reads).
type callJob struct {
	call        model.Item
	isHandoff   bool
	ignoreExtra bool
	gate        gate
	text        string
}

// answerCalls executes the pending response's calls that have no recorded
// output, concurrently, checkpointing each result as it completes.
func (f *frame) answerCalls(ctx context.Context) error {
	a := f.st.r.Agents[f.agent]
	if a == nil {
		return fmt.Errorf("unknown agent %q", f.agent)
	}
	calls := f.pending.FunctionCalls()
	handoff := takenHandoff(a, calls)
	jobs, pending, err := f.gateCalls(ctx, a, calls)
	if err != nil {
		return err
	}
	// The budgets may let only some of the calls run: those run and are
	// checkpointed, and the run stops; the rest run when it resumes.
	allowed, budgetErr := f.st.toolAllowance(a, len(jobs))
	jobs = jobs[:allowed]
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for _, j := range jobs {
		wg.Go(func() {
			waiting, err := f.answer(ctx, a, j, &mu)
			mu.Lock()
			defer mu.Unlock()
			pending = append(pending, waiting...)
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	if budgetErr != nil {
		return budgetErr
	}
	if len(pending) > 0 {
		return &AwaitingApprovalError{Calls: pending}
	}
	if handoff != "" {
		f.st.emit(Event{Type: EventHandoff, Path: f.path, Agent: a.Name, Text: handoff})
		if err := f.handoffHooks(ctx, a.Name, handoff); err != nil {
			return err
		}
	}
	f.flush()
	return nil
}

// gateCalls decides each call of calls that has no recorded output: its
// arguments decoded strictly, its tool_input guardrails, its approval. It
// returns the calls to run or answer and those awaiting approval (each
// checkpointed).
func (f *frame) gateCalls(ctx context.Context, a *Agent, calls []model.Item) ([]callJob, []PendingCall, error) {
	var jobs []callJob
	var pending []PendingCall
	handoffSeen := false
	for _, c := range calls {
		isH := false
		for _, h := range a.Handoffs {
			if c.Name == tools.HandoffToolName(h.Agent) {
				isH = true
			}
		}
		j := callJob{call: c, isHandoff: isH}
		if isH {
			j.ignoreExtra = handoffSeen
			handoffSeen = true
		}
		if _, done := f.outputs[c.CallID]; done {
			continue
		}
		if err := f.withheldOutput(a, c); err != nil {
			return nil, nil, err
		}
		canon, err := tools.CanonicalArguments(c.Arguments)
		switch {
		case err != nil:
			// Arguments two readers could read differently never run.
			j.gate, j.text = gateError, "error: "+c.Name+": "+err.Error()
		case !isH:
			c.Arguments = canon
			j.call = c
			// A call its tool_input guardrails stop never runs, nor asks.
			if err := f.guard(ctx, a, GuardToolInput, Guarded{Text: canon, Tool: c.Name, Arguments: canon, Agent: a.Name}, c.CallID, false); err != nil {
				return nil, nil, err
			}
			j.gate, j.text = f.approval(ctx, a, c)
		}
		if j.gate == gatePending {
			pc := f.pendingCall(a, c)
			if err := f.st.checkpoint(ctx, Step{Kind: StepApproval, Path: f.path, Agent: a.Name, Approval: &pc}); err != nil {
				return nil, nil, err
			}
			pending = append(pending, pc)
			continue
		}
		jobs = append(jobs, j)
	}
	return jobs, pending, nil
}

// answer runs or answers one call, then checks its tool_output
// guardrails and checkpoints the result, which it records in f.outputs
// under mu. A nested agent-tool run that waits for approval returns the
// calls it waits on.
func (f *frame) answer(ctx context.Context, a *Agent, j callJob, mu *sync.Mutex) ([]PendingCall, error) {
	var (
		item      model.Item
		handoffTo string
		err       error
	)
	began := time.Now()
	if j.gate == gateRun {
		item, handoffTo, err = f.execute(ctx, a, j.call, j.isHandoff, j.ignoreExtra)
		if err == nil && !j.isHandoff {
			_, err = f.hook(ctx, HookEvent{Event: "tool_end", Agent: a.Name, Tool: j.call.Name, CallID: j.call.CallID, Output: item.Output}, j.call.CallID)
		}
	} else {
		item = f.refuse(a, j.call, j.text)
	}
	if calls, ok := IsAwaitingApproval(err); ok {
		return calls, nil
	}
	filter := handoffFilter(a, handoffTo)
	if err == nil && j.gate == gateRun && !j.isHandoff {
		// The model sees no output its tool_output guardrails stop.
		err = f.guard(ctx, a, GuardToolOutput, Guarded{Text: item.Output, Tool: j.call.Name, Arguments: j.call.Arguments, Agent: a.Name}, j.call.CallID, false)
	}
	if err == nil {
		err = f.st.checkpoint(ctx, Step{Kind: StepTool, Path: f.path, Agent: a.Name, Result: &item, Handoff: handoffTo, InputFilter: filter, Duration: time.Since(began)})
	}
	if err != nil {
		return nil, err
	}
	mu.Lock()
	defer mu.Unlock()
	f.outputs[item.CallID] = item
	if handoffTo != "" {
		f.filter = filter
	}
	return nil, nil
}

// execute runs one call. The returned error is fatal to the run (a model
// failure inside a nested run, a sandbox that failed under a tool, an
// interrupt, a cancelled context); tool failures become the call's output.
func (f *frame) execute(ctx context.Context, a *Agent, call model.Item, isHandoff, ignoreExtra bool) (_ model.Item, _ string, err error) {
	out := model.Item{Type: model.ItemFunctionCallOutput, CallID: call.CallID}
	ctx, span := f.startTool(ctx, a, call)
	defer func() { endSpan(span, err) }()
	var exitCode *int
	handoff := ""
	f.st.emit(Event{Type: EventToolCall, Path: f.path, Agent: a.Name, Name: call.Name, CallID: call.CallID, Arguments: call.Arguments})
	result := func(text string, isErr bool) {
		out.Output = text
		toolResult(span, text, exitCode, isErr, handoff)
		f.st.emit(Event{Type: EventToolResult, Path: f.path, Agent: a.Name, Name: call.Name, CallID: call.CallID, Text: preview(resultPreview(text, out.Images)), IsError: isErr})
	}
	if isHandoff {
		if ignoreExtra {
			result("Multiple handoffs detected, ignoring this one.", true)
			return out, "", nil
		}
		handoff = takenHandoff(a, []model.Item{call})
		if fl := handoffFilter(a, handoff); fl != nil && span.IsRecording() {
			span.SetAttributes(attrInputFilter.String(fl.String()))
		}
		result(tools.HandoffOutput(handoff), false)
		return out, handoff, nil
	}
	if blocked, text, err := f.toolStart(ctx, a, call); err != nil {
		return out, "", err
	} else if blocked {
		result(text, true)
		return out, "", nil
	}
	for _, at := range a.AgentTools {
		if tools.FunctionName(at.Name) != call.Name {
			continue
		}
		text, err := f.runAgentTool(ctx, a, at, call)
		if err != nil {
			if isFatal(err) {
				return out, "", err
			}
			result(fmt.Sprintf("error: agent tool %s failed: %v", at.Name, err), true)
			return out, "", nil
		}
		result(text, false)
		return out, "", nil
	}
	for _, t := range a.Tools {
		if t.Definition().Name != call.Name {
			continue
		}
		o, err := t.Call(ctx, call.Arguments)
		if err != nil {
			if ctx.Err() != nil {
				return out, "", ctx.Err()
			}
			if ue, ok := errors.AsType[*sandbox.UnavailableError](err); ok {
				// Not the tool's failure: the model must not see it and
				// the call must not be recorded, so the run stops here and
				// its next attempt executes the call again.
				return out, "", fmt.Errorf("%s %s during the run: %w; the call was not recorded and runs again when the run resumes", ue.Name(), ue.What(), err)
			}
			result("error: "+err.Error(), true)
			return out, "", nil
		}
		out.Images = o.Images
		exitCode = o.ExitCode
		result(o.Text, false)
		return out, "", nil
	}
	names := make([]string, 0)
	for _, d := range toolDefinitions(a) {
		names = append(names, d.Name)
	}
	result(fmt.Sprintf("error: unknown tool %q; the tools available to agent %q are: %s", call.Name, a.Name, strings.Join(names, ", ")), true)
	return out, "", nil
}

// resultPreview is what a tool result event shows: the text, and a line
// for each image (view_image returns an image and no text).
func resultPreview(text string, images []model.Image) string {
	parts := []string{}
	if text != "" {
		parts = append(parts, text)
	}
	for _, im := range images {
		parts = append(parts, fmt.Sprintf("[image %s, %d bytes]", im.MediaType, len(im.Data)))
	}
	return strings.Join(parts, "\n")
}

// refuse answers a call that does not run: rejected by the reviewer, or
// whose approval policy failed.
func (f *frame) refuse(a *Agent, call model.Item, text string) model.Item {
	f.st.emit(Event{Type: EventToolCall, Path: f.path, Agent: a.Name, Name: call.Name, CallID: call.CallID, Arguments: call.Arguments})
	f.st.emit(Event{Type: EventToolResult, Path: f.path, Agent: a.Name, Name: call.Name, CallID: call.CallID, Text: preview(text), IsError: true})
	return model.Item{Type: model.ItemFunctionCallOutput, CallID: call.CallID, Output: text}
}

// modelError marks a model failure inside a nested run, so it fails the
// whole run (resumably) rather than becoming tool output.
type modelError struct{ err error }

func (e *modelError) Error() string { return e.err.Error() }
func (e *modelError) Unwrap() error { return e.err }

func isFatal(err error) bool {
	var me *modelError
	var ue *sandbox.UnavailableError
	var aw *AwaitingApprovalError
	return errors.As(err, &me) || errors.As(err, &ue) || errors.As(err, &aw) || isGuardrailStop(err) || errors.Is(err, ErrInterrupted) || errors.Is(err, ErrBudget) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// runAgentTool runs at.Agent as a nested run on the call's input and
// returns its final output as text (JSON for structured output).
func (f *frame) runAgentTool(ctx context.Context, parent *Agent, at AgentTool, call model.Item) (string, error) {
	input, err := tools.AgentToolInput(call.Arguments)
	if err != nil {
		return "", err
	}
	sub := f.st.r.Agents[at.Agent]
	if sub == nil {
		return "", fmt.Errorf("unknown agent %q", at.Agent)
	}
	maxTurns := sub.MaxTurns
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}
	path := call.CallID
	if f.path != "" {
		path = f.path + "/" + call.CallID
	}
	f.st.emit(Event{Type: EventAgentToolCall, Path: f.path, Agent: parent.Name, Name: at.Name, CallID: call.CallID, Text: at.Agent})
	nested := &frame{st: f.st, path: path, agent: at.Agent, input: input, maxTurns: maxTurns}
	out, err := nested.run(ctx)
	if err != nil {
		return "", err
	}
	f.st.emit(Event{Type: EventAgentToolDone, Path: f.path, Agent: parent.Name, Name: at.Name, CallID: call.CallID, Text: preview(string(out))})
	var s string
	if json.Unmarshal(out, &s) == nil {
		return s, nil
	}
	return string(out), nil
}

// final ends the frame with the pending response's answer, validated
// against the agent's output schema.
func (f *frame) final(ctx context.Context) (json.RawMessage, error) {
	a := f.st.r.Agents[f.agent]
	text := f.pending.Text()
	if a != nil && len(a.OutputSchema) > 0 {
		v, err := validateOutput(a.OutputSchema, text)
		if err != nil {
			return nil, fmt.Errorf("agent %q: final output does not match its output_schema: %w", a.Name, err)
		}
		if err := f.outputGuards(ctx, a, string(v)); err != nil {
			return nil, err
		}
		f.st.emit(Event{Type: EventFinal, Path: f.path, Agent: f.agent, Text: preview(string(v))})
		return v, nil
	}
	if err := f.outputGuards(ctx, a, text); err != nil {
		return nil, err
	}
	f.st.emit(Event{Type: EventFinal, Path: f.path, Agent: f.agent, Text: preview(text)})
	b, err := json.Marshal(text)
	return b, err
}
