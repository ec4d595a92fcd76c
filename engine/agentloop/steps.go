// Package agentloop is the agent turn loop: it runs one agent, and the
// agents it hands off to or calls as tools, against a model, executing
// tool calls through the sandbox tools and handing every step to a
// checkpoint callback before the next begins.
package agentloop

import (
	"time"

	"github.com/agentctl/agentctl/model"
)

// StepKind names a checkpointed step.
type StepKind string

const (
	// StepInput is the run's (or a nested agent-tool run's) input message.
	StepInput StepKind = "input"
	// StepModel is one model response.
	StepModel StepKind = "model"
	// StepTool is one tool result (a function_call_output).
	StepTool StepKind = "tool"
	// StepApproval records a call deferred for a reviewer's decision
	// (the run then ends awaiting approval). Replay ignores it: the
	// decisions come from the state (Runner.Decisions).
	StepApproval StepKind = "approval"
	// StepCompaction is a client-side compaction: older items of the
	// conversation replaced by a summary the model wrote (Compacted).
	StepCompaction StepKind = "compaction"
)

// Step is one checkpointed unit of progress. Steps are JSON-serializable;
// the list of steps of a run is everything needed to resume it.
type Step struct {
	Kind StepKind `json:"kind"`
	// Path identifies the (possibly nested) conversation the step belongs
	// to: "" for the run itself, "CALLID" for an agent-tool run started by
	// that call, "CALLID/CALLID2" deeper.
	Path  string `json:"path,omitempty"`
	Agent string `json:"agent"`
	// Input is the input text (StepInput).
	Input string `json:"input,omitempty"`
	// Prior are the items the conversation starts from, before Input
	// (StepInput of a run that continues another run's transcript).
	Prior []model.Item `json:"prior,omitempty"`
	// Response is the model's response (StepModel).
	Response *model.Response `json:"response,omitempty"`
	// Result is the function_call_output item (StepTool).
	Result *model.Item `json:"result,omitempty"`
	// Handoff names the agent the conversation moved to (StepTool of a
	// transfer_to_ call that was taken).
	Handoff string `json:"handoff,omitempty"`
	// InputFilter is the input filter of the handoff taken (Handoff),
	// applied to the conversation the agent handed to is given; nil for
	// none.
	InputFilter *InputFilter `json:"input_filter,omitempty"`
	// Approval is the deferred call (StepApproval).
	Approval *PendingCall `json:"approval,omitempty"`
	// Compacted says which items a compaction replaced (StepCompaction);
	// Response is the summarizing call's response.
	Compacted *Compacted `json:"compacted,omitempty"`
	// Hook records that an event's hooks ran (StepHook).
	Hook *HookRecord `json:"hook,omitempty"`
	// Guardrail is a guardrail's verdict (StepGuardrail).
	Guardrail *GuardrailVerdict `json:"guardrail,omitempty"`
	// Elapsed is the run's running time when the step was checkpointed,
	// summed over its attempts (max_duration; absent in journals written
	// before budgets existed).
	Elapsed time.Duration `json:"elapsed_ns,omitempty"`
	// Duration is how long the step's model call or tool call took
	// (StepModel, StepCompaction, StepTool).
	Duration time.Duration `json:"duration_ns,omitempty"`
}

// Compacted is what a client-side compaction did to a conversation of
// Items items: the items after the first Head and before the last Tail
// were replaced by one user message carrying Summary.
type Compacted struct {
	Items   int    `json:"items"`
	Head    int    `json:"head"`
	Tail    int    `json:"tail"`
	Summary string `json:"summary"`
}

// Transcript is the conversation of a run's steps, as the model would see
// it next: its top-level steps' items in order (the prior items and the
// input message, then each model response's output items followed by
// their calls' outputs in call order), as the Agents SDK's
// result.to_input_list() gives them. Nested agent-tool runs are not part
// of it; their results are, as the outputs of the calls that started
// them.
func Transcript(steps []Step) ([]model.Item, error) {
	f := &frame{st: &runState{r: &Runner{}}}
	for _, s := range steps {
		if s.Path != "" {
			continue
		}
		if err := f.replay(s); err != nil {
			return nil, err
		}
	}
	f.flush()
	return f.conv, nil
}
