package fakeopenai

import (
	"context"
	"encoding/json"
	"testing"
)

func BenchmarkValidateRequest(b *testing.B) {
	s, err := LoadSpec()
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"instructions":"You are an analyst.","store":false,"include":["reasoning.encrypted_content"],"input":[{"type":"message","content":"What is in data/?","role":"user"},{"type":"function_call","call_id":"c1","name":"exec_command","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"}],"model":"gpt-5","tools":[{"strict":true,"parameters":{"additionalProperties":false,"properties":{"cmd":{"type":"string"}},"required":["cmd"],"type":"object"},"name":"exec_command","description":"Run a shell command.","type":"function"}],"stream":true}`)
	for b.Loop() {
		if err := s.ValidateRequest(context.Background(), "/responses", body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidateEvent(b *testing.B) {
	s, err := LoadSpec()
	if err != nil {
		b.Fatal(err)
	}
	bl := &builder{reply: Reply{Text: "hello", Calls: []Call{FunctionCall("c", "f", "{}")}}, req: map[string]any{"model": "gpt-5"}, seq: 1}
	evs := bl.responseEvents()
	datas := [][]byte{}
	for _, e := range evs {
		d, _ := jsonMarshal(e)
		datas = append(datas, d)
	}
	b.ResetTimer()
	for b.Loop() {
		for i, d := range datas {
			c, _ := s.eventSchema(evs[i]["type"].(string))
			if err := s.ValidateSchema(c, d); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(datas)), "events/op")
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }
