package config

import (
	"encoding/json"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
)

// Config is a loaded, validated configuration. Maps are keyed by the
// block's name (Providers by "TYPE" or "TYPE.ALIAS", Capabilities by
// "TYPE.NAME"). Every block keeps its DeclRange for diagnostics.
type Config struct {
	// Path is the file or directory as given; Dir is the absolute
	// configuration directory that relative paths resolve against.
	Path string
	Dir  string
	// Files are the parsed files, by filename, for diagnostic snippets.
	Files map[string]*hcl.File

	Settings     Settings
	Variables    map[string]*Variable
	Locals       map[string]*Local
	Outputs      map[string]*Output
	Providers    map[string]*Provider
	Manifests    map[string]*Manifest
	Sandboxes    map[string]*Sandbox
	Capabilities map[string]*Capability
	Agents       map[string]*Agent
	Runs         map[string]*Run
	MCPServers   map[string]*MCPServer
	Guardrails   map[string]*Guardrail
	// Imports are the import blocks, by the sandbox address they adopt
	// an existing sandbox as.
	Imports map[string]*Import

	// SandboxInstances and RunInstances are the blocks expanded by
	// for_each, keyed by instance address (sandbox.NAME, run.NAME["key"]).
	SandboxInstances map[string]*SandboxInstance
	RunInstances     map[string]*RunInstance

	// Evaluation state kept for the late evaluation of run inputs and
	// outputs (EvalRunInput, EvalOutputs).
	funcs  map[string]function.Function
	vars   map[string]cty.Value
	locals map[string]cty.Value
	// varsObj and localsObj are vars and locals as the objects of an
	// evaluation context, built once at load.
	varsObj, localsObj cty.Value
	col                *sensitiveCollector
	// registry holds the provider types the configuration was decoded with.
	registry *registry.Registry
	// reach indexes the sandboxes each agent reaches (RunSandboxes),
	// built once on first use: the agents don't change after loading.
	reach func() *sandboxReach
}

// Settings is the agentctl block.
type Settings struct {
	RequiredVersion string
	Parallelism     int // default 10
	// Backend is the state backend; nil for the local .agentctl
	// directory.
	Backend *Backend
	// Encryption encrypts the state at rest; nil for none.
	Encryption *Encryption
	DeclRange  hcl.Range
}

type Variable struct {
	Name        string
	Type        cty.Type
	Default     cty.Value
	Description string
	Sensitive   bool
	// Value is the final value (default, -var-file, env, -var).
	Value     cty.Value
	DeclRange hcl.Range
}

type Local struct {
	Name      string
	Expr      hcl.Expression
	DeclRange hcl.Range
}

type Output struct {
	Name        string
	Expr        hcl.Expression
	Sensitive   bool
	Description string
	// NeedsApproval guards calls of this agent tool.
	NeedsApproval ApprovalPolicy `json:",omitzero"`
	DeclRange     hcl.Range
}

// Provider is a provider block, or the implicit default configuration of
// an unaliased provider that is referred to without one.
type Provider struct {
	Type  string // a registered provider type: openai, scripted, local, docker, daytona, kubernetes
	Alias string
	// Addr is provider.TYPE or provider.TYPE.ALIAS.
	Addr string
	Role registry.Role
	// Settings are the block's arguments as the provider type decoded
	// them (for example *openai.ProviderSettings); registry.Type's
	// constructor takes them.
	Settings  any
	DeclRange hcl.Range
}

type Manifest struct {
	Name string
	// Root is "" when the manifest does not set one: the default then
	// depends on the provider (engine: /workspace, daytona:
	// /home/daytona/workspace).
	Root    string
	Entries []ManifestEntry
	// Mounts are the storage mounts (s3, r2, s3_files, gcs, azure_blob and
	// box entries), in declaration order.
	Mounts []*Mount
	// Env is persisted environment (env map and non-ephemeral env blocks).
	Env map[string]string
	// EphemeralEnv holds ephemeral env blocks; values may be sensitive.
	EphemeralEnv map[string]string
	// Accounts are the user and group blocks, in declaration order, with
	// every id assigned.
	Accounts sandbox.Accounts
	// UserRanges are the user blocks' label ranges by name.
	UserRanges map[string]hcl.Range
	DeclRange  hcl.Range
}

type ManifestEntry struct {
	Kind    string // file, dir, local_file, local_dir, git_repo
	Path    string // workspace-relative, checked
	Content string // file
	Mode    uint32 // file (0 = 0644)
	Source  string // local_file/local_dir: absolute, inside Dir
	Exclude []string
	Repo    string
	Ref     string
	Subpath string
	// DeclRange is the entry block's range.
	DeclRange hcl.Range
}

type Sandbox struct {
	Name      string
	ForEach   hcl.Expression // nil without for_each
	DeclRange hcl.Range
}

// SandboxInstance is one sandbox after for_each expansion, evaluated.
type SandboxInstance struct {
	Addr     string // sandbox.NAME or sandbox.NAME["key"]
	Name     string
	Key      string // "" without for_each
	Provider string // provider address
	Image    string
	Manifest string // manifest name, "" for none
	Network  string // none (default) | host | bridge | named
	Ports    []int
	OnExit   string // stop (default) | keep | delete
	// SnapshotExclude are gitignore-like patterns (a manifest exclude's
	// syntax) of workspace entries left out of this sandbox's snapshots.
	SnapshotExclude []string
	Resources       Resources
	// Settings are the provider type's own sandbox arguments as its
	// decoder returned them, already checked (for example
	// *docker.SandboxSettings); they become sandbox.Spec.Settings.
	Settings any
	// Postconditions are checked on the sandbox once created
	// (CheckSandboxPostconditions), with self its attributes.
	Postconditions []*Condition
	each           *eachVal
	DeclRange      hcl.Range
}

type Resources struct {
	CPUs     float64
	MemoryMB int64
	DiskGB   int64
	PIDs     int64
	GPUs     int64
}

type Capability struct {
	Type string // shell, filesystem, compaction, command
	Name string
	// Addr is capability.TYPE.NAME.
	Addr       string
	Shell      *ShellCapability
	Filesystem *FilesystemCapability
	Compaction *CompactionCapability
	Command    *CommandCapability
	Skills     *SkillsCapability
	Memory     *MemoryCapability
	// RunAsRange is the run_as argument's value, when set.
	RunAsRange *hcl.Range `json:"-"`
	DeclRange  hcl.Range
}

// RunAs is the manifest user the capability's commands run as ("" for
// the sandbox's default user).
func (c *Capability) RunAs() string {
	switch {
	case c.Shell != nil:
		return c.Shell.RunAs
	case c.Command != nil:
		return c.Command.RunAs
	}
	return ""
}

type ShellCapability struct {
	Timeout         time.Duration // default 120s
	MaxOutputTokens int
	// NeedsApproval guards exec_command.
	NeedsApproval ApprovalPolicy
	// RunAs is the manifest user exec_command and write_stdin sessions
	// run as; "" is the sandbox's default user.
	RunAs string `json:",omitempty"`
}

type FilesystemCapability struct {
	MaxImageBytes int64
	// NeedsApproval guards apply_patch.
	NeedsApproval ApprovalPolicy `json:",omitzero"`
}

type CompactionCapability struct {
	Threshold int64 // tokens; 0 = the SDK's default
}

type CommandCapability struct {
	Description string
	// Parameters is the JSON Schema object built from the parameters map.
	Parameters    json.RawMessage
	Command       []string
	Timeout       time.Duration
	NeedsApproval ApprovalPolicy
	// RunAs is the manifest user the command runs as; "" is the
	// sandbox's default user.
	RunAs string `json:",omitempty"`
}

type Agent struct {
	Name string
	// Hooks are the agent's hook blocks (hook.go), in the order written.
	Hooks        []*Hook
	Model        string
	Provider     string // provider address; "" = the unaliased openai provider
	Instructions string
	Sandbox      string   // sandbox instance address, "" for a plain agent
	Capabilities []string // capability addresses
	Handoffs     []string // agent names
	// MCPServers are the names of the agent's mcp_server blocks, in order.
	MCPServers   []string
	Tools        []AgentTool
	OutputSchema json.RawMessage // nil without output_schema
	MaxTurns     int             // 0 = default
	Settings     AgentSettings
	DeclRange    hcl.Range

	// ModelFallback are the models tried in order when Model is
	// unavailable (model.Unavailable), with the same provider.
	ModelFallback []string
	// HostedTools are the tools the model's service runs itself (tool
	// blocks with a type), in declaration order.
	HostedTools []HostedTool
	// HandoffFilters are the input filters of the agent's handoffs, by
	// the agent handed to; a handoff without one hands off the whole
	// conversation.
	HandoffFilters map[string]HandoffFilter

	// Budget bounds what this agent does within a run (nil: no budget).
	Budget *Budget
	// Guardrails are the names of the agent's guardrails, in order.
	Guardrails []string
}

type AgentTool struct {
	Name        string
	Agent       string // agent name
	Description string
	// NeedsApproval guards calls of this agent tool.
	NeedsApproval ApprovalPolicy `json:",omitzero"`
	DeclRange     hcl.Range
}

// HostedTool is a tool block with a type: a tool the agent's model
// service runs itself (an OpenAI hosted tool).
type HostedTool struct {
	Name string // the block's label
	Type string // web_search, file_search, code_interpreter, image_generation
	// Config is the tool's definition as the service's API takes it,
	// built by the provider type (registry.Type.DecodeHostedTool).
	Config    json.RawMessage
	DeclRange hcl.Range
}

// HandoffFilter is a handoff's input_filter: what of the conversation
// the agent handed to is given.
type HandoffFilter struct {
	// RemoveToolCalls drops every tool call and tool output (hosted ones
	// and the handoff's own included) and reasoning item.
	RemoveToolCalls bool `json:"remove_tool_calls,omitempty"`
	// KeepLast keeps only the last KeepLast items (0: all).
	KeepLast int `json:"keep_last,omitempty"`
}

// AgentSettings are an agent's model settings. The settings added after
// the first ones are left out of the JSON (the run digest) when unset,
// so that the digests of agents that don't set them stay as they were.
type AgentSettings struct {
	ReasoningEffort   string
	ReasoningSummary  string
	Verbosity         string
	Temperature       *float64
	TopP              *float64
	MaxOutputTokens   int64
	ParallelToolCalls *bool
	ToolChoice        string

	FrequencyPenalty     *float64          `json:",omitempty"`
	PresencePenalty      *float64          `json:",omitempty"`
	Truncation           string            `json:",omitempty"`
	Store                *bool             `json:",omitempty"`
	Metadata             map[string]string `json:",omitempty"`
	PromptCacheRetention string            `json:",omitempty"`
	PromptCacheMode      string            `json:",omitempty"`
	PromptCacheTTL       string            `json:",omitempty"`
	Include              []string          `json:",omitempty"`
}

// Budget is a budget block: limits on what a run (or one agent within a
// run) may spend. A zero limit is no limit. Budgets are not part of a
// run's digest: raising one resumes a run that ran out of it.
type Budget struct {
	// MaxTokens bounds the model tokens (input plus output, as the
	// provider reports them).
	MaxTokens int64
	// MaxToolCalls bounds the tool calls executed.
	MaxToolCalls int
	// MaxDuration bounds the time spent running, summed over the run's
	// attempts (time between applies does not count).
	MaxDuration time.Duration
	DeclRange   hcl.Range
}

type Run struct {
	Name      string
	ForEach   hcl.Expression
	DeclRange hcl.Range
}

// RunInstance is one run after for_each expansion. Its input may depend
// on upstream runs' outputs, so it is evaluated late with Input.
type RunInstance struct {
	Addr     string // run.NAME or run.NAME["key"]
	Name     string
	Key      string
	Agent    string // agent name
	Sandbox  string // sandbox instance address override, "" = the agent's
	MaxTurns int
	// Budget bounds the whole run, every agent in it included (nil: no
	// budget).
	Budget *Budget
	// Continue is the run instance whose conversation this run continues
	// (continue = run.NAME), "" for none. It is also in DependsOn; when
	// the run sets no sandbox and its agent names none, Sandbox is the
	// one the continued run's agent used.
	Continue string
	// Guardrails are the names of the run's own guardrails, in order
	// (its agents' guardrails are on the agents).
	Guardrails []string
	DependsOn  []string // addresses, from depends_on and from references
	// InputSandboxes are the sandbox instances the input refers to (for
	// their URLs), sorted.
	InputSandboxes []string
	InputExpr      hcl.Expression
	DeclRange      hcl.Range
	// Lifecycle holds the run's preconditions and postconditions (nil:
	// none; lifecycle.go).
	Lifecycle *Lifecycle
	// Hooks are the run's hook blocks (hook.go), in the order written.
	Hooks []*Hook

	// eachValue is each.value for a for_each instance (each.key is Key).
	eachValue cty.Value
	// continueAttr is the continue argument, resolved once every run is
	// decoded; sandboxSet says the run sets sandbox itself.
	continueAttr *hcl.Attribute
	sandboxSet   bool
}
