package agentloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// What a guardrail checks (Guardrail.On).
const (
	GuardInput      = "input"
	GuardOutput     = "output"
	GuardToolInput  = "tool_input"
	GuardToolOutput = "tool_output"
)

// StepGuardrail records a guardrail's verdict (Step.Guardrail), so that a
// resumed run does not check again what a guardrail already let through.
const StepGuardrail StepKind = "guardrail"

// Guardrail is one guardrail as the turn loop sees it: input and output
// guardrails check the run's own conversation (its input before the
// first model call, its final output), tool guardrails every call of the
// agents they are on (its arguments before it runs, its output before
// the model sees it).
type Guardrail struct {
	Name string
	On   string
	// Check is an expression guardrail's condition: true lets g through.
	// Nil for an agent guardrail.
	Check func(g Guarded) (bool, error)
	// Judge is the agent that judges an agent guardrail: it is given the
	// guarded text and answers {tripwire, reason}.
	Judge string
	// Parallel runs an input agent guardrail beside the first model call.
	Parallel bool
	// Message is what a tripped guardrail says; "" for the judge's reason.
	Message string
	// Location is where the guardrail is declared (file:line).
	Location string
}

// Guarded is what a guardrail checks.
type Guarded struct {
	// Text is the run's input, its final output (JSON for structured
	// output), a call's JSON arguments or a tool's output.
	Text string
	// Tool and Arguments are the call's (tool guardrails).
	Tool, Arguments string
	// Agent is the agent whose input, output or call it is.
	Agent string
}

// GuardrailVerdict is a guardrail's checkpointed verdict.
type GuardrailVerdict struct {
	Name string `json:"name"`
	On   string `json:"on"`
	// CallID is the guarded call's (tool guardrails).
	CallID  string `json:"call_id,omitempty"`
	Tripped bool   `json:"tripped"`
	Message string `json:"message,omitempty"`
}

// GuardrailTrippedError ends a run stopped by a guardrail.
type GuardrailTrippedError struct {
	Verdict GuardrailVerdict
	// Agent and Tool are whose input, output or call tripped it.
	Agent, Tool string
}

func (e *GuardrailTrippedError) Error() string {
	what := map[string]string{GuardInput: "the run's input", GuardOutput: "the run's output",
		GuardToolInput: "the arguments of a call of " + e.Tool, GuardToolOutput: "the output of a call of " + e.Tool}[e.Verdict.On]
	return fmt.Sprintf("guardrail %q tripped on %s (agent %q): %s", e.Verdict.Name, what, e.Agent, e.Verdict.Message)
}

// IsGuardrailTripped reports whether err ends a run stopped by a
// guardrail, and its verdict.
func IsGuardrailTripped(err error) (*GuardrailTrippedError, bool) {
	return errors.AsType[*GuardrailTrippedError](err)
}

// GuardrailError is a guardrail that could not decide (its condition
// failed to evaluate, its judge's answer was not what it must be). It
// fails closed: the run stops and nothing it guards goes through.
type GuardrailError struct {
	Name, Location string
	Err            error
}

func (e *GuardrailError) Error() string {
	return fmt.Sprintf("guardrail %q (%s) could not decide, so nothing it guards went through: %v", e.Name, e.Location, e.Err)
}

func (e *GuardrailError) Unwrap() error { return e.Err }

func isGuardrailStop(err error) bool {
	return errors.As(err, new(*GuardrailTrippedError)) || errors.As(err, new(*GuardrailError))
}

// guardrailsFor lists the guardrails of kind on that apply to agent a:
// the run's, then the agent's.
func (st *runState) guardrailsFor(a *Agent, on string) []Guardrail {
	var out []Guardrail
	for _, g := range st.r.Guardrails {
		if g.On == on {
			out = append(out, g)
		}
	}
	if a != nil {
		for _, g := range a.Guardrails {
			if g.On == on {
				out = append(out, g)
			}
		}
	}
	return out
}

func verdictKey(path string, v GuardrailVerdict) string {
	return path + "\x00" + v.Name + "\x00" + v.On + "\x00" + v.CallID
}

// passedBefore reports a verdict checkpointed as passed by an earlier
// attempt (or earlier in this one).
func (st *runState) passedBefore(key string) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.passed[key]
}

// guard checks g with the guardrails of kind on that apply to a, in
// order, each that has not passed before: a pass is checkpointed, a trip
// is checkpointed and ends the run (*GuardrailTrippedError), a guardrail
// that cannot decide ends it (*GuardrailError). For input guardrails,
// parallel picks the parallel ones or the others.
func (f *frame) guard(ctx context.Context, a *Agent, on string, g Guarded, callID string, parallel bool) error {
	for _, gr := range f.st.guardrailsFor(a, on) {
		if on == GuardInput && gr.Parallel != parallel {
			continue
		}
		v := GuardrailVerdict{Name: gr.Name, On: on, CallID: callID}
		key := verdictKey(f.path, v)
		if f.st.passedBefore(key) {
			continue
		}
		tripped, msg, err := f.check(ctx, gr, g, callID)
		if err != nil {
			return err
		}
		v.Tripped, v.Message = tripped, msg
		if err := f.st.checkpoint(ctx, Step{Kind: StepGuardrail, Path: f.path, Agent: g.Agent, Guardrail: &v}); err != nil {
			return err
		}
		if tripped {
			f.st.emit(Event{Type: EventGuardrail, Path: f.path, Agent: g.Agent, Name: gr.Name, CallID: callID, Text: msg, IsError: true})
			return &GuardrailTrippedError{Verdict: v, Agent: g.Agent, Tool: g.Tool}
		}
		f.st.mu.Lock()
		f.st.passed[key] = true
		f.st.mu.Unlock()
	}
	return nil
}

// check asks one guardrail for its verdict, in a span of its own.
func (f *frame) check(ctx context.Context, gr Guardrail, g Guarded, callID string) (tripped bool, msg string, err error) {
	ctx, span := f.st.r.tracer().Start(ctx, "guardrail "+gr.Name, trace.WithAttributes(
		attrGuardrail.String(gr.Name), attrGuardrailOn.String(gr.On), attrPath.String(f.path)))
	defer func() {
		if span.IsRecording() && err == nil {
			verdict := "passed"
			if tripped {
				verdict = "tripped"
			}
			span.SetAttributes(attrGuardrailVerdict.String(verdict))
		}
		endSpan(span, err)
	}()
	if gr.Check != nil {
		pass, err := gr.Check(g)
		if err != nil {
			return false, "", &GuardrailError{Name: gr.Name, Location: gr.Location, Err: err}
		}
		return !pass, gr.Message, nil
	}
	return f.judge(ctx, gr, g, callID)
}

// judge runs an agent guardrail's judge on the guarded text, as a nested
// conversation of its own (checkpointed, counted in the run's usage and
// budgets like any other), and reads its {tripwire, reason} answer.
func (f *frame) judge(ctx context.Context, gr Guardrail, g Guarded, callID string) (bool, string, error) {
	j := f.st.r.Agents[gr.Judge]
	if j == nil {
		return false, "", &GuardrailError{Name: gr.Name, Location: gr.Location, Err: fmt.Errorf("its agent %q is not part of the run", gr.Judge)}
	}
	path := "guardrail." + gr.Name + "." + gr.On
	if f.path != "" {
		path = f.path + "/" + path
	}
	if callID != "" {
		path += "." + callID
	}
	maxTurns := j.MaxTurns
	if maxTurns <= 0 {
		maxTurns = DefaultMaxTurns
	}
	nested := &frame{st: f.st, path: path, agent: gr.Judge, input: g.Text, maxTurns: maxTurns}
	out, err := nested.run(ctx)
	if err != nil {
		if isFatal(err) {
			return false, "", err
		}
		return false, "", &GuardrailError{Name: gr.Name, Location: gr.Location, Err: fmt.Errorf("its agent %q: %w", gr.Judge, err)}
	}
	var v struct {
		Tripwire *bool   `json:"tripwire"`
		Reason   *string `json:"reason"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.Tripwire == nil || v.Reason == nil {
		return false, "", &GuardrailError{Name: gr.Name, Location: gr.Location, Err: fmt.Errorf("its agent %q answered %s, not an object with a boolean tripwire and a string reason", gr.Judge, preview(string(out)))}
	}
	msg := gr.Message
	if msg == "" {
		msg = *v.Reason
	} else if *v.Reason != "" {
		msg += ": " + *v.Reason
	}
	return *v.Tripwire, msg, nil
}

// inputGuards checks the run's input before its first model call. The
// parallel input guardrails start beside that call when the run has made
// none yet; the returned wait (nil when none started) gives their
// outcome and must be called before the call's tool calls run.
func (f *frame) inputGuards(ctx context.Context) (wait func() error, err error) {
	a := f.st.r.Agents[f.agent]
	g := Guarded{Text: f.input, Agent: f.agent}
	if err := f.guard(ctx, a, GuardInput, g, "", false); err != nil {
		return nil, err
	}
	if f.turns > 0 || f.pending != nil {
		// Resumed past the first model call: nothing left to run beside.
		return nil, f.guard(ctx, a, GuardInput, g, "", true)
	}
	parallel := false
	for _, gr := range f.st.guardrailsFor(a, GuardInput) {
		parallel = parallel || gr.Parallel
	}
	if !parallel {
		return nil, nil
	}
	done := make(chan error, 1)
	go func() { done <- f.guard(ctx, a, GuardInput, g, "", true) }()
	return sync1(done), nil
}

// sync1 waits once for done and then returns the same result.
func sync1(done <-chan error) func() error {
	var err error
	waited := false
	return func() error {
		if !waited {
			err, waited = <-done, true
		}
		return err
	}
}

// Span attributes of a guardrail's span.
var (
	attrGuardrail        = attribute.Key("agentctl.guardrail.name")
	attrGuardrailOn      = attribute.Key("agentctl.guardrail.on")
	attrGuardrailVerdict = attribute.Key("agentctl.guardrail.verdict")
)

// outputGuards checks the run's final output (text, or the structured
// output's JSON) with the output guardrails of the final agent a.
func (f *frame) outputGuards(ctx context.Context, a *Agent, text string) error {
	if f.path != "" {
		return nil
	}
	return f.guard(ctx, a, GuardOutput, Guarded{Text: text, Agent: f.agent}, "", false)
}
