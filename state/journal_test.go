package state

import (
	"strings"
	"testing"
)

func TestJournalNames(t *testing.T) {
	seen := map[string]string{}
	for _, addr := range []string{"run.a", "run.A", `run.r["x"]`, `run.r["x/y"]`, `run.r[0]`, "run.r_0_", "../../etc/passwd", strings.Repeat("run.long", 100), ""} {
		name := JournalName(addr)
		if prev, ok := seen[name]; ok {
			t.Errorf("%q and %q share journal %s", prev, addr, name)
		}
		seen[name] = addr
		base := strings.TrimPrefix(name, "journals/")
		if strings.ContainsAny(base, "/\\\"[]") || len(base) > 120 || strings.HasPrefix(base, ".") || !strings.HasSuffix(base, ".jsonl") {
			t.Errorf("unsafe journal name %q for %q", name, addr)
		}
	}
	if got := JournalName("run.build"); !strings.HasPrefix(got, "journals/run.build-") {
		t.Errorf("JournalName(run.build) = %s", got)
	}
}

// The files one state names (journals, snapshots, logs) are told from
// another state's sharing the directory, and from the names used before
// they carried the lineage.
func TestScopedTo(t *testing.T) {
	a, b := "34cccab0-f9f8-4964-88ac-34ab2283d703", "4e0d1e52-c892-4b1e-9a57-0c3d2e1f4a5b"
	for _, name := range []string{
		ScopedName(a, "run.x") + ".jsonl",
		"memory." + ScopedName(a, "capability.memory.m@sandbox.s") + ".jsonl",
		ScopedName(a, "sandbox.s") + "@dn5gvrwe5ofrww.tar",
		ScopedName(a, "run.x") + ".mcp_server.kb.log",
	} {
		if !ScopedTo(name, a) {
			t.Errorf("%s is not seen as lineage a's", name)
		}
		if ScopedTo(name, b) || ScopedTo(name, "") {
			t.Errorf("%s is seen as another lineage's", name)
		}
	}
	for _, name := range []string{SafeName("run.x") + ".jsonl", SafeName("sandbox.s") + "@dn5gvrwe5ofrww.tar", ScopedName(b, "run.x") + ".jsonl"} {
		if ScopedTo(name, a) {
			t.Errorf("%s is seen as lineage a's", name)
		}
	}
}
