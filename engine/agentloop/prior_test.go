package agentloop

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/scripted"
)

// inputRecorder records the input of every request before answering from
// a scripted model.
type inputRecorder struct {
	m      model.Model
	mu     sync.Mutex
	inputs [][]model.Item
}

func (r *inputRecorder) Respond(ctx context.Context, req *model.Request, sink func(model.Event)) (*model.Response, error) {
	r.mu.Lock()
	r.inputs = append(r.inputs, slices.Clone(req.Input))
	r.mu.Unlock()
	return r.m.Respond(ctx, req, sink)
}

func TestPriorItemsStartTheConversationAndAreRecorded(t *testing.T) {
	first := &inputRecorder{m: scripted.New(map[string][]scripted.Reply{
		"a": {{Text: "hello", Calls: []scripted.Call{call("echo", `{}`)}}, {Text: "first answer"}},
	})}
	echo := funcTool{name: "echo", fn: func(context.Context, string) (string, error) { return "echoed", nil }}
	rec := &recorder{}
	r := &Runner{Agents: map[string]*Agent{"a": agentWith("a", first, echo)}, Checkpoint: rec.checkpoint}
	if _, err := r.Run(context.Background(), "a", "one", nil); err != nil {
		t.Fatal(err)
	}
	prior, err := Transcript(rec.steps)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, it := range prior {
		got = append(got, string(it.Type)+" "+it.Text+it.Name+it.Output)
	}
	want := []string{"message one", "message hello", "function_call echo", "function_call_output echoed", "message first answer"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("transcript (-want +got):\n%s", diff)
	}

	// A run continuing it sends those items, then its own input.
	second := &inputRecorder{m: scripted.New(map[string][]scripted.Reply{"a": {{Text: "second answer"}}})}
	rec2 := &recorder{}
	r2 := &Runner{Agents: map[string]*Agent{"a": agentWith("a", second, echo)}, Checkpoint: rec2.checkpoint, Prior: prior}
	if _, err := r2.Run(context.Background(), "a", "two", nil); err != nil {
		t.Fatal(err)
	}
	wantInput := append(slices.Clone(prior), model.Item{Type: model.ItemMessage, Role: "user", Text: "two"})
	if diff := cmp.Diff(wantInput, second.inputs[0]); diff != "" {
		t.Errorf("continued run's first request (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(prior, rec2.steps[0].Prior); diff != "" {
		t.Errorf("input step's prior (-want +got):\n%s", diff)
	}

	// Resuming from the recorded input step needs no Prior: the journal
	// holds it.
	third := &inputRecorder{m: scripted.New(map[string][]scripted.Reply{"a": {{Text: "second answer"}}})}
	r3 := &Runner{Agents: map[string]*Agent{"a": agentWith("a", third, echo)}}
	if _, err := r3.Run(context.Background(), "a", "ignored", rec2.steps[:1]); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantInput, third.inputs[0]); diff != "" {
		t.Errorf("resumed run's request (-want +got):\n%s", diff)
	}
	all, err := Transcript(rec2.steps)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(prior)+2 || all[len(all)-1].Text != "second answer" {
		t.Errorf("continued transcript %+v", all)
	}
}
