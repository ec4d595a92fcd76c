package state

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
)

func sampleState() *State {
	s := New()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.Sandboxes["sandbox.dev"] = &Sandbox{
		Address: "sandbox.dev", Provider: "sandbox_provider.local", Kind: "local",
		Session:        sandbox.SessionState{Provider: "local", ID: "/tmp/x", Data: json.RawMessage(`{"k":1}`)},
		Status:         SandboxRunning,
		ManifestDigest: "sha256:aa", EntryDigests: map[string]string{"src/main.go": "sha256:bb"},
		ConfigDigest: "sha256:cc", URLs: map[string]string{"8080": "http://localhost:1234"},
		Snapshot: "snapshots/sandbox.dev.tar", SnapshotDigest: "sha256:dd",
		CreatedAt: now, UpdatedAt: now,
	}
	s.Runs[`run.review["pricing"]`] = &Run{
		Address: `run.review["pricing"]`, Agent: "agent.reviewer", Status: RunCompleted,
		Digest: "sha256:ee", DigestInputs: map[string]string{"agent": "sha256:1", "input": "sha256:2"},
		Sandboxes: []string{"sandbox.dev"}, Output: json.RawMessage(`{"verdict":"ok"}`),
		Turns: 3, Usage: model.Usage{InputTokens: 100, OutputTokens: 20},
		Provenance: Provenance{ConfigDigest: "sha256:ff", GitCommit: strings.Repeat("a", 40), Models: []string{"gpt-5"}, StartedAt: now, CompletedAt: now.Add(time.Minute)},
		Steps:      7,
	}
	s.Outputs["verdict"] = &Output{Value: json.RawMessage(`"ok"`)}
	s.Outputs["token"] = &Output{Value: json.RawMessage(`"s3cret"`), Sensitive: true}
	return s
}

func TestClone(t *testing.T) {
	s := sampleState()
	c := s.Clone()
	if diff := cmp.Diff(s, c); diff != "" {
		t.Fatal(diff)
	}
	c.Runs[`run.review["pricing"]`].Status = RunFailed
	if s.Runs[`run.review["pricing"]`].Status != RunCompleted {
		t.Fatal("Clone shares runs")
	}
}
