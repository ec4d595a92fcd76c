package tools

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentctl/agentctl/sandbox"
)

func TestVolatileTextMatchesTwoRunsOfACommand(t *testing.T) {
	a := FormatExecOutput(sandbox.ExecResult{Stdout: []byte("hello\n"), Wall: 12 * time.Millisecond}, 0)
	b := FormatExecOutput(sandbox.ExecResult{Stdout: []byte("hello\n"), Wall: 340 * time.Millisecond}, 0)
	if a == b {
		t.Fatal("the two outputs are expected to differ in chunk id and wall time")
	}
	if VolatileText(a) != VolatileText(b) {
		t.Fatalf("plain text:\n%s\n%s", VolatileText(a), VolatileText(b))
	}
	ja, _ := json.Marshal(map[string]string{"output": a})
	jb, _ := json.Marshal(map[string]string{"output": b})
	if VolatileText(string(ja)) != VolatileText(string(jb)) {
		t.Fatalf("JSON text:\n%s\n%s", VolatileText(string(ja)), VolatileText(string(jb)))
	}
	// The output itself still counts.
	c := FormatExecOutput(sandbox.ExecResult{Stdout: []byte("bye\n"), Wall: 12 * time.Millisecond}, 0)
	if VolatileText(a) == VolatileText(c) {
		t.Fatal("different outputs normalized to the same text")
	}
}
