// Package state is what agentctl records about what it manages: the
// state (sandboxes, runs, chats, memories, outputs) and its changes, the
// lock that keeps one writer at a time, and the contract of the stores
// that keep them (Store). The file formats are package statefile, the
// local directory store package local, the PostgreSQL store package
// pgstore.
//
// See docs/state.md for the formats and the guarantees.
package state

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/agentctl/agentctl/internal/digest"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
)

// FormatVersion is the newest version of the state file format this
// package reads and writes. A state file with a larger format_version is
// refused. Format 2 is format 1 with BLAKE3 content digests
// (State.DigestAlgorithm): a state that keeps SHA-256 digests is still
// written as format 1, which earlier versions read; one with BLAKE3
// digests as format 2, which they refuse instead of misreading every
// digest as a change.
const FormatVersion = 2

// Sandbox statuses.
const (
	SandboxRunning = "running"
	SandboxStopped = "stopped"
)

// Run statuses.
const (
	RunPending          = "pending"
	RunRunning          = "running"
	RunInterrupted      = "interrupted"
	RunAwaitingApproval = "awaiting_approval"
	RunCompleted        = "completed"
	RunFailed           = "failed"
)

// State is the content of state.json.
type State struct {
	FormatVersion   int    `json:"format_version"`
	AgentctlVersion string `json:"agentctl_version"`
	// Serial is incremented by every Dir.Write. 0 means never written.
	Serial uint64 `json:"serial"`
	// Lineage is a UUID fixed when the state is created.
	Lineage string `json:"lineage"`
	// DigestAlgorithm is the algorithm of the content digests this state
	// records (local_dir and local_file entries, snapshots), set when
	// the state is created: digest.BLAKE3 since format 2; absent in
	// states created before, whose digests stay SHA-256 (Digests) until
	// a destroy empties them (the engine then sets BLAKE3).
	DigestAlgorithm digest.Algorithm    `json:"digest_algorithm,omitempty"`
	Sandboxes       map[string]*Sandbox `json:"sandboxes"` // by address
	Runs            map[string]*Run     `json:"runs"`      // by address
	Outputs         map[string]*Output  `json:"outputs"`   // by name
	// Chats are the conversations of agentctl chat, by address
	// (chat.NAME). Absent in states written before chat existed.
	Chats map[string]*Chat `json:"chats,omitempty"`
	// Memories are the memory capabilities' records, by MemoryKey
	// (capability.memory.NAME@sandbox.X): the rollouts waiting for each
	// phase and what the memory calls cost. Absent in states written
	// before memory existed.
	Memories map[string]*Memory `json:"memories,omitempty"`
}

// Digests is the algorithm of the state's content digests:
// DigestAlgorithm, or SHA-256 for a state created before it existed.
func (s *State) Digests() digest.Algorithm {
	if s.DigestAlgorithm == "" {
		return digest.SHA256
	}
	return s.DigestAlgorithm
}

// WrittenFormat is the format s is written in: 1 while its digests are
// SHA-256 (readable by every version), FormatVersion otherwise.
func (s *State) WrittenFormat() int {
	if s.Digests() == digest.SHA256 {
		return 1
	}
	return FormatVersion
}

// MemoryKey is the key of the memory of capability capAddr in sandbox
// sbAddr.
func MemoryKey(capAddr, sbAddr string) string { return capAddr + "@" + sbAddr }

// Memory is one memory capability's memory in one sandbox's workspace.
type Memory struct {
	Capability string `json:"capability"`
	Sandbox    string `json:"sandbox"`
	// Journal holds the memory calls' responses, relative to the state
	// directory: a call recorded there is not made again.
	Journal string `json:"journal"`
	// Phase1 are the rollouts written to the workspace whose extraction
	// (phase 1) has not finished; Phase2 those extracted and waiting for
	// consolidation (phase 2).
	Phase1 []string `json:"phase1,omitempty"`
	Phase2 []string `json:"phase2,omitempty"`
	// Run and NextTurn are the run whose model serves the memory calls
	// (the last run that added a rollout) and the agent turn number the
	// next call takes in it (a scripted model's replies are numbered so).
	Run      string `json:"run,omitempty"`
	Agent    string `json:"agent,omitempty"`
	NextTurn int    `json:"next_turn,omitempty"`
	// Extracted and Consolidations count the finished phases; Calls and
	// Usage the memory model calls.
	Extracted      int         `json:"extracted"`
	Consolidations int         `json:"consolidations"`
	Calls          int         `json:"calls"`
	Usage          model.Usage `json:"usage"`
	UpdatedAt      time.Time   `json:"updated_at,omitzero"`
}

// Pending reports whether the memory has work waiting.
func (m *Memory) Pending() bool { return len(m.Phase1)+len(m.Phase2) > 0 }

// Chat statuses.
const (
	// ChatIdle is a session between turns.
	ChatIdle = "idle"
	// ChatRunning is a session whose current turn has not ended: its
	// process is running it, or died meanwhile (the next chat resumes it).
	ChatRunning = "running"
)

// Chat is one conversation of agentctl chat, kept between sessions.
type Chat struct {
	Address string `json:"address"`
	// Agent is the agent the session talks to; LastAgent the agent that
	// gave the last reply (a handoff moves the conversation), with whom
	// the next turn starts.
	Agent     string `json:"agent"`
	LastAgent string `json:"last_agent,omitempty"`
	// Status is ChatIdle or ChatRunning.
	Status string `json:"status"`
	// Sandboxes are the sandboxes the session's agents use.
	Sandboxes []string `json:"sandboxes,omitempty"`
	// Turns is the number of completed turns (lines the user typed).
	Turns int `json:"turns"`
	// Journal is the journal of the last completed turn, relative to
	// the state directory: its transcript is the whole conversation.
	Journal string `json:"journal,omitempty"`
	// Current is the journal of the turn under way (Status running), and
	// Input that turn's line; Steps is how many steps Current held when
	// the record was last written.
	Current string `json:"current,omitempty"`
	Input   string `json:"input,omitempty"`
	Steps   int    `json:"steps,omitempty"`
	// AgentTurns counts the model turns of each agent in the completed
	// turns (a scripted model replays its replies across turns).
	AgentTurns map[string]int `json:"agent_turns,omitempty"`
	Usage      model.Usage    `json:"usage"`
	// Approvals are the decisions on the tool calls of the current turn.
	Approvals []*Approval `json:"approvals,omitempty"`
	CreatedAt time.Time   `json:"created_at"`
	UpdatedAt time.Time   `json:"updated_at"`
}

// Sandbox is one managed sandbox.
type Sandbox struct {
	Address string `json:"address"`
	// Provider is the provider's configuration address.
	Provider string `json:"provider"`
	// Kind is the provider kind: local, docker, daytona, kubernetes.
	Kind    string               `json:"kind"`
	Session sandbox.SessionState `json:"session"`
	// Status is SandboxRunning or SandboxStopped.
	Status         string `json:"status"`
	ManifestDigest string `json:"manifest_digest,omitempty"`
	// EntryDigests maps a manifest entry path to its digest.
	EntryDigests map[string]string `json:"entry_digests,omitempty"`
	// ConfigDigest covers everything whose change forces a replace
	// (image, provider, isolation, network, ports, ...).
	ConfigDigest string            `json:"config_digest,omitempty"`
	URLs         map[string]string `json:"urls,omitempty"`
	// Attributes are the values ConfigDigest and the manifest's
	// environment cover, by attribute path (image, settings.user,
	// env.LANG, ...), so plan can say what changed from what. Absent in
	// states written before it was recorded.
	Attributes map[string]Attribute `json:"attributes,omitempty"`
	// Snapshot is the path of the latest snapshot, relative to the state
	// directory (see Dir.Abs).
	Snapshot       string `json:"snapshot,omitempty"`
	SnapshotDigest string `json:"snapshot_digest,omitempty"`
	// SnapshotImage is the local image reference of the latest
	// whole-sandbox snapshot (docker commit with commit_snapshot = true);
	// a restore creates the sandbox from it.
	SnapshotImage string    `json:"snapshot_image,omitempty"`
	CreatedAt     time.Time `json:"created_at,omitzero"`
	UpdatedAt     time.Time `json:"updated_at,omitzero"`

	// RestorePending is set while the sandbox is being restored from
	// Snapshot and the restore has not finished: from the moment the new
	// sandbox is recorded until the snapshot is unpacked and the manifest
	// materialized. While it is set, ManifestDigest and EntryDigests are
	// empty (the workspace holds an unknown part of the snapshot), plan
	// proposes the restore again and no snapshot replaces Snapshot.
	RestorePending *RestorePending `json:"restore_pending,omitempty"`
}

// RestorePending records a restore that has not finished.
type RestorePending struct {
	// Error is why the last attempt failed; empty while a restore is
	// under way, or when the process doing it died (kill -9, power loss).
	Error string `json:"error,omitempty"`
	// ManifestDigest and EntryDigests describe the workspace the snapshot
	// holds; they become the sandbox's once the restore finished.
	ManifestDigest string            `json:"manifest_digest,omitempty"`
	EntryDigests   map[string]string `json:"entry_digests,omitempty"`
	StartedAt      time.Time         `json:"started_at,omitzero"`
}

// Run is one execution of an agent on an input.
type Run struct {
	Address string `json:"address"`
	Agent   string `json:"agent"`
	// Status is one of the Run* constants.
	Status string `json:"status"`
	Digest string `json:"digest,omitempty"`
	// DigestInputs are the named component digests the Digest is made
	// of, so plan can say which inputs changed.
	DigestInputs map[string]string `json:"digest_inputs,omitempty"`
	// Attributes are the values DigestInputs cover, by attribute path:
	// "input", "run.NAME.output", "agent.NAME.model",
	// "agent.NAME.settings.temperature", ... (a path is a digest input's
	// name, or that name, a dot and the attribute within it), so plan
	// can say what changed from what. Absent in states written before it
	// was recorded.
	Attributes map[string]Attribute `json:"attributes,omitempty"`
	Sandboxes  []string             `json:"sandboxes,omitempty"`
	// Output is the run's final output: a JSON string or object.
	Output json.RawMessage `json:"output,omitempty"`
	Error  string          `json:"error,omitempty"`
	// Guardrail is the guardrail that stopped the run (status
	// guardrail_tripped), nil otherwise.
	Guardrail *GuardrailTrip `json:"guardrail,omitempty"`
	Turns     int            `json:"turns"`
	Usage     model.Usage    `json:"usage"`
	// MemoryUsage is what extracting memory from this run's rollout cost
	// (phase 1 of its agents' memory capabilities).
	MemoryUsage model.Usage `json:"memory_usage,omitzero"`
	Provenance  Provenance  `json:"provenance"`
	// Journal is the run's journal path, relative to the state directory
	// (ScopedJournalName; JournalFile when it may be empty): the
	// checkpoints of a run in progress, and the transcript of a finished
	// one. It is removed with the run's record.
	Journal string `json:"journal,omitempty"`
	// Steps is the number of steps checkpointed in the journal when this
	// record was written. The journal holds at least as many (a run in
	// progress appends more without rewriting the state); fewer, or no
	// journal at all, means checkpointed progress was lost.
	Steps int `json:"steps"`
	// ToolCalls is the number of tool calls the run answered, and
	// RunningTime its running time summed over its attempts: with Usage,
	// the figures its budgets bound.
	ToolCalls   int           `json:"tool_calls,omitempty"`
	RunningTime time.Duration `json:"running_time_ns,omitempty"`
	// Budgets are the budgets the run's last attempt ran under: the
	// run's own ("run") and its agents' ("agent.NAME"). Absent without
	// any.
	Budgets map[string]Budget `json:"budgets,omitempty"`
	// Approvals are the run's tool calls that needed a reviewer's
	// approval: pending ones (status awaiting_approval) and decided ones,
	// in the order they were requested. Absent in states written before
	// approvals existed, and for runs that never asked.
	Approvals []*Approval `json:"approvals,omitempty"`
	// ToolDecisions are the reviewer's standing decisions, by tool name
	// (ToolDecision). Absent in states written before them.
	ToolDecisions map[string]ToolDecision `json:"tool_decisions,omitempty"`
	// TraceID is the OpenTelemetry trace of the run's latest attempt (32
	// hex digits), when traces were exported (docs/observability.md).
	TraceID string `json:"trace_id,omitempty"`
}

// Budget is a budget block's limits; 0 is no limit.
type Budget struct {
	MaxTokens    int64         `json:"max_tokens,omitempty"`
	MaxToolCalls int           `json:"max_tool_calls,omitempty"`
	MaxDuration  time.Duration `json:"max_duration_ns,omitempty"`
}

// Decisions on a tool call.
const (
	ApprovalPending  = ""
	ApprovalApproved = "approved"
	ApprovalRejected = "rejected"
)

// Approval is one tool call that needs a reviewer's approval, and the
// decision once made.
type Approval struct {
	CallID string `json:"call_id"`
	// Path is the nested agent-tool conversation of the call ("" for the
	// run's own), as in the journal's steps.
	Path      string `json:"path,omitempty"`
	Agent     string `json:"agent"`
	Tool      string `json:"tool"`
	Arguments string `json:"arguments"` // JSON, scrubbed
	// Digest binds the decision to the call's tool and canonical
	// arguments (agentloop.CallDigest): a later call that reuses the id
	// with other content is not this call. Empty in states written before
	// digests were recorded.
	Digest string `json:"digest,omitempty"`
	// RequestedAt is when the run stopped awaiting it.
	RequestedAt time.Time `json:"requested_at,omitzero"`
	// Decision is ApprovalApproved, ApprovalRejected or ApprovalPending.
	Decision  string    `json:"decision,omitempty"`
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	Reason    string    `json:"reason,omitempty"`
}

// Pending lists the calls with no decision yet.
func (r *Run) Pending() []*Approval {
	var out []*Approval
	for _, a := range r.Approvals {
		if a.Decision == ApprovalPending {
			out = append(out, a)
		}
	}
	return out
}

// ApprovalCounts counts the run's approved, rejected and pending calls.
func (r *Run) ApprovalCounts() (approved, rejected, pending int) {
	for _, a := range r.Approvals {
		switch a.Decision {
		case ApprovalApproved:
			approved++
		case ApprovalRejected:
			rejected++
		default:
			pending++
		}
	}
	return
}

// Decide records a decision (ApprovalApproved or ApprovalRejected) on the
// pending calls ids, or on every pending call when ids is empty and all is
// set. It changes nothing and returns an error when the run is not
// awaiting approval or an id is not one of its pending calls.
func (r *Run) Decide(ids []string, all bool, decision, by, reason string, at time.Time) ([]*Approval, error) {
	if r.Status != RunAwaitingApproval {
		for _, id := range ids {
			if i := slices.IndexFunc(r.Approvals, func(a *Approval) bool { return a.CallID == id && a.Decision != ApprovalPending }); i >= 0 {
				a := r.Approvals[i]
				return nil, fmt.Errorf("%s: tool call %q was already %s by %s at %s, and the run has gone on (its status is %s): a decision cannot be changed after the fact", r.Address, id, a.Decision, a.DecidedBy, a.DecidedAt.Format(time.RFC3339), r.Status)
			}
		}
		return nil, fmt.Errorf("%s is not awaiting approval (its status is %s)", r.Address, r.Status)
	}
	pending := r.Pending()
	var picked []*Approval
	if all && len(ids) == 0 {
		picked = pending
	}
	for _, id := range ids {
		// The pending entry of the id, else its latest decided one.
		i := slices.IndexFunc(r.Approvals, func(a *Approval) bool { return a.CallID == id && a.Decision == ApprovalPending })
		if i < 0 {
			i = slices.IndexFunc(r.Approvals, func(a *Approval) bool { return a.CallID == id })
		}
		switch {
		case i < 0:
			known := make([]string, len(pending))
			for j, a := range pending {
				known[j] = a.CallID
			}
			return nil, fmt.Errorf("%s has no tool call %q awaiting approval; its pending calls are: %s", r.Address, id, strings.Join(known, ", "))
		case r.Approvals[i].Decision != ApprovalPending:
			return nil, fmt.Errorf("%s: tool call %q was already %s by %s at %s", r.Address, id, r.Approvals[i].Decision, r.Approvals[i].DecidedBy, r.Approvals[i].DecidedAt.Format(time.RFC3339))
		}
		if !slices.Contains(picked, r.Approvals[i]) {
			picked = append(picked, r.Approvals[i])
		}
	}
	for _, a := range picked {
		a.Decision, a.DecidedBy, a.DecidedAt, a.Reason = decision, by, at.UTC(), reason
	}
	return picked, nil
}

// Attribute is the value of one attribute a digest covers. A sensitive
// value, and one whose JSON is longer than MaxAttributeBytes, is kept
// only as its digest.
type Attribute struct {
	// Value is the value as JSON; absent when only Digest is kept.
	Value json.RawMessage `json:"value,omitempty"`
	// Digest is the hex SHA-256 of the value's JSON, kept instead of
	// Value.
	Digest string `json:"digest,omitempty"`
	// Sensitive marks a value holding a sensitive value: it is never
	// written to the state nor shown.
	Sensitive bool `json:"sensitive,omitempty"`
}

// MaxAttributeBytes bounds the JSON of an Attribute's Value.
const MaxAttributeBytes = 4096

// Provenance records where a run's result came from.
type Provenance struct {
	ConfigDigest string `json:"config_digest,omitempty"`
	// GitCommit is the commit of the git checkout holding the
	// configuration, if any (see internal/vcs.GitCommit).
	GitCommit   string    `json:"git_commit,omitempty"`
	Models      []string  `json:"models,omitempty"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	CompletedAt time.Time `json:"completed_at,omitzero"`
}

// Output is one root output value. Sensitive marks a value that is never
// printed unless asked for; the engine decides what value a sensitive
// output keeps in state (docs/language.md, "Sensitive values": they never
// reach state).
type Output struct {
	Value     json.RawMessage `json:"value"`
	Sensitive bool            `json:"sensitive,omitempty"`
}

// New returns an empty state with a fresh lineage and serial 0.
func New() *State {
	return &State{
		FormatVersion:   FormatVersion,
		Lineage:         uuid.NewString(),
		DigestAlgorithm: digest.BLAKE3,
		Sandboxes:       map[string]*Sandbox{},
		Runs:            map[string]*Run{},
		Outputs:         map[string]*Output{},
	}
}

// Clone returns a deep copy of s.
func (s *State) Clone() *State {
	data, err := json.Marshal(s)
	if err != nil {
		// State holds only JSON-encodable values; json.RawMessage fields
		// that are invalid JSON are the only way to get here.
		return nil
	}
	c := &State{}
	if err := json.Unmarshal(data, c); err != nil {
		return nil
	}
	if c.Sandboxes == nil {
		c.Sandboxes = map[string]*Sandbox{}
	}
	if c.Runs == nil {
		c.Runs = map[string]*Run{}
	}
	if c.Outputs == nil {
		c.Outputs = map[string]*Output{}
	}
	return c
}

// SandboxAddresses returns the addresses of the sandboxes, sorted.
func (s *State) SandboxAddresses() []string {
	return slices.Sorted(maps.Keys(s.Sandboxes))
}

// ChatAddresses returns the addresses of the chat sessions, sorted.
func (s *State) ChatAddresses() []string {
	return slices.Sorted(maps.Keys(s.Chats))
}

// RunAddresses returns the addresses of the runs, sorted.
func (s *State) RunAddresses() []string {
	return slices.Sorted(maps.Keys(s.Runs))
}

// NewerFormatError is returned when a file was written by a newer
// agentctl than this one.
type NewerFormatError struct {
	File   string
	What   string // "state", "saved plan", "journal"
	Format int
}

func (e *NewerFormatError) Error() string {
	return fmt.Sprintf("%s: %s was written by a newer agentctl (format %d); upgrade agentctl (this version reads format %d)",
		e.File, e.What, e.Format, FormatVersion)
}

// GuardrailTrip is the guardrail that stopped a run: its name, what it
// checked (input, output, tool_input, tool_output), its message, and the
// agent (and tool) whose input, output or call tripped it.
type GuardrailTrip struct {
	Name    string `json:"name"`
	On      string `json:"on"`
	Message string `json:"message"`
	Agent   string `json:"agent,omitempty"`
	Tool    string `json:"tool,omitempty"`
}
