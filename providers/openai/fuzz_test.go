package openai

import (
	"encoding/json"
	"testing"

	"github.com/agentctl/agentctl/model"
)

// FuzzRequestBuilding feeds arbitrary conversations (as a checkpoint would
// hold them) to both request builders: they must return an error or a
// request that encodes, never panic.
func FuzzRequestBuilding(f *testing.F) {
	f.Add([]byte(`[{"type":"message","role":"user","text":"hi"}]`), "gpt-5", []byte(`{"type":"object"}`))
	f.Add([]byte(`[{"type":"message","role":"user","text":"x"},{"type":"function_call","call_id":"c","name":"exec_command","arguments":"{"},{"type":"function_call_output","call_id":"c","output":"o","images":[{"media_type":"image/png","data":"AAAA"}]}]`), "gpt-4o", []byte(`null`))
	f.Add([]byte(`[{"type":"reasoning","raw":{"id":"rs","summary":[{"text":"t"}],"encrypted_content":"e"}},{"type":"compaction","raw":{"id":"c","encrypted_content":"z"}},{"type":"message","role":"assistant","text":"a"}]`), "o3", []byte(`{}`))
	f.Add([]byte(`[{"type":"compaction"},{"type":"bogus"},{"type":"message","role":"tool"}]`), "", []byte(`[1]`))
	f.Fuzz(func(t *testing.T, items []byte, modelName string, schema []byte) {
		var input []model.Item
		if json.Unmarshal(items, &input) != nil {
			return
		}
		req := &model.Request{Model: modelName, Instructions: "i", Input: input, Compaction: &model.Compaction{},
			Tools: []model.Tool{{Name: "t", Parameters: json.RawMessage(schema)}}, OutputSchema: json.RawMessage(schema)}
		if p, err := responsesParams(req); err == nil {
			if _, err := json.Marshal(p); err != nil {
				t.Fatalf("responses params do not encode: %v", err)
			}
		}
		if p, err := chatParams(req); err == nil {
			if _, err := json.Marshal(p); err != nil {
				t.Fatalf("chat params do not encode: %v", err)
			}
		}
	})
}
