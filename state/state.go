// Package state persists what agentctl manages: the state file
// (state.json), the lock that keeps one writer at a time, the per-run
// journals that checkpoint every step of a run, and saved plan files.
//
// A state directory (".agentctl/" next to the configuration, or as given)
// holds:
//
//	state.json          the state, replaced atomically when written whole
//	state.json.log      the changes appended since (Append; see log.go)
//	state.json.backup   the state before it was last written whole
//	state.lock          the lock file (never removed; the lock is a kernel lock on it)
//	state.lock.info     who holds the lock (JSON), present while it is held
//	journals/*.jsonl    one append-only journal per run: its checkpoints, then its transcript
//	snapshots/...       sandbox snapshots (written by the engine)
//
// See docs/state.md for the file formats and the guarantees.
package state

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/internal/seal"

	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/archive"
)

// FormatVersion is the newest version of the state file format this
// package reads and writes. A state file with a larger format_version is
// refused. Format 2 is format 1 with BLAKE3 content digests
// (State.DigestAlgorithm): a state that keeps SHA-256 digests is still
// written as format 1, which earlier versions read; one with BLAKE3
// digests as format 2, which they refuse instead of misreading every
// digest as a change.
const FormatVersion = 2

// StateFileName is the name of the state file inside a state directory.
const StateFileName = "state.json"

// BackupSuffix is appended to the state file's path to name its backup:
// the state as it was before the latest write.
const BackupSuffix = ".backup"

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

// formatVersion is the format s is written in: 1 while its digests are
// SHA-256 (readable by every version), FormatVersion otherwise.
func (s *State) formatVersion() int {
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
	c, err := decodeState("state", data)
	if err != nil {
		return nil
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

// Dir is a state directory.
type Dir struct {
	path      string
	stateFile string
	version   string

	mu   sync.Mutex // guards held and log; serializes Write and Append
	held *Lock      // the lock taken through this Dir, if any
	log  *Journal   // the state log, once Append opened it
	// verify makes Append read the state back and compare
	// (AGENTCTL_STATE_VERIFY=1).
	verify bool
	// keys encrypt the state file, the state log, the journals and the
	// snapshots (WithEncryption); nil for none.
	keys *seal.Keys
	// bound is the state the journals' records are bound to, as last
	// read from or written to the state file (nil before).
	bound atomic.Pointer[stateBinding]
}

// Option configures OpenDir.
type Option func(*Dir)

// WithStateFile makes the state file path differ from DIR/state.json (the
// -state flag). Journals, snapshots and the lock stay in the directory.
func WithStateFile(path string) Option {
	return func(d *Dir) { d.stateFile = path }
}

// WithAgentctlVersion sets the agentctl_version Write records.
func WithAgentctlVersion(v string) Option {
	return func(d *Dir) { d.version = v }
}

// WithEncryption encrypts what the directory keeps at rest (the state
// file, the state log, the journals and the snapshots) with keys, or
// decrypts it on the next write when keys say decrypt; nil keys read
// and write plaintext and refuse what is encrypted (docs/state.md,
// "Encryption").
func WithEncryption(keys *seal.Keys) Option {
	return func(d *Dir) { d.keys = keys }
}

// Encryption returns the directory's encryption setting (nil for none).
func (d *Dir) Encryption() *seal.Keys { return d.keys }

// OpenDir returns the state directory at path. It does not create it:
// Write, Lock and OpenJournal create it when first needed.
func OpenDir(path string, opts ...Option) (*Dir, error) {
	if path == "" {
		return nil, errors.New("state directory path is empty")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", path, err)
	}
	d := &Dir{path: abs, verify: os.Getenv("AGENTCTL_STATE_VERIFY") == "1"}
	for _, o := range opts {
		o(d)
	}
	if d.stateFile == "" {
		d.stateFile = filepath.Join(abs, StateFileName)
	} else if d.stateFile, err = filepath.Abs(d.stateFile); err != nil {
		return nil, fmt.Errorf("state file %s: %w", d.stateFile, err)
	}
	if fi, err := os.Stat(abs); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("state directory %s is a file, not a directory; remove it or choose another location", abs)
	}
	if fi, err := os.Stat(d.stateFile); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("state file %s is a directory; give the path of a file", d.stateFile)
	}
	return d, nil
}

// Path returns the absolute path of the state directory.
func (d *Dir) Path() string { return d.path }

// StateFile returns the absolute path of the state file.
func (d *Dir) StateFile() string { return d.stateFile }

// BackupFile returns the absolute path of the state backup: the state
// file as it was before the latest write.
func (d *Dir) BackupFile() string { return d.stateFile + BackupSuffix }

// Abs resolves a path stored in state (relative to the state directory).
func (d *Dir) Abs(rel string) string {
	if filepath.IsAbs(rel) {
		return rel
	}
	return filepath.Join(d.path, filepath.FromSlash(rel))
}

// Sub returns the path of elem inside the state directory, e.g.
// d.Sub("snapshots") or d.Sub("providers", "local").
func (d *Dir) Sub(elem ...string) string {
	return filepath.Join(append([]string{d.path}, elem...)...)
}

// Rel returns path relative to the state directory, with forward slashes,
// as stored in state.
func (d *Dir) Rel(path string) (string, error) {
	r, err := filepath.Rel(d.path, path)
	if err != nil {
		return "", fmt.Errorf("path %s is not inside the state directory %s: %w", path, d.path, err)
	}
	return filepath.ToSlash(r), nil
}

// Ensure creates the state directory if needed. A new directory gets a
// .gitignore that ignores everything in it, so state, journals and
// snapshots are never committed by accident.
func (d *Dir) Ensure() error {
	if _, err := os.Stat(d.path); err == nil {
		return nil
	}
	if err := os.MkdirAll(d.path, 0o755); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	gi := filepath.Join(d.path, ".gitignore")
	if err := os.WriteFile(gi, []byte("# Created by agentctl: state, journals and snapshots are local.\n*\n"), 0o644); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	return syncDir(filepath.Dir(d.path))
}

// Exists reports whether the state file exists.
func (d *Dir) Exists() bool {
	_, err := os.Stat(d.stateFile)
	return err == nil
}

// Read reads the state: the state file, and the changes its log records
// since (see log.go). A missing file yields New() (serial 0, a fresh
// lineage, nothing written). A file written by a newer agentctl is
// refused with a *NewerFormatError; invalid content is reported with the
// file name and position, and with how to recover from the backup.
func (d *Dir) Read() (*State, error) {
	for attempt := 1; ; attempt++ {
		s, err := d.readOnce()
		var gap *errLogGap
		if errors.As(err, &gap) {
			if attempt < 5 {
				continue // compacted while read: read both again
			}
			return nil, fmt.Errorf("reading state: %w; if no agentctl command is running, remove the log to use %s as it is (the changes the log records are then lost), or put back the state file the log belongs to", err, d.stateFile)
		}
		return s, err
	}
}

func (d *Dir) readOnce() (*State, error) {
	data, err := os.ReadFile(d.stateFile)
	if errors.Is(err, fs.ErrNotExist) {
		s := New()
		if _, err := os.Stat(d.LogFile()); err == nil {
			return nil, fmt.Errorf("reading state: the state file %s is missing but its log %s is there; put the state file back (its backup is %s), or remove the log to start over with an empty state", d.stateFile, d.LogFile(), d.BackupFile())
		}
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading state: %w", err)
	}
	s, form, err := d.decodeStateFileForm(d.stateFile, data)
	var nf *NewerFormatError
	if err != nil && (errors.Is(err, seal.ErrNoKey) || errors.Is(err, seal.ErrWrongKey)) {
		return nil, fmt.Errorf("reading state: %w", err)
	}
	if err != nil && !errors.As(err, &nf) {
		return nil, fmt.Errorf("%w; %s", err, d.recoveryHint())
	}
	if err != nil {
		return s, err
	}
	n, err := d.replayLog(s, form)
	if err != nil {
		var gap *errLogGap
		if errors.As(err, &gap) {
			return nil, err
		}
		return nil, fmt.Errorf("reading state: %w", err)
	}
	if n > 0 {
		if err := checkState(d.LogFile(), s); err != nil {
			return nil, fmt.Errorf("reading state: %w", err)
		}
	}
	sb := d.bindingOf(s.Lineage, form)
	d.bound.Store(&sb)
	return s, nil
}

// bindingOf is the binding of the journals of the state of lineage,
// its file in form.
func (d *Dir) bindingOf(lineage string, form stateForm) stateBinding {
	return stateBinding{lineage: lineage, strict: form == formBound && d.keys.Encrypting()}
}

// stateBinding returns the state the journals belong to: as last read
// or written, or as the state file says now. With no state file, it has
// no lineage.
func (d *Dir) stateBinding() (stateBinding, error) {
	if sb := d.bound.Load(); sb != nil {
		return *sb, nil
	}
	if _, err := os.Stat(d.stateFile); errors.Is(err, fs.ErrNotExist) {
		return stateBinding{}, nil
	}
	if _, err := d.Read(); err != nil {
		return stateBinding{}, err
	}
	if sb := d.bound.Load(); sb != nil {
		return *sb, nil
	}
	return stateBinding{}, nil
}

// journalBinding binds the journal name of this directory to its state.
func (d *Dir) journalBinding(name string) *journalBinding {
	return &journalBinding{name: path.Clean(filepath.ToSlash(name)), state: d.stateBinding}
}

// recoveryHint tells how to recover from a damaged state file: from the
// backup when there is a readable one.
func (d *Dir) recoveryHint() string {
	backup := d.BackupFile()
	data, err := os.ReadFile(backup)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("there is no backup (%s does not exist): fix the file, or remove it to start over with an empty state (agentctl then no longer tracks the sandboxes and runs it recorded)", backup)
	case err != nil:
		return fmt.Sprintf("the backup %s cannot be read either (%v): fix the file, or remove it to start over with an empty state", backup, err)
	}
	b, err := d.decodeStateFile(backup, data)
	if err != nil {
		return fmt.Sprintf("the backup %s is damaged too (%v): fix the file, or remove it to start over with an empty state", backup, err)
	}
	return fmt.Sprintf("the state before the latest write is kept in %s (serial %d): to go back to it, copy it over the state file (cp %s %s)",
		backup, b.Serial, shellQuote(backup), shellQuote(d.stateFile))
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:,@", r)) {
			safe = false
			break
		}
	}
	if safe && s != "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Write increments s.Serial and replaces the state file atomically,
// keeping the file it replaces as the backup (BackupFile), then removes
// the state log, whose changes s holds (the compaction). On error
// s.Serial is left unchanged, except when only the log's removal failed
// (the state file is written; the log's records are then skipped by
// Read, as the state file has their serials).
func (d *Dir) Write(s *State) error {
	if s == nil {
		return errors.New("writing state: nil state")
	}
	if s.Lineage == "" {
		return fmt.Errorf("writing state %s: the state has no lineage (create states with state.New or Dir.Read)", d.stateFile)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held != nil {
		if err := d.held.Check(); err != nil {
			return fmt.Errorf("writing state: %w", err)
		}
	}
	if err := d.Ensure(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(d.stateFile), 0o755); err != nil {
		return fmt.Errorf("writing state: %w", err)
	}
	data, err := EncodeStateVersion(s, d.version)
	if err != nil {
		return fmt.Errorf("%s: %w", d.stateFile, err)
	}
	data, err = d.sealStateFile(data)
	if err == nil {
		err = d.replaceStateFile(s, data)
	}
	if err != nil {
		s.Serial--
		return fmt.Errorf("writing state: %w", err)
	}
	form := formPlain
	if d.keys.Encrypting() {
		form = formBound
	}
	sb := d.bindingOf(s.Lineage, form)
	d.bound.Store(&sb)
	lerr := d.closeLog()
	if err := removeDurable(d.LogFile()); err != nil {
		lerr = errors.Join(lerr, err)
	}
	if lerr != nil {
		return fmt.Errorf("writing state: the state file is written (serial %d), but its log was not removed: %w", s.Serial, lerr)
	}
	return nil
}

func encodeState(s *State) ([]byte, error) {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
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

// decodeState parses and checks a state file's content. name is used in
// error messages.
func decodeState(name string, data []byte) (*State, error) {
	var head struct {
		FormatVersion *int `json:"format_version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, jsonError(name, "state file", data, err)
	}
	if head.FormatVersion == nil {
		return nil, fmt.Errorf("%s is not an agentctl state file: it has no format_version; check the -state path", name)
	}
	v := *head.FormatVersion
	if v > FormatVersion {
		return nil, &NewerFormatError{File: name, What: "state", Format: v}
	}
	if v < 1 {
		return nil, fmt.Errorf("%s: unsupported state format_version %d; the file is damaged or not an agentctl state file", name, v)
	}
	s := &State{}
	if err := json.Unmarshal(data, s); err != nil {
		return nil, jsonError(name, "state file", data, err)
	}
	if err := checkState(name, s); err != nil {
		return nil, err
	}
	return s, nil
}

// checkState checks what decoding cannot (a lineage, no null records,
// keys that match addresses), fills in empty maps and compacts the raw
// values; name is used in error messages.
func checkState(name string, s *State) error {
	if s.Lineage == "" {
		return fmt.Errorf("%s: state has no lineage; the file is damaged", name)
	}
	switch s.DigestAlgorithm {
	case "", digest.SHA256, digest.BLAKE3:
	default:
		return fmt.Errorf("%s: digest_algorithm %q is not one this agentctl knows (%s, %s); upgrade agentctl, or the file is damaged", name, s.DigestAlgorithm, digest.BLAKE3, digest.SHA256)
	}
	if s.Digests() != digest.SHA256 && s.FormatVersion < 2 {
		return fmt.Errorf("%s: digest_algorithm %q needs format_version 2, the file has %d; the file is damaged or was edited by hand", name, s.DigestAlgorithm, s.FormatVersion)
	}
	if s.Sandboxes == nil {
		s.Sandboxes = map[string]*Sandbox{}
	}
	if s.Runs == nil {
		s.Runs = map[string]*Run{}
	}
	if s.Outputs == nil {
		s.Outputs = map[string]*Output{}
	}
	for addr, sb := range s.Sandboxes {
		if sb == nil {
			return fmt.Errorf("%s: sandboxes[%q] is null; the file is damaged (edit it to remove the entry)", name, addr)
		}
		if sb.Address == "" {
			sb.Address = addr
		} else if sb.Address != addr {
			return fmt.Errorf("%s: sandboxes[%q] has address %q; the key and the address must match", name, addr, sb.Address)
		}
	}
	for addr, r := range s.Runs {
		if r == nil {
			return fmt.Errorf("%s: runs[%q] is null; the file is damaged (edit it to remove the entry)", name, addr)
		}
		if r.Address == "" {
			r.Address = addr
		} else if r.Address != addr {
			return fmt.Errorf("%s: runs[%q] has address %q; the key and the address must match", name, addr, r.Address)
		}
		if err := checkToolDecisions(r); err != nil {
			return fmt.Errorf("%s: runs[%q]: %w", name, addr, err)
		}
	}
	for k, o := range s.Outputs {
		if o == nil {
			return fmt.Errorf("%s: outputs[%q] is null; the file is damaged", name, k)
		}
	}
	if err := compactRaw(s); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// compactRaw rewrites the raw JSON values held in s (outputs, session
// data) in compact form, so that a state read back from the indented file
// holds exactly the bytes that were written and digests over them stay
// stable.
func compactRaw(s *State) error {
	for addr, sb := range s.Sandboxes {
		if err := compactSandbox(addr, sb); err != nil {
			return err
		}
	}
	for addr, r := range s.Runs {
		if err := compactRun(addr, r); err != nil {
			return err
		}
	}
	return compactOutputs(s.Outputs)
}

// compactJSON rewrites *raw in compact form; where names it in errors.
func compactJSON(where string, raw *json.RawMessage) error {
	if len(*raw) == 0 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, *raw); err != nil {
		return fmt.Errorf("%s is not valid JSON: %w", where, err)
	}
	if b.Len() != len(*raw) {
		*raw = b.Bytes()
	}
	return nil
}

// compactSandbox is compactRaw for one sandbox.
func compactSandbox(addr string, sb *Sandbox) error {
	if sb == nil {
		return nil
	}
	if err := compactJSON(fmt.Sprintf("sandboxes[%q].session.data", addr), &sb.Session.Data); err != nil {
		return err
	}
	return fixAttributes(fmt.Sprintf("sandboxes[%q]", addr), sb.Attributes, compactJSON)
}

// compactRun is compactRaw for one run.
func compactRun(addr string, r *Run) error {
	if r == nil {
		return nil
	}
	if err := compactJSON(fmt.Sprintf("runs[%q].output", addr), &r.Output); err != nil {
		return err
	}
	return fixAttributes(fmt.Sprintf("runs[%q]", addr), r.Attributes, compactJSON)
}

// compactOutputs is compactRaw for the outputs.
func compactOutputs(outputs map[string]*Output) error {
	for name, o := range outputs {
		if o == nil {
			continue
		}
		if err := compactJSON(fmt.Sprintf("outputs[%q].value", name), &o.Value); err != nil {
			return err
		}
	}
	return nil
}

// fixAttributes compacts the values of attrs with fix.
func fixAttributes(where string, attrs map[string]Attribute, fix func(string, *json.RawMessage) error) error {
	for path, a := range attrs {
		if err := fix(fmt.Sprintf("%s.attributes[%q].value", where, path), &a.Value); err != nil {
			return err
		}
		attrs[path] = a
	}
	return nil
}

// jsonError turns a JSON decoding error into one that names the file and
// the line, column and byte offset of the problem.
func jsonError(name, what string, data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off := se.Offset
		if len(bytes.TrimSpace(data)) == 0 {
			return fmt.Errorf("%s: %s is empty; the file is damaged", name, what)
		}
		line, col := position(data, off)
		return fmt.Errorf("%s: %s is not valid JSON at line %d, column %d (byte offset %d): %v; the file is damaged",
			name, what, line, col, off, se)
	case errors.As(err, &te):
		line, col := position(data, te.Offset)
		field := te.Field
		if field == "" {
			field = "(top level)"
		}
		return fmt.Errorf("%s: %s has a %s where a %s is expected, in %s at line %d, column %d (byte offset %d)",
			name, what, te.Value, te.Type, field, line, col, te.Offset)
	default:
		return fmt.Errorf("%s: reading %s: %w", name, what, err)
	}
}

// position converts a byte offset into a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	before := data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	col = int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// encryptedStateFile is the state file when it is encrypted: the
// state file's bytes, sealed (seal.Key.Seal, kind "state") and in
// base64. Its format_version, 2, makes an agentctl that predates
// encryption refuse it as newer instead of misreading it.
type encryptedStateFile struct {
	FormatVersion int    `json:"format_version"`
	Encryption    string `json:"encryption"`
	KeyCheck      string `json:"key_check"`
	Data          string `json:"data"`
}

const (
	encryptedStateFormat = 2
	encryptionMethod     = "aes-256-gcm"
)

// stateForm is the form a state file is in.
type stateForm int

const (
	formPlain stateForm = iota
	// formLegacy is encrypted by an agentctl that did not bind
	// records to their places (a version 1 envelope).
	formLegacy
	// formBound is encrypted by one that does: its journals' records
	// are all bound.
	formBound
)

// wantForm is the form the directory writes.
func (d *Dir) wantForm() stateForm {
	if d.keys.Encrypting() {
		return formBound
	}
	return formPlain
}

// sealStateFile returns the state file's bytes as written: data, or
// its encrypted form when the directory encrypts. The state file has no
// place of its own (its lineage is inside it).
func (d *Dir) sealStateFile(data []byte) ([]byte, error) {
	if !d.keys.Encrypting() {
		return data, nil
	}
	env, err := d.keys.Seal(kindState, seal.Place{}, data)
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(encryptedStateFile{
		FormatVersion: encryptedStateFormat,
		Encryption:    encryptionMethod,
		KeyCheck:      d.keys.Key().Check(),
		Data:          string(seal.EncodeText(env)),
	}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// openStateFile returns the plaintext of a state file's content (data
// itself when it is not encrypted) and the form it was in.
func (d *Dir) openStateFile(name string, data []byte) (plain []byte, form stateForm, err error) {
	trimmed := bytes.TrimSpace(data)
	if !bytes.HasPrefix(trimmed, []byte("{")) || !bytes.Contains(trimmed, []byte(`"encryption"`)) {
		return data, formPlain, nil
	}
	var f encryptedStateFile
	if err := json.Unmarshal(data, &f); err != nil || f.Encryption == "" {
		return data, formPlain, nil // a plaintext state; decodeState reports it
	}
	if f.FormatVersion != encryptedStateFormat || f.Encryption != encryptionMethod {
		return nil, formLegacy, &NewerFormatError{File: name, What: "encrypted state", Format: f.FormatVersion}
	}
	env, err := seal.DecodeText([]byte(f.Data))
	if err != nil {
		return nil, formLegacy, fmt.Errorf("%s: %w", name, err)
	}
	form = formLegacy
	if seal.Bound(env) {
		form = formBound
	}
	plain, err = d.keys.Key().Open("the state file "+name, kindState, seal.Place{}, env)
	return plain, form, err
}

// decodeStateFile is decodeState for the content of a state file that
// may be encrypted.
func (d *Dir) decodeStateFile(name string, data []byte) (*State, error) {
	s, _, err := d.decodeStateFileForm(name, data)
	return s, err
}

// decodeStateFileForm is decodeStateFile, also returning the form the
// file was in.
func (d *Dir) decodeStateFileForm(name string, data []byte) (*State, stateForm, error) {
	plain, form, err := d.openStateFile(name, data)
	if err != nil {
		return nil, form, err
	}
	s, err := decodeState(name, plain)
	return s, form, err
}

// replaceStateFile replaces the state file with data (Write), keeping
// the previous file as the backup. When the previous file was written
// with another encryption setting (before the key was configured,
// before decrypt was set, or encrypted by an agentctl that did not bind
// records to their places), the backup is written re-encoded with this
// one rather than linked, and the journals s refers to are converted
// too, so that nothing is left behind unencrypted (or, with decrypt,
// encrypted; or unbound) once the state is.
//
// A state file encrypted with another key, or encrypted while no key is
// configured, is not replaced: the state it holds would be lost.
func (d *Dir) replaceStateFile(s *State, data []byte) error {
	old, err := os.ReadFile(d.stateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return replaceFile(d.stateFile, d.BackupFile(), data, 0o600)
	}
	if err != nil {
		return err
	}
	plain, form, err := d.openStateFile(d.stateFile, old)
	if errors.Is(err, seal.ErrNoKey) || errors.Is(err, seal.ErrWrongKey) {
		return err
	}
	if err != nil || form == d.wantForm() {
		// Unreadable (kept as it is, as the backup) or already as wanted.
		return replaceFile(d.stateFile, d.BackupFile(), data, 0o600)
	}
	if err := d.convertFiles(s); err != nil {
		return err
	}
	backup, err := d.sealStateFile(plain)
	if err != nil {
		return err
	}
	if err := WriteFileAtomic(d.BackupFile(), backup, 0o600); err != nil {
		return err
	}
	return replaceFile(d.stateFile, "", data, 0o600)
}

// convertFiles rewrites the journals and the snapshots s refers to that
// were written with another encryption setting than the directory's.
func (d *Dir) convertFiles(s *State) error {
	for _, sb := range s.Sandboxes {
		if sb.Snapshot == "" {
			continue
		}
		path := d.Abs(sb.Snapshot)
		if _, err := os.Stat(path); err != nil {
			continue // a lost snapshot is reported where it is needed
		}
		if err := archive.ConvertSnapshot(path, d.keys.Key(), d.keys.WriteKey()); err != nil {
			return err
		}
	}
	var names []string
	for _, r := range s.Runs {
		names = append(names, r.Journal)
	}
	for _, c := range s.Chats {
		names = append(names, c.Journal, c.Current)
	}
	for _, m := range s.Memories {
		names = append(names, m.Journal)
	}
	for _, name := range names {
		if name == "" {
			continue
		}
		path := d.Abs(name)
		if _, err := os.Stat(path); err != nil {
			continue // a lost journal is reported where it is needed
		}
		bind := d.journalBinding(name)
		bind.state = func() (stateBinding, error) { return stateBinding{lineage: s.Lineage}, nil }
		j, err := openJournal(path, d.keys, kindJournal, bind)
		if err != nil {
			return fmt.Errorf("converting journal %s: %w", path, err)
		}
		if err := j.Close(); err != nil {
			return err
		}
	}
	return nil
}

// PendingConversion implements EncodingReporter.
func (d *Dir) PendingConversion(context.Context) (string, error) {
	data, err := os.ReadFile(d.stateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if _, form, err := d.openStateFile(d.stateFile, data); err == nil {
		return conversion(form, d.wantForm()), nil
	}
	return "", nil // unreadable: Read reports it
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
