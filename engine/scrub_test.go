package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
)

func TestRunEventsScrubStreamedText(t *testing.T) {
	const secret = "hunter22-token"
	var got []agentloop.Event
	r := newRunEvents(sandbox.NewScrubber([]string{secret}), func(ev agentloop.Event) { got = append(got, ev) })
	for _, piece := range []string{"the key is hun", "ter2", "2-tok", "en, ok"} {
		r.Event(agentloop.Event{Type: agentloop.EventTextDelta, Agent: "a", Text: piece})
	}
	r.Event(agentloop.Event{Type: agentloop.EventToolCall, Agent: "a", Name: "exec_command", Arguments: `{"cmd":"echo \"hunter22-token\""}`})
	r.Event(agentloop.Event{Type: agentloop.EventTextDelta, Agent: "a", Text: "again hunter22"})
	r.Flush()
	var text strings.Builder
	var args string
	for _, ev := range got {
		switch ev.Type {
		case agentloop.EventTextDelta:
			text.WriteString(ev.Text)
		case agentloop.EventToolCall:
			args = ev.Arguments
			if text.String() != "the key is (sensitive), ok" {
				t.Errorf("text before the tool call = %q", text.String())
			}
		}
	}
	if text.String() != "the key is (sensitive), okagain hunter22" {
		t.Errorf("text = %q", text.String())
	}
	if args != `{"cmd":"echo \"(sensitive)\""}` {
		t.Errorf("arguments = %s", args)
	}
}

func TestScrubStepKeepsJSONValid(t *testing.T) {
	sc := sandbox.NewScrubber([]string{`a"b\c-secret`})
	inner, _ := json.Marshal(`a"b\c-secret`) // JSON inside JSON
	args, _ := json.Marshal(map[string]string{"input": "x " + string(inner)})
	s := scrubStep(sc, agentloop.Step{Kind: agentloop.StepModel, Response: &model.Response{Output: []model.Item{
		{Type: model.ItemFunctionCall, Arguments: string(args)},
		{Type: model.ItemMessage, Text: `said a"b\c-secret`},
	}}})
	out := s.Response.Output
	if !json.Valid([]byte(out[0].Arguments)) || strings.Contains(out[0].Arguments, "secret") {
		t.Errorf("arguments = %s", out[0].Arguments)
	}
	if out[1].Text != "said (sensitive)" {
		t.Errorf("text = %q", out[1].Text)
	}
}

func TestRunEventsMaskPreviewCut(t *testing.T) {
	var got agentloop.Event
	r := newRunEvents(sandbox.NewScrubber([]string{"hunter22-token"}), func(ev agentloop.Event) { got = ev })
	r.Event(agentloop.Event{Type: agentloop.EventFinal, Agent: "a", Text: "the answer is hunter22-t…"})
	if got.Text != "the answer is (sensitive)…" {
		t.Fatalf("preview = %q", got.Text)
	}
}
