package statetest

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// Sample returns a new state with a sandbox, a run and two outputs, one
// of them sensitive: the state the file codec's and the local store's own
// tests write and read back.
func Sample() *state.State {
	s := state.New()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.Sandboxes["sandbox.dev"] = &state.Sandbox{
		Address: "sandbox.dev", Provider: "sandbox_provider.local", Kind: "local",
		Session:        sandbox.SessionState{Provider: "local", ID: "/tmp/x", Data: json.RawMessage(`{"k":1}`)},
		Status:         state.SandboxRunning,
		ManifestDigest: "sha256:aa", EntryDigests: map[string]string{"src/main.go": "sha256:bb"},
		ConfigDigest: "sha256:cc", URLs: map[string]string{"8080": "http://localhost:1234"},
		Snapshot: "snapshots/sandbox.dev.tar", SnapshotDigest: "sha256:dd",
		CreatedAt: now, UpdatedAt: now,
	}
	s.Runs[`run.review["pricing"]`] = &state.Run{
		Address: `run.review["pricing"]`, Agent: "agent.reviewer", Status: state.RunCompleted,
		Digest: "sha256:ee", DigestInputs: map[string]string{"agent": "sha256:1", "input": "sha256:2"},
		Sandboxes: []string{"sandbox.dev"}, Output: json.RawMessage(`{"verdict":"ok"}`),
		Turns: 3, Usage: model.Usage{InputTokens: 100, OutputTokens: 20},
		Provenance: state.Provenance{ConfigDigest: "sha256:ff", GitCommit: strings.Repeat("a", 40), Models: []string{"gpt-5"}, StartedAt: now, CompletedAt: now.Add(time.Minute)},
		Steps:      7,
	}
	s.Outputs["verdict"] = &state.Output{Value: json.RawMessage(`"ok"`)}
	s.Outputs["token"] = &state.Output{Value: json.RawMessage(`"s3cret"`), Sensitive: true}
	return s
}
