package views

import (
	"bytes"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/model"
)

func TestOutputPreview(t *testing.T) {
	for in, want := range map[string]string{
		"ok\n":                   "ok",
		"one\ntwo":               "one…",
		strings.Repeat("é", 100): strings.Repeat("é", 60) + "…",
		"":                       "",
	} {
		if got := outputPreview(in); got != want {
			t.Errorf("outputPreview(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestWriteHistory(t *testing.T) {
	var b bytes.Buffer
	WriteHistory(&b, []model.Item{
		{Type: model.ItemMessage, Role: "user", Text: "hi"},
		{Type: model.ItemFunctionCall, Name: "exec_command", Arguments: `{"cmd":"ls"}`},
		{Type: model.ItemFunctionCallOutput, Output: "Chunk ID: 1\nOutput:\nfile.txt\n"},
		{Type: model.ItemMessage, Role: "assistant", Agent: "helper", Text: "There is file.txt.\x1b[2J"},
	})
	want := "> hi\n  [exec_command {\"cmd\":\"ls\"}]\n  → file.txt\nagent.helper: There is file.txt.\\x1b[2J\n"
	if got := b.String(); got != want {
		t.Errorf("history:\n%q\nwant\n%q", got, want)
	}
}
