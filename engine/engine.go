// Package engine is Terraform's engine applied to sandboxes and runs: it
// plans (diffs the configuration against the state, with reasons) and
// applies (walks the dependency graph, creating sandboxes and executing
// runs with every step checkpointed).
package engine

import (
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/manifest"
	"github.com/agentctl/agentctl/state"
)

var zeroRange hcl.Range

// EventType names an engine event.
type EventType string

const (
	EventApplyStart    EventType = "apply_start"
	EventApplyProgress EventType = "apply_progress"
	EventApplyComplete EventType = "apply_complete"
	EventApplyErrored  EventType = "apply_errored"
	// EventApplyInterrupted: a run stopped by an interrupt (its tool calls
	// in flight finished, its model call in flight abandoned); it is
	// checkpointed and the next apply resumes it.
	EventApplyInterrupted EventType = "apply_interrupted"
	EventRefresh          EventType = "refresh_complete"
	EventRuntime          EventType = "run_event"
	// EventApprovalRequired: a run ended awaiting approval of the tool
	// calls in Approvals (recorded in the state before the event).
	EventApprovalRequired EventType = "approval_required"
	// EventApplyWaiting: an object not started because a run it depends
	// on awaits approval; the next apply after the decision starts it.
	EventApplyWaiting EventType = "apply_waiting"
)

// Event is what the engine reports while it works; views render it.
type Event struct {
	Type    EventType        `json:"type"`
	Address string           `json:"address,omitempty"`
	Action  Action           `json:"action,omitempty"`
	Message string           `json:"message,omitempty"`
	Elapsed time.Duration    `json:"elapsed,omitempty"`
	Runtime *agentloop.Event `json:"run_event,omitempty"`
	// Approvals are the pending calls of EventApprovalRequired.
	Approvals []*state.Approval `json:"approvals,omitempty"`
}

// Engine plans and applies one configuration against one state directory.
type Engine struct {
	Config *config.Config
	State  state.Store
	// Environ is the process environment (credentials are read from it).
	Environ []string
	// Approver, when set, is asked during apply about each tool call that
	// needs approval and has no recorded decision; nil defers them all.
	Approver Approver
	// Events receives progress; nil discards it. It may be called from
	// several goroutines at once.
	Events func(Event)
	// Parallelism bounds concurrent graph nodes (0 = the configuration's,
	// default 10).
	Parallelism int
	// Version is agentctl's version, recorded in state.
	Version string
	// ProgressInterval is how often "Still ..." progress is reported
	// (0 = 10s).
	ProgressInterval time.Duration
	// Interrupt, when closed, stops runs: model calls in flight are
	// abandoned at once (with their retries), tool calls in flight finish
	// and are checkpointed, and nothing new starts (agentloop.Runner).
	Interrupt <-chan struct{}
	// Registry holds the provider types: the engine builds each provider
	// the configuration uses with its type's constructor. nil means the
	// registry the configuration was loaded with (config.Options.Registry);
	// another one must hold the same types.
	Registry *registry.Registry
	// Record, when not "", is a directory where every model provider that
	// calls a model over HTTP records its exchanges, one cassette per
	// provider (apply -record; record.go).
	Record string
	// Replay, when not "", is a directory of recorded cassettes every such
	// provider answers from instead of the network, as if its replay
	// setting named it (agentctl test -replay).
	Replay string
	// TracerProvider, when set, receives spans for plan, apply, each run,
	// each agent turn, model call and tool call, and sandbox work
	// (docs/observability.md); nil records nothing.
	TracerProvider trace.TracerProvider

	provOnce  sync.Once
	providers *providerSet

	scrubOnce sync.Once
	scrub     *sandbox.Scrubber

	// mcp caches the tool lists of MCP servers (mcp.go).
	mcp mcpListings
	// skills caches the skills read from git repositories (skills.go).
	skills skillSets

	digestOnce sync.Once
	digests    *manifest.DigestCache
}

// digestCacheFile is where local_dir digests are remembered, relative to
// the state directory.
const digestCacheFile = "cache/digests.json"

// digestCache is the state directory's cache of local_dir digests.
func (e *Engine) digestCache() *manifest.DigestCache {
	e.digestOnce.Do(func() {
		if e.State != nil {
			e.digests = manifest.OpenDigestCache(e.State.Abs(digestCacheFile))
		}
	})
	return e.digests
}

func (e *Engine) emit(ev Event) {
	if e.Events != nil {
		// Runtime events come scrubbed (runEvents); messages may quote
		// tool output or errors.
		ev.Message = e.scrubber().String(ev.Message)
		e.Events(ev)
	}
}

func (e *Engine) parallelism() int {
	if e.Parallelism > 0 {
		return e.Parallelism
	}
	if e.Config != nil && e.Config.Settings.Parallelism > 0 {
		return e.Config.Settings.Parallelism
	}
	return 10
}

// PlanOptions are plan's flags.
type PlanOptions struct {
	Destroy bool
	Refresh bool
	Targets []string
	// Excludes are left out of the plan with what depends on them
	// (-exclude).
	Excludes []string
	Replace  []string
	// Apply says the plan is applied at once (agentctl apply without a
	// saved plan): a new sandbox's local_dir trees that the digest cache
	// holds nothing for are left to the copy to check, as it reads them,
	// instead of being walked first (manifest.PlanDigests).
	Apply bool
	// RefreshOnly plans only to record in the state what a refresh finds
	// changed outside agentctl (Plan.Drift): plan -refresh-only.
	RefreshOnly bool
}

// manifestRoot is the workspace root of a sandbox instance: the
// manifest's root, or the provider type's default (registry.Type's
// DefaultRoot; daytona's is one its default snapshot's user can create),
// else /workspace.
func manifestRoot(cfg *config.Config, sb *config.SandboxInstance) string {
	if m := cfg.Manifests[sb.Manifest]; m != nil && m.Root != "" {
		return m.Root
	}
	if p := cfg.Providers[providerKey(sb.Provider)]; p != nil && cfg.Registry() != nil {
		if t, ok := cfg.Registry().Lookup(p.Type); ok && t.DefaultRoot != "" {
			return t.DefaultRoot
		}
	}
	return "/workspace"
}
