package agentloop_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/internal/fakeopenai"
	"github.com/agentctl/agentctl/model"
)

// TestClientSideCompactionChatCompletions: Chat Completions has no
// server-side compaction, so once a response reports a context past the
// threshold the loop summarizes the older turns with the model, sends the
// summary instead of them, keeps the latest turns (calls with their
// outputs), checkpoints the summary and replays it on resume.
func TestClientSideCompactionChatCompletions(t *testing.T) {
	// Turn n reports a context of 100*n tokens until the conversation is
	// compacted; the threshold is 250, so the loop compacts before turn 4
	// (after turn 3 reported 300), once.
	isSummaryRequest := func(r fakeopenai.Request) bool {
		return strings.Contains(instructions(r), "You compact the history")
	}
	turn := 0
	srv := fakeopenai.New(t, fakeopenai.WithHandler(func(r fakeopenai.Request) fakeopenai.Reply {
		if isSummaryRequest(r) {
			return fakeopenai.Reply{Text: "The user wants the sum of 1..5; steps 1-2 gave 1 and 3.", Usage: fakeopenai.Usage{InputTokens: 300, OutputTokens: 20}}
		}
		turn++
		u := fakeopenai.Usage{InputTokens: int64(100 * turn), OutputTokens: 5}
		if strings.Contains(fmt.Sprint(r.Input()), "Summary of the earlier part") {
			u.InputTokens = 100 // the compacted context is small again
		}
		if turn <= 4 {
			return fakeopenai.Reply{Calls: []fakeopenai.Call{fakeopenai.FunctionCall(fmt.Sprintf("c%d", turn), "add", fmt.Sprintf(`{"n":%d}`, turn))}, Usage: u}
		}
		return fakeopenai.Reply{Text: "15", Usage: u}
	}))
	add := goTool{name: "add", fn: func(ctx context.Context, args string) (string, error) { return "added " + args, nil }}
	agent := &agentloop.Agent{Name: "summer", Model: newClient(t, srv, "chat_completions"), ModelName: "gpt-test",
		Instructions: "Add the numbers.", Tools: []tools.Tool{add}, Compaction: &model.Compaction{Threshold: 250}}
	rec := &steps{}
	r := &agentloop.Runner{Agents: map[string]*agentloop.Agent{"summer": agent}, Checkpoint: rec.add}
	res, err := r.Run(context.Background(), "summer", "Sum 1 to 5 with the add tool.", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := finalText(t, res); got != "15" {
		t.Fatalf("final %q", got)
	}
	assertValid(t, srv)
	reqs := srv.Requests()
	var summaries, afterSummary []fakeopenai.Request
	for _, q := range reqs {
		if isSummaryRequest(q) {
			summaries = append(summaries, q)
		} else if len(summaries) > 0 {
			afterSummary = append(afterSummary, q)
		}
	}
	if len(summaries) != 1 {
		t.Fatalf("%d summary requests, want 1", len(summaries))
	}
	// The summarizer read the old turns.
	if in := fmt.Sprint(summaries[0].Input()); !strings.Contains(in, `added {\"n\":1}`) && !strings.Contains(in, `added {"n":1}`) {
		t.Errorf("the summary request lacks the old tool output: %s", in)
	}
	// The next request carries the task, the summary and the last two
	// turns (each call with its output), not the first turn.
	next := fmt.Sprint(afterSummary[0].Input())
	for _, want := range []string{"Sum 1 to 5", "Summary of the earlier part", "steps 1-2 gave 1 and 3", "c2", "c3"} {
		if !strings.Contains(next, want) {
			t.Errorf("the request after compaction lacks %q: %s", want, next)
		}
	}
	if strings.Contains(next, "c1") {
		t.Errorf("the compacted turn was still sent: %s", next)
	}
	calls, outs := 0, len(outputs(afterSummary[0]))
	for _, it := range afterSummary[0].Input() {
		if tc, ok := it["tool_calls"].([]any); ok {
			calls += len(tc)
		}
	}
	if calls != outs {
		t.Errorf("calls and outputs split: %d calls, %d outputs", calls, outs)
	}
	// The summary's usage counts.
	if res.Usage.InputTokens < 300 {
		t.Errorf("usage %+v does not count the summary call", res.Usage)
	}
	var compactions int
	for _, s := range rec.s {
		if s.Kind == agentloop.StepCompaction {
			compactions++
			if s.Compacted == nil || !strings.Contains(s.Compacted.Summary, "steps 1-2") {
				t.Errorf("compaction step %+v", s)
			}
		}
	}
	if compactions != 1 {
		t.Fatalf("%d compaction steps, want 1", compactions)
	}

	// Resume from every step after the compaction: the summary is replayed,
	// never requested again, and the conversation sent is the compacted one.
	for cut := range rec.s {
		if rec.s[cut].Kind != agentloop.StepCompaction {
			continue
		}
		history := rec.s[:cut+1]
		before := len(srv.Requests())
		r2 := &agentloop.Runner{Agents: map[string]*agentloop.Agent{"summer": agent}, Checkpoint: (&steps{}).add}
		turn = 3
		if _, err := r2.Run(context.Background(), "summer", "", history); err != nil {
			t.Fatal(err)
		}
		for _, q := range srv.Requests()[before:] {
			if isSummaryRequest(q) {
				t.Fatal("a resume asked for the summary again")
			}
		}
		if in := fmt.Sprint(srv.Requests()[before].Input()); !strings.Contains(in, "steps 1-2 gave 1 and 3") || strings.Contains(in, "c1") {
			t.Errorf("the resumed request is not the compacted conversation: %s", in)
		}
		// The transcript a continuing run would start from is compacted too.
		items, err := agentloop.Transcript(history)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(items) == "" || !strings.Contains(fmt.Sprint(items), "Summary of the earlier part") {
			t.Errorf("transcript %v", items)
		}
	}
}
