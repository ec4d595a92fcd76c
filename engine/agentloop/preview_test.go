package agentloop

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/providers/scripted"
)

// imageTool returns an image and no text, as view_image does.
type imageTool struct{}

func (imageTool) Definition() model.Tool {
	return model.Tool{Name: "view_image", Parameters: json.RawMessage(`{"type":"object"}`)}
}

func (imageTool) Call(context.Context, string) (tools.Output, error) {
	return tools.Output{Images: []model.Image{{MediaType: "image/png", Data: []byte("\x89PNG")}}}, nil
}

// TestImageResultPreview: a tool result that is only an image is shown
// as one, not as an empty line.
func TestImageResultPreview(t *testing.T) {
	m := scripted.New(map[string][]scripted.Reply{"a": {
		{Calls: []scripted.Call{call("view_image", `{"path":"a.png"}`)}},
		{Text: "seen"},
	}})
	var results []string
	r := &Runner{Agents: map[string]*Agent{"a": agentWith("a", m, imageTool{})}, Events: func(e Event) {
		if e.Type == EventToolResult {
			results = append(results, e.Text)
		}
	}}
	if _, err := r.Run(context.Background(), "a", "look", nil); err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 || results[0] != "[image image/png, 4 bytes]" {
		t.Fatalf("tool results shown: %q", results)
	}
}
