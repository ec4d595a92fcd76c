package engine

import (
	"encoding/json"
	"testing"

	"github.com/agentctl/agentctl/state"
)

// TestAttributeSurvivesTheStateFilesEscaping: a value holding && read
// back from a state file (where encoding/json wrote it as \u0026\u0026)
// is the value computed now: no reason, and sameAttributes agrees.
func TestAttributeSurvivesTheStateFilesEscaping(t *testing.T) {
	cur := newAttributes(nil)
	cur.set("mcp_server.kb.command", []string{"sh", "-c", "cd /srv && exec server"})
	b, err := json.MarshalIndent(cur.m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	var old map[string]state.Attribute
	if err := json.Unmarshal(b, &old); err != nil {
		t.Fatal(err)
	}
	if string(old["mcp_server.kb.command"].Value) == string(cur.m["mcp_server.kb.command"].Value) {
		t.Fatalf("the round trip did not escape: %s", old["mcp_server.kb.command"].Value)
	}
	if r := attributeReasons(nil, old, cur.m, func(string) bool { return true }, func(p string) string { return p }); len(r) != 0 {
		t.Errorf("reasons %q, want none", r)
	}
	if !sameAttributes(old, cur.m, "mcp_server.kb.", "mcp_server.kb.tools") {
		t.Error("sameAttributes: the escaped value differs")
	}
}
