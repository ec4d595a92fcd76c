package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/state"
)

// A run's journal holds its checkpointed steps while it is in progress and
// its transcript once it has ended; the state records how many steps it
// held when the run's record was last written (state.Run.Steps). A journal
// that is missing, unreadable or shorter than that has lost work, which is
// reported as a *JournalLostError and never papered over by starting the
// run again from turn 0 (docs/engine.md, "Checkpoints and resume").

// JournalLostError reports a run whose journal is missing, cannot be read,
// or holds fewer steps than the state recorded.
type JournalLostError struct {
	// Run is the run's address; Status its status in the state.
	Run    string
	Status string
	// Path says where the journal is kept (state.Store.Locate): its
	// absolute path in the local store.
	Path string
	// Steps and Turns are the checkpointed steps and model turns the
	// state recorded for the run.
	Steps, Turns int
	// Found is the number of readable steps when the journal is shorter
	// than recorded (Err is nil then).
	Found int
	// Err is why the journal cannot be read (fs.ErrNotExist when it is
	// missing, a *state.JournalError when it is corrupt).
	Err error
}

func (e *JournalLostError) Unwrap() error { return e.Err }

func (e *JournalLostError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: its journal %s %s", e.Run, e.Path, e.Problem())
	progress := fmt.Sprintf("%d %s, %d model %s", e.Steps, plural(e.Steps, "step", "steps"), e.Turns, plural(e.Turns, "turn", "turns"))
	if e.Status == RunRunning {
		// The state is written when a run starts and ends, not per step:
		// a run whose apply died may have checkpointed more.
		if e.Steps == 0 {
			progress = "every step checkpointed since its last apply started it"
		} else {
			progress = "at least " + progress + ", as recorded when its last apply started it"
		}
	}
	if e.Status == RunCompleted {
		fmt.Fprintf(&b, ". It held the run's transcript (%s), which is lost. The run's output, usage and provenance are still in the state (agentctl state show %s); to record a new transcript, run it again with agentctl apply -replace=%s",
			progress, e.Run, e.Run)
		return b.String()
	}
	fmt.Fprintf(&b, ". It held the run's checkpointed progress (%s), which is lost, so the %s run cannot be resumed. agentctl does not start it over silently: to start it over from turn 0, apply with -replace=%s (its model turns and tool calls are made again); to resume it instead, put its journal back first",
		progress, e.Status, e.Run)
	return b.String()
}

// Problem says what is wrong with the journal file: "is missing", "is
// corrupt: ...", "holds only N of them: ...".
func (e *JournalLostError) Problem() string {
	var je *state.JournalError
	switch {
	case e.Err == nil:
		return fmt.Sprintf("holds only %d of them: it was truncated or replaced", e.Found)
	case errors.Is(e.Err, fs.ErrNotExist):
		return "is missing"
	case errors.As(e.Err, &je):
		where := "its header"
		if je.Record > 0 {
			where = fmt.Sprintf("record %d", je.Record)
		}
		return fmt.Sprintf("is corrupt: %s, at byte offset %d, is damaged (%s) and further records follow it, so this is not a write cut short by a crash", where, je.Offset, je.Reason)
	default:
		return fmt.Sprintf("cannot be read (%v)", e.Err)
	}
}

// Steps are the checkpointed steps of a run, or of a turn of a Session
// described as one (its journal, the steps the state recorded, its
// status), as its journal holds them: checked against what the state
// recorded (a missing, unreadable or short journal is a
// *JournalLostError), not scrubbed again (Transcript is).
func (e *Engine) Steps(ctx context.Context, r *state.Run) ([]agentloop.Step, error) {
	return e.readJournal(ctx, r)
}

// readJournal reads the checkpointed steps of a run: its journal, checked
// against what the state recorded. A journal written by a newer agentctl
// is refused as such; a missing, unreadable or short one is a
// *JournalLostError.
func (e *Engine) readJournal(ctx context.Context, r *state.Run) ([]agentloop.Step, error) {
	if r == nil || (r.Journal == "" && r.Steps == 0) {
		return nil, nil
	}
	rel := r.JournalFile()
	path := e.State.Locate(rel)
	lost := &JournalLostError{Run: r.Address, Status: r.Status, Path: path, Steps: r.Steps, Turns: r.Turns}
	var steps []agentloop.Step
	_, err := e.State.ReadJournal(ctx, rel, func(raw json.RawMessage) error {
		var s agentloop.Step
		if err := json.Unmarshal(raw, &s); err != nil {
			return fmt.Errorf("not a step: %w", err)
		}
		steps = append(steps, s)
		return nil
	})
	var nf *state.NewerFormatError
	switch {
	case errors.As(err, &nf):
		return nil, fmt.Errorf("%s: %w", r.Address, err)
	case err != nil:
		lost.Err = err
		return nil, lost
	case len(steps) < r.Steps:
		lost.Found = len(steps)
		return nil, lost
	}
	return steps, nil
}

// Transcript returns the recorded steps of a run, or a *JournalLostError
// saying what was lost.
//
// The steps are scrubbed again with the configuration's sensitive values
// (journals are written scrubbed; this also covers journals written by
// an earlier agentctl or before a value was marked sensitive).
func (e *Engine) Transcript(ctx context.Context, r *state.Run) ([]agentloop.Step, error) {
	steps, err := e.readJournal(ctx, r)
	if err != nil {
		return nil, err
	}
	sc := e.scrubber()
	for i := range steps {
		steps[i] = scrubStep(sc, steps[i])
	}
	return steps, nil
}

// resumeReasons checks the journal of every run the plan resumes and
// gives each its reason ("interrupted at turn 7"). A run whose
// checkpointed progress is lost stops the plan: resuming it would start
// it over silently. The errors name every such run.
func (e *Engine) resumeReasons(ctx context.Context, st *state.State, p *Plan) error {
	var errs []error
	for _, c := range p.Changes {
		if c.Kind != KindRun || c.Action != ActionResume {
			continue
		}
		prev := st.Runs[c.Address]
		steps, err := e.readJournal(ctx, prev)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		turns, _ := agentloop.Replay(steps)
		switch prev.Status {
		case RunFailed:
			c.Reasons = []string{fmt.Sprintf("failed at turn %d: %s", turns, prev.Error)}
			if ri := e.Config.RunInstances[c.Address]; ri != nil {
				c.Reasons = append(c.Reasons, budgetReasons(e.Config, ri, prev, steps)...)
			}
		case RunGuardrailTripped:
			c.Reasons = []string{fmt.Sprintf("stopped by a guardrail at turn %d: %s; its guardrails are checked again", turns, prev.Error)}
		case RunAwaiting:
			ap, rej, pend := prev.ApprovalCounts()
			c.Reasons = []string{fmt.Sprintf("awaiting approval at turn %d: %d approved, %d rejected, %d pending", turns, ap, rej, pend)}
		default:
			c.Reasons = []string{fmt.Sprintf("interrupted at turn %d", turns)}
		}
	}
	return errors.Join(errs...)
}

// forgetRun removes a run's record from the state and then its journal
// (its transcript), so that no journal outlives its record; a crash in
// between leaves only an unreferenced journal, which the run's next
// execution replaces.
func (a *applier) forgetRun(ctx context.Context, addr string) error {
	journal := state.JournalName(addr)
	if err := a.update(ctx, func(st *state.State) {
		if r := st.Runs[addr]; r != nil {
			journal = r.JournalFile()
		}
		delete(st.Runs, addr)
	}, state.RunRef(addr)); err != nil {
		return err
	}
	if err := a.e.State.RemoveJournal(context.WithoutCancel(ctx), journal); err != nil {
		return fmt.Errorf("%s: removed from the state, but its journal was not: %w", addr, err)
	}
	return nil
}
