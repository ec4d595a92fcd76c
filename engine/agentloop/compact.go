package agentloop

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentctl/agentctl/model"
)

// keepTurns is how many of the latest model turns (with their tool
// outputs) a client-side compaction keeps as they are.
const keepTurns = 2

// maxRenderedOutput bounds one tool output in the transcript the
// summarizer reads.
const maxRenderedOutput = 4000

// SummaryPrefix starts the user message that carries a compaction's
// summary.
const SummaryPrefix = "Summary of the earlier part of this conversation (older turns were compacted to save context):\n\n"

const compactInstructions = `You compact the history of an agent's work so it can go on with less context.
Write a summary the agent can continue from without the original messages:
- the task as the user gave it, and any constraints or preferences stated;
- what has been done so far: commands run, files read or changed, results and numbers that matter (keep exact paths, names, values and error messages);
- what was learned, including approaches that failed and why;
- what remains to be done, and the next step.
Be concise and factual. Write plain text; do not call tools.`

// maybeCompact compacts the conversation client-side before a model call
// when the agent asks for compaction, its model does not compact
// server-side, and the last response reported a context at or above the
// threshold: the items between the conversation's start (its prior items
// and input) and the last keepTurns turns are replaced by a summary the
// model writes. The summary call is checkpointed as a compaction step, so
// a resume replays it instead of calling the model again.
func (f *frame) maybeCompact(ctx context.Context, a *Agent) error {
	if a.Compaction == nil || model.CompactsServerSide(a.Model) {
		return nil
	}
	threshold := a.Compaction.Threshold
	if threshold <= 0 {
		threshold = model.DefaultCompactThreshold
	}
	if f.lastTokens < threshold || len(f.turnStarts) <= keepTurns {
		return nil
	}
	head := f.turnStarts[0]
	if head > 0 && isSummary(f.conv[head-1]) {
		// An earlier summary is summarized again with what followed it.
		head--
	}
	cut := f.turnStarts[len(f.turnStarts)-keepTurns]
	if cut <= head {
		return nil
	}
	req := &model.Request{
		Agent:        a.Name,
		AgentTurn:    f.st.nextAgentTurn(a.Name),
		Model:        a.ModelName,
		Instructions: compactInstructions,
		Input: []model.Item{{Type: model.ItemMessage, Role: "user", Text: "Summarize this conversation so far:\n\n" +
			renderTranscript(f.conv[:cut])}},
		Settings: model.Settings{MaxOutputTokens: a.Settings.MaxOutputTokens},
	}
	f.st.emit(Event{Type: EventCompaction, Path: f.path, Agent: a.Name, Turn: f.turns + 1, Text: fmt.Sprintf("context at %d tokens (threshold %d): summarizing %d older items", f.lastTokens, threshold, cut-head)})
	began := time.Now()
	resp, err := f.respond(ctx, a, req, false)
	took := time.Since(began)
	if err != nil {
		if f.st.interrupted() {
			return fmt.Errorf("agent %q, compacting before turn %d: %w: the summary call was abandoned and is made again on resume", a.Name, f.turns+1, ErrInterrupted)
		}
		return &modelError{fmt.Errorf("agent %q, compacting before turn %d: model call failed: %w", a.Name, f.turns+1, err)}
	}
	summary := strings.TrimSpace(resp.Text())
	if summary == "" {
		return &modelError{fmt.Errorf("agent %q, compacting before turn %d: the model returned an empty summary", a.Name, f.turns+1)}
	}
	c := &Compacted{Items: len(f.conv), Head: head, Tail: len(f.conv) - cut, Summary: summary}
	if err := f.st.checkpoint(ctx, Step{Kind: StepCompaction, Path: f.path, Agent: a.Name, Response: resp, Compacted: c, Duration: took}); err != nil {
		return err
	}
	return f.applyCompaction(c)
}

// applyCompaction replaces the compacted items with the summary.
func (f *frame) applyCompaction(c *Compacted) error {
	if c.Items != len(f.conv) || c.Head < 0 || c.Tail < 0 || c.Head+c.Tail > c.Items {
		return fmt.Errorf("journal: a compaction of %d items does not fit the conversation of %d items", c.Items, len(f.conv))
	}
	tail := f.conv[len(f.conv)-c.Tail:]
	conv := make([]model.Item, 0, c.Head+1+c.Tail)
	conv = append(conv, f.conv[:c.Head]...)
	conv = append(conv, model.Item{Type: model.ItemMessage, Role: "user", Text: SummaryPrefix + c.Summary})
	conv = append(conv, tail...)
	shift := c.Items - c.Tail - (c.Head + 1)
	var starts []int
	for _, s := range f.turnStarts {
		if s >= c.Items-c.Tail {
			starts = append(starts, s-shift)
		}
	}
	f.conv, f.turnStarts, f.lastTokens = conv, starts, 0
	return nil
}

// renderTranscript renders items as text for the summarizer.
func renderTranscript(items []model.Item) string {
	var b strings.Builder
	for _, it := range items {
		switch it.Type {
		case model.ItemMessage:
			fmt.Fprintf(&b, "[%s] %s\n\n", it.Role, it.Text)
		case model.ItemFunctionCall:
			fmt.Fprintf(&b, "[tool call %s] %s %s\n\n", it.CallID, it.Name, it.Arguments)
		case model.ItemHostedToolCall:
			fmt.Fprintf(&b, "[hosted tool call %s] %s\n\n", it.CallID, it.Text)
		case model.ItemFunctionCallOutput:
			out := it.Output
			if len(out) > maxRenderedOutput {
				out = out[:maxRenderedOutput/2] + "\n…\n" + out[len(out)-maxRenderedOutput/2:]
			}
			if len(it.Images) > 0 {
				out += fmt.Sprintf("\n(%d image(s))", len(it.Images))
			}
			fmt.Fprintf(&b, "[tool output %s] %s\n\n", it.CallID, out)
		}
	}
	return b.String()
}

func isSummary(it model.Item) bool {
	return it.Type == model.ItemMessage && it.Role == "user" && strings.HasPrefix(it.Text, SummaryPrefix)
}
