package config

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/go-version"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/agentctl/agentctl/providers/registry"
)

// Options are the inputs of Load besides the configuration itself.
type Options struct {
	// Vars are -var NAME=VALUE arguments, in command-line order.
	Vars []string
	// VarFiles are -var-file paths (HCL, or JSON when they end in .json),
	// in command-line order.
	VarFiles []string
	// Environ is the environment (os.Environ()): AGENTCTL_VAR_name and
	// env() read from here, never from the process.
	Environ []string
	// Registry holds the provider types provider blocks may use and
	// decodes their settings: providers/builtin.Registry() for the types
	// agentctl ships, or a registry of a test's own. Load refuses nil.
	Registry *registry.Registry
	// Values set variables after every other source (agentctl test's
	// variables blocks), each converted to its variable's type.
	Values map[string]Value
	// ProviderOverrides replace model providers with scripted ones
	// (agentctl test's override_provider blocks), by provider key
	// ("openai", "openai.ALIAS"). Each body is decoded as a provider
	// "scripted" block; the provider keeps its address, so the agents
	// that use it get the scripted replies.
	ProviderOverrides map[string]ProviderOverride
	// NoSecrets loads for validate: an encryption key whose environment
	// variable is unset is not an error (a CI validate step has no
	// secrets); a key that is set is still checked.
	NoSecrets bool
}

// Value is a variable value given with where it was written.
type Value struct {
	Value cty.Value
	Range hcl.Range
}

// ProviderOverride is the body of a scripted provider that replaces a
// model provider, and where it was declared.
type ProviderOverride struct {
	Body      hcl.Body
	DeclRange hcl.Range
}

// loader carries the state of one Load.
type loader struct {
	cfg   *Config
	opts  Options
	reg   *registry.Registry
	diags hcl.Diagnostics
	col   *sensitiveCollector
	funcs map[string]function.Function

	// raw blocks by type, after the structural pass
	varBlocks      []*hcl.Block
	localAttrs     map[string]*hcl.Attribute
	outputBlocks   []*hcl.Block
	providerBlocks []*hcl.Block
	manifestBlocks []*hcl.Block
	sandboxBlocks  []*hcl.Block
	capBlocks      []*hcl.Block
	agentBlocks    []*hcl.Block
	runBlocks      []*hcl.Block
	mcpBlocks      []*hcl.Block
	guardBlocks    []*hcl.Block
	importBlocks   []*hcl.Block

	vars   map[string]cty.Value
	locals map[string]cty.Value
	// dependsOn are the depends_on traversals of each run instance,
	// resolved once every run is known.
	dependsOn map[string][]hcl.Traversal
	// sandboxAddrs caches sandboxAddrValue.
	sandboxAddrs cty.Value
	// valueRanges are where variable values set in files came from.
	valueRanges map[string]hcl.Range

	// capRefs are where each agent refers to each capability, by
	// "AGENT capability.TYPE.NAME".
	capRefs map[string]hcl.Range
	// mcpRefs are where each agent refers to each MCP server, by
	// "AGENT SERVER".
	mcpRefs map[string]hcl.Range

	// hostedBlocks are the tool blocks with a type, decoded by the
	// agent's model provider once every agent is known; settingRanges are
	// the values of each agent's model settings, by agent and setting.
	hostedBlocks  []hostedBlock
	settingRanges map[string]map[string]hcl.Range

	// scriptRefs are the agent names used by scripted provider scripts.
	scriptRefs []nameRef
	// declared names, filled by the structural pass, for reference checks
	names map[string]map[string]hcl.Range
}

type nameRef struct {
	name string
	rng  hcl.Range
}

var rootSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "agentctl"},
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
		{Type: "output", LabelNames: []string{"name"}},
		{Type: "provider", LabelNames: []string{"type"}},
		{Type: "manifest", LabelNames: []string{"name"}},
		{Type: "sandbox", LabelNames: []string{"name"}},
		{Type: "capability", LabelNames: []string{"type", "name"}},
		{Type: "agent", LabelNames: []string{"name"}},
		{Type: "run", LabelNames: []string{"name"}},
		{Type: "mcp_server", LabelNames: []string{"name"}},
		{Type: "guardrail", LabelNames: []string{"name"}},
		{Type: "import"},
	},
}

// Load reads, decodes and validates the configuration at path: a .hcl
// file, or a directory whose *.hcl files (except *.test.hcl) are merged.
// The returned Config is nil only when nothing could be parsed; it may be
// incomplete when diagnostics contain errors.
func Load(path string, opts Options) (*Config, hcl.Diagnostics) {
	if opts.Registry == nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "No provider registry",
			Detail:   "config.Load needs Options.Registry, the provider types the configuration may use: providers/builtin.Registry() for the types agentctl ships.",
		}}
	}
	l := &loader{
		cfg: &Config{
			Path:             path,
			Files:            map[string]*hcl.File{},
			Variables:        map[string]*Variable{},
			Locals:           map[string]*Local{},
			Outputs:          map[string]*Output{},
			Providers:        map[string]*Provider{},
			Manifests:        map[string]*Manifest{},
			Sandboxes:        map[string]*Sandbox{},
			Capabilities:     map[string]*Capability{},
			Agents:           map[string]*Agent{},
			Runs:             map[string]*Run{},
			MCPServers:       map[string]*MCPServer{},
			Guardrails:       map[string]*Guardrail{},
			Imports:          map[string]*Import{},
			SandboxInstances: map[string]*SandboxInstance{},
			RunInstances:     map[string]*RunInstance{},
			Settings:         Settings{Parallelism: 10},
		},
		opts:          opts,
		reg:           opts.Registry,
		col:           &sensitiveCollector{},
		localAttrs:    map[string]*hcl.Attribute{},
		names:         map[string]map[string]hcl.Range{},
		dependsOn:     map[string][]hcl.Traversal{},
		capRefs:       map[string]hcl.Range{},
		mcpRefs:       map[string]hcl.Range{},
		settingRanges: map[string]map[string]hcl.Range{},
	}
	l.cfg.registry = l.reg
	files, err := configFiles(path)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Failed to read configuration",
			Detail:   fmt.Sprintf("%s. Give a .hcl file or a directory holding *.hcl files.", err),
		}}
	}
	info, _ := os.Stat(path)
	dir := path
	if info != nil && !info.IsDir() {
		dir = filepath.Dir(path)
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	l.cfg.Dir = dir
	l.funcs = functions(dir, opts.Environ, l.col)
	l.cfg.funcs = l.funcs
	l.cfg.col = l.col
	cfg := l.cfg
	cfg.reach = sync.OnceValue(func() *sandboxReach { return newSandboxReach(cfg) })

	var bodies []*hcl.File
	for _, f := range files {
		file, diags := parseFile(f)
		l.diags = append(l.diags, diags...)
		if file != nil {
			l.cfg.Files[f] = file
			if !diags.HasErrors() {
				bodies = append(bodies, file)
			}
		}
	}
	if l.diags.HasErrors() {
		return l.cfg, CapDiagnostics(l.diags)
	}
	for _, f := range bodies {
		l.structure(f.Body)
	}
	l.decodeAll()
	return l.cfg, CapDiagnostics(l.diags)
}

// configFiles lists the files of the configuration at path.
func configFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("no configuration at %s", path)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	var files []string
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".hcl") || strings.HasSuffix(n, ".test.hcl") || strings.HasSuffix(n, ".vars.hcl") || strings.HasPrefix(n, ".") {
			continue
		}
		files = append(files, filepath.Join(path, n))
	}
	sort.Strings(files)
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.hcl files in %s", path)
	}
	return files, nil
}

// structure sorts the top-level blocks of one file and records declared
// names, reporting duplicates.
func (l *loader) structure(body hcl.Body) {
	content, diags := body.Content(rootSchema)
	l.diags = append(l.diags, diags...)
	for _, b := range content.Blocks {
		switch b.Type {
		case "agentctl":
			if l.cfg.Settings.DeclRange.Filename != "" {
				l.errorf(b.DefRange, "Duplicate agentctl block",
					"An agentctl block was already declared at %s. Merge the two blocks.", rangeString(l.cfg.Settings.DeclRange))
				continue
			}
			l.cfg.Settings.DeclRange = b.DefRange
			l.decodeSettings(b)
		case "locals":
			attrs, diags := b.Body.JustAttributes()
			l.diags = append(l.diags, diags...)
			for name, a := range attrs {
				if prev, ok := l.localAttrs[name]; ok {
					l.errorf(a.NameRange, "Duplicate local value",
						"A local value named %q was already defined at %s. Local value names must be unique.", name, rangeString(prev.NameRange))
					continue
				}
				if !hclsyntax.ValidIdentifier(name) {
					l.errorf(a.NameRange, "Invalid local value name", "%q is not a valid name: use letters, digits, underscores and dashes, starting with a letter.", name)
					continue
				}
				l.localAttrs[name] = a
				l.declare("local", name, a.NameRange)
			}
		case "variable":
			if l.declareBlock(b, "variable", b.Labels[0]) {
				l.varBlocks = append(l.varBlocks, b)
			}
		case "output":
			if l.declareBlock(b, "output", b.Labels[0]) {
				l.outputBlocks = append(l.outputBlocks, b)
			}
		case "provider":
			l.providerBlocks = append(l.providerBlocks, b)
		case "manifest":
			if l.declareBlock(b, "manifest", b.Labels[0]) {
				l.manifestBlocks = append(l.manifestBlocks, b)
			}
		case "sandbox":
			if l.declareBlock(b, "sandbox", b.Labels[0]) {
				l.sandboxBlocks = append(l.sandboxBlocks, b)
			}
		case "capability":
			if !l.validName(b, b.Labels[1], 1) {
				continue
			}
			if l.declareBlock(b, "capability", b.Labels[0]+"."+b.Labels[1]) {
				l.capBlocks = append(l.capBlocks, b)
			}
		case "agent":
			if l.declareBlock(b, "agent", b.Labels[0]) {
				l.agentBlocks = append(l.agentBlocks, b)
			}
		case "run":
			if l.declareBlock(b, "run", b.Labels[0]) {
				l.runBlocks = append(l.runBlocks, b)
			}
		case "mcp_server":
			if l.declareBlock(b, "mcp_server", b.Labels[0]) {
				l.mcpBlocks = append(l.mcpBlocks, b)
			}
		case "guardrail":
			if l.declareBlock(b, "guardrail", b.Labels[0]) {
				l.guardBlocks = append(l.guardBlocks, b)
			}
		case "import":
			l.importBlocks = append(l.importBlocks, b)
		}
	}
}

func (l *loader) declare(kind, name string, rng hcl.Range) {
	m := l.names[kind]
	if m == nil {
		m = map[string]hcl.Range{}
		l.names[kind] = m
	}
	m[name] = rng
}

func (l *loader) declared(kind, name string) bool {
	_, ok := l.names[kind][name]
	return ok
}

func (l *loader) declaredNames(kind string) []string {
	var ns []string
	for n := range l.names[kind] {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// validName checks that label i of b is an identifier.
func (l *loader) validName(b *hcl.Block, name string, i int) bool {
	if hclsyntax.ValidIdentifier(name) {
		return true
	}
	l.errorf(b.LabelRanges[i], fmt.Sprintf("Invalid %s name", b.Type),
		"%q is not a valid name: a name must start with a letter or underscore and may contain only letters, digits, underscores, and dashes.", name)
	return false
}

// declareBlock records a named block, reporting invalid and duplicate names.
func (l *loader) declareBlock(b *hcl.Block, kind, name string) bool {
	if kind != "capability" && !l.validName(b, name, 0) {
		return false
	}
	if prev, ok := l.names[kind][name]; ok {
		l.errorf(b.DefRange, fmt.Sprintf("Duplicate %s block", kind),
			"A %s named %q was already declared at %s. Names must be unique per block type: rename or remove one of them.",
			kind, name, rangeString(prev))
		return false
	}
	l.declare(kind, name, b.DefRange)
	return true
}

func (l *loader) decodeSettings(b *hcl.Block) {
	content, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "required_version"}, {Name: "parallelism"},
	}, Blocks: append(backendBlockSchema.Blocks[:len(backendBlockSchema.Blocks):len(backendBlockSchema.Blocks)], encryptionBlockSchema)})
	l.diags = append(l.diags, diags...)
	l.decodeBackend(content.Blocks)
	l.decodeEncryption(content.Blocks)
	if a, ok := content.Attributes["required_version"]; ok {
		if s, ok := l.staticString(a); ok {
			l.cfg.Settings.RequiredVersion = s
			cons, err := version.NewConstraint(s)
			if err != nil {
				l.errorf(a.Expr.Range(), "Invalid required_version", "%q is not a version constraint: %s. Write a constraint like \">= 0.1.0\".", s, err)
			} else if v := version.Must(version.NewVersion(Version)); !cons.Check(v) {
				l.errorf(a.Expr.Range(), "Unsupported agentctl version",
					"This configuration requires agentctl %s, but this is agentctl %s. Use a matching agentctl release or relax required_version.", s, Version)
			}
		}
	}
	if a, ok := content.Attributes["parallelism"]; ok {
		v, diags := a.Expr.Value(nil)
		l.diags = append(l.diags, diags...)
		if !diags.HasErrors() {
			if n, ok := l.toInt(v, a.Expr.Range(), "parallelism"); ok {
				if n < 1 {
					l.errorf(a.Expr.Range(), "Invalid parallelism", "parallelism must be at least 1, got %d.", n)
				} else {
					l.cfg.Settings.Parallelism = n
				}
			}
		}
	}
}

// staticString evaluates an attribute that may not reference anything.
func (l *loader) staticString(a *hcl.Attribute) (string, bool) {
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		l.diags = append(l.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid " + a.Name,
			Detail:   fmt.Sprintf("%s must be a literal string; it can't use variables or functions.", a.Name),
			Subject:  a.Expr.Range().Ptr(),
		})
		return "", false
	}
	return l.toString(v, a.Expr.Range(), a.Name)
}

// decodeAll decodes every block in dependency order.
func (l *loader) decodeAll() {
	l.decodeVariables()
	l.decodeLocals()
	for _, b := range l.providerBlocks {
		l.decodeProvider(b)
	}
	for _, b := range l.manifestBlocks {
		l.decodeManifest(b)
	}
	for _, b := range l.capBlocks {
		l.decodeCapability(b)
	}
	for _, b := range l.sandboxBlocks {
		l.decodeSandbox(b)
	}
	for _, b := range l.importBlocks {
		l.decodeImport(b)
	}
	for _, b := range l.mcpBlocks {
		l.decodeMCPServer(b)
	}
	for _, b := range l.agentBlocks {
		l.decodeAgent(b)
	}
	for _, b := range l.guardBlocks {
		l.decodeGuardrail(b)
	}
	l.checkGuardrails()
	l.checkModelFeatures()
	l.applyOverrides()
	l.checkMCPToolNames()
	l.checkMemory()
	l.checkScripts()
	for _, b := range l.runBlocks {
		l.decodeRun(b)
	}
	l.resolveContinues()
	l.checkScriptRuns()
	l.checkRunAs()
	l.checkApprovalGaps()
	for _, b := range l.outputBlocks {
		l.decodeOutput(b)
	}
	l.cfg.vars = l.vars
	l.cfg.locals = l.locals
	l.cfg.varsObj, l.cfg.localsObj = objectOf(l.vars), objectOf(l.locals)
	l.validateLate()
	if l.diags.HasErrors() {
		return
	}
	_, diags := l.cfg.DependencyGraph()
	l.diags = append(l.diags, diags...)
}

func (l *loader) errorf(rng hcl.Range, summary, detail string, args ...any) {
	r := rng
	l.diags = append(l.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(detail, args...),
		Subject:  &r,
	})
}

func rangeString(r hcl.Range) string {
	return fmt.Sprintf("%s:%d,%d", r.Filename, r.Start.Line, r.Start.Column)
}
