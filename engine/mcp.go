package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/engine/mcphost"
	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state"
)

// mcpListings caches each MCP server's tool list for one plan and apply:
// plan lists every server its runs use (the refresh of an MCP server),
// and apply reuses the lists instead of starting the servers again.
type mcpListings struct {
	mu    sync.Mutex
	tools map[string][]mcphost.ToolInfo
}

func (l *mcpListings) get(name string) ([]mcphost.ToolInfo, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.tools[name]
	return t, ok
}

func (l *mcpListings) put(name string, t []mcphost.ToolInfo) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.tools == nil {
		l.tools = map[string][]mcphost.ToolInfo{}
	}
	l.tools[name] = t
}

// runMCPServers lists the MCP servers the agents of a run use.
func runMCPServers(cfg *config.Config, ri *config.RunInstance) []string {
	if len(cfg.MCPServers) == 0 {
		return nil // plan's hot path: no agent closure to walk
	}
	set := map[string]bool{}
	for _, name := range cfg.AgentClosure(ri.Agent) {
		if a := cfg.Agents[name]; a != nil {
			for _, s := range a.MCPServers {
				set[s] = true
			}
		}
	}
	return slices.Sorted(maps.Keys(set))
}

// mcpServer is how the engine reaches server s; ws is the workspace of
// its sandbox for a stdio server that runs in one.
func (e *Engine) mcpServer(s *config.MCPServer, ws *sandbox.Workspace) mcphost.Server {
	return mcphost.Server{
		Name: s.Name, Command: s.Command, Env: s.Env, Dir: e.Config.Dir, Workspace: ws,
		URL: s.URL, Headers: s.Headers, AllowedTools: s.AllowedTools, Timeout: s.Timeout,
		Scrub: e.scrubber(),
	}
}

// refreshMCP lists the tools of every MCP server the runs use, as plan's
// refresh: host and HTTP servers are started or reached; a server inside
// a sandbox is listed when the sandbox runs (live), otherwise the run
// keeps the list recorded when it last ran. It returns the servers that
// could not be reached, with why: whether a plan needs them depends on
// which runs execute (unreachableMCP). A server that answers with tools
// the configuration cannot use fails the plan, naming it.
func (e *Engine) refreshMCP(ctx context.Context, st *state.State, live map[string]liveSandbox) (map[string]error, error) {
	needed := map[string]bool{}
	for _, ri := range e.Config.RunInstances {
		for _, s := range runMCPServers(e.Config, ri) {
			needed[s] = true
		}
	}
	names := slices.Sorted(maps.Keys(needed))
	errs := make([]error, len(names))
	unreached := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		s := e.Config.MCPServers[name]
		if s == nil {
			continue
		}
		if _, ok := e.mcp.get(name); ok {
			continue
		}
		var ws *sandbox.Workspace
		if s.Sandbox != "" {
			if live[s.Sandbox].status != sandbox.StatusRunning {
				continue
			}
			sb, err := e.openSandbox(ctx, st, s.Sandbox)
			if err != nil {
				continue
			}
			ws = e.workspace(s.Sandbox, sb)
		}
		wg.Go(func() {
			t, err := e.reachMCPServer(ctx, s, ws)
			if err != nil {
				unreached[i] = err
				return
			}
			if t, err = e.keepMCPTools(s, t); err != nil {
				errs[i] = err
				return
			}
			e.emit(Event{Type: EventRefresh, Address: s.Addr(), Message: "tools: " + mcpToolSummary(t)})
		})
	}
	wg.Wait()
	// The messages may quote a server's stderr or a tool's name.
	if err := errors.Join(errs...); err != nil {
		return nil, e.scrubErr(err)
	}
	var down map[string]error
	for i, err := range unreached {
		if err != nil {
			if down == nil {
				down = map[string]error{}
			}
			down[names[i]] = e.scrubErr(err)
		}
	}
	return down, e.scrubErr(e.checkMCPClashes())
}

// unreachableMCP decides what a plan does about the MCP servers that
// refreshMCP could not reach (down). A run that stays as it is does not
// need them. A run that executes with the tools it recorded when it last
// ran (the server's settings unchanged) gets a warning: apply needs the
// server. A run with no such record fails the plan: what its agents
// would get is unknown, and plan exists to say that before apply.
func (e *Engine) unreachableMCP(st *state.State, p *Plan, down map[string]error) error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(down)) {
		s := e.Config.MCPServers[name]
		var recorded, unknown []string
		for _, c := range p.Changes {
			ri := e.Config.RunInstances[c.Address]
			if c.Kind != KindRun || !executes(c.Action) || ri == nil || !slices.Contains(runMCPServers(e.Config, ri), name) {
				continue
			}
			if prev := st.Runs[c.Address]; e.recordedMCPTools(prev, s) {
				recorded = append(recorded, c.Address)
				c.Attributes[s.Addr()] = "(unreachable; recorded tools: " + recordedToolSummary(prev, s.Addr()) + ")"
			} else {
				unknown = append(unknown, c.Address)
			}
		}
		if n := len(unknown); n > 0 {
			errs = append(errs, fmt.Errorf("%s %s %s, which is unreachable, and %s no list of its tools from an earlier run to plan with: make the server reachable and plan again, or plan with -refresh=false to leave listing its tools to apply (%w)",
				strings.Join(unknown, ", "), plural(n, "uses", "use"), s.Addr(), plural(n, "has", "have"), down[name]))
			continue
		}
		if n := len(recorded); n > 0 {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s is unreachable, so %s %s planned with the tools %s recorded when %s last ran; apply needs the server to run %s. Plan with -refresh=false to skip reaching MCP servers. (%v)",
				s.Addr(), strings.Join(recorded, ", "), plural(n, "is", "are"), plural(n, "it", "they"), plural(n, "it", "they"), plural(n, "it", "them"), down[name]))
		}
	}
	return errors.Join(errs...)
}

// recordedToolSummary is the tools of the server at key that run prev
// recorded, as plan lists them.
func recordedToolSummary(prev *state.Run, key string) string {
	a := prev.Attributes[key+".tools"]
	if a.Sensitive {
		return "(sensitive)"
	}
	var names []string
	if err := json.Unmarshal(a.Value, &names); err != nil {
		return "(not readable)"
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// listMCP lists the tools of the run's MCP servers that this process has
// not listed yet (an apply of a saved plan), so the run's digest covers
// what the servers offer now; a server inside a sandbox is listed once
// the sandbox runs. The servers stop again: the run starts its own.
func (a *applier) listMCP(ctx context.Context, ri *config.RunInstance) error {
	e := a.e
	for _, name := range runMCPServers(e.Config, ri) {
		s := e.Config.MCPServers[name]
		if s == nil {
			continue
		}
		if _, ok := e.mcp.get(name); ok {
			continue
		}
		var ws *sandbox.Workspace
		if s.Sandbox != "" {
			sb, err := a.ensureRunning(ctx, s.Sandbox)
			if err != nil {
				return err
			}
			ws = e.workspace(s.Sandbox, sb)
		}
		t, err := e.reachMCPServer(ctx, s, ws)
		if err != nil {
			return err
		}
		if _, err := e.keepMCPTools(s, t); err != nil {
			return err
		}
	}
	return nil
}

// reachMCPServer lists every tool of server s (ws is its sandbox's
// workspace for a server inside one). An error means the server could
// not be reached or did not list its tools: one that answered is
// checked against its allowed_tools by keepMCPTools, so a plan can tell
// the two apart.
func (e *Engine) reachMCPServer(ctx context.Context, s *config.MCPServer, ws *sandbox.Workspace) ([]mcphost.ToolInfo, error) {
	srv := e.mcpServer(s, ws)
	srv.AllowedTools = nil
	t, err := mcphost.List(ctx, srv)
	if err != nil {
		return nil, fmt.Errorf("listing the tools of %s: %w", s.Addr(), err)
	}
	return t, nil
}

// keepMCPTools keeps, of the tools server s offers, those its
// allowed_tools name (all of them without it), in the server's order as
// mcphost.Connect does, and remembers them, scrubbed, for this process.
// An allowed tool the server does not offer fails it, and so do two
// tools the model would see under one name.
func (e *Engine) keepMCPTools(s *config.MCPServer, offered []mcphost.ToolInfo) ([]mcphost.ToolInfo, error) {
	t := offered
	if s.AllowedTools != nil {
		t = nil
		names := map[string]bool{}
		for _, o := range offered {
			names[o.Name] = true
			if slices.Contains(s.AllowedTools, o.Name) {
				t = append(t, o)
			}
		}
		var missing []string
		for _, a := range s.AllowedTools {
			if !names[a] {
				missing = append(missing, fmt.Sprintf("%q", a))
			}
		}
		if len(missing) > 0 {
			return nil, fmt.Errorf("%s offers no tool named %s (allowed_tools); it offers: %s", s.Addr(), strings.Join(missing, ", "), strings.Join(slices.Sorted(maps.Keys(names)), ", "))
		}
	}
	t = scrubMCPTools(e.scrubber(), t)
	if err := checkMCPServerNames(s.Name, t); err != nil {
		return nil, err
	}
	e.mcp.put(s.Name, t)
	return t, nil
}

// scrubMCPTools returns listed as the model and plan may see it: the
// sensitive values in each tool's name, description and input schema
// (its strings and keys) masked. A masked name is made a function name
// again; the server is still called by its own name.
func scrubMCPTools(sc *sandbox.Scrubber, listed []mcphost.ToolInfo) []mcphost.ToolInfo {
	if !sc.Active() {
		return listed
	}
	out := make([]mcphost.ToolInfo, len(listed))
	for i, t := range listed {
		if name := sc.String(t.Name); name != t.Name {
			t.Name, t.Exposed = name, model.SafeToolName(name)
		}
		t.Description = sc.String(t.Description)
		t.InputSchema = scrubJSON(sc, t.InputSchema)
		out[i] = t
	}
	return out
}

// checkMCPServerNames reports two tools of server that the model would
// get under the same function name (sanitized or cut at 64 characters):
// it could call only one of them.
func checkMCPServerNames(server string, listed []mcphost.ToolInfo) error {
	seen := map[string]string{}
	for _, t := range listed {
		if prev, ok := seen[t.Exposed]; ok {
			return fmt.Errorf("mcp_server.%s lists the tools %q and %q, which the model would both get as %q (a function name is 1 to 64 letters, digits, _ and -), so one of them could not be called: list only one of them in mcp_server.%s's allowed_tools, or rename one in the server", server, prev, t.Name, t.Exposed, server)
		}
		seen[t.Exposed] = t.Name
	}
	return nil
}

// checkMCPClashes reports a listed MCP tool that an agent would get under
// the name of another of its tools, naming both owners.
func (e *Engine) checkMCPClashes() error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(e.Config.Agents)) {
		a := e.Config.Agents[name]
		if len(a.MCPServers) == 0 {
			continue
		}
		owners := builtinToolOwners(e.Config, a)
		for _, sn := range a.MCPServers {
			listed, ok := e.mcp.get(sn)
			if !ok {
				continue
			}
			if err := addMCPOwners(owners, name, sn, listed); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// addMCPOwners records server's tools in owners (tool name -> what gives
// it), failing on the first clash.
func addMCPOwners(owners map[string]string, agent, server string, listed []mcphost.ToolInfo) error {
	who := "mcp_server." + server
	for _, t := range listed {
		if prev, ok := owners[t.Exposed]; ok && prev != who {
			what := fmt.Sprintf("tool %q", t.Exposed)
			if t.Name != t.Exposed {
				what = fmt.Sprintf("tool %q (the server's %q)", t.Exposed, t.Name)
			}
			return fmt.Errorf("agent %q gets %s from both %s and %s; the model could not tell them apart: leave it out of %s's allowed_tools, or give the agent only one of them", agent, what, prev, who, who)
		}
		owners[t.Exposed] = who
	}
	return nil
}

// builtinToolOwners maps the function names of an agent's own tools to
// what gives them.
func builtinToolOwners(cfg *config.Config, a *config.Agent) map[string]string {
	owners := map[string]string{}
	for _, addr := range a.Capabilities {
		c := cfg.Capabilities[capKey(addr)]
		if c == nil {
			continue
		}
		switch {
		case c.Shell != nil:
			// write_stdin comes with exec_command in a sandbox that runs
			// interactive sessions.
			owners["exec_command"] = addr
			owners["write_stdin"] = addr
		case c.Filesystem != nil:
			owners["apply_patch"] = addr
			owners["view_image"] = addr
		case c.Command != nil:
			owners[c.Name] = addr
		case c.Skills != nil && c.Skills.Lazy:
			owners[tools.LoadSkillToolName] = addr
		}
	}
	for _, h := range a.Handoffs {
		owners[tools.HandoffToolName(h)] = "the handoff to agent." + h
	}
	for _, t := range a.Tools {
		owners[tools.FunctionName(t.Name)] = fmt.Sprintf("the agent tool %q", t.Name)
	}
	return owners
}

// mcpInputs adds the digest inputs and attributes of the run's MCP
// servers: each server's settings (sensitive values left out) and the
// names, descriptions and schemas of its tools. A server whose tools are
// not listed (its sandbox is not running at plan time) keeps the tools
// its run recorded, as long as its settings did not change.
func (e *Engine) mcpInputs(st *state.State, ri *config.RunInstance, inputs map[string]string, attrs *attributes) {
	prev := st.Runs[ri.Addr]
	for _, name := range runMCPServers(e.Config, ri) {
		s := e.Config.MCPServers[name]
		if s == nil {
			continue
		}
		key := s.Addr()
		settings := setMCPSettings(attrs, s)
		listed, ok := e.mcp.get(name)
		if !ok {
			if recordedMCPTools(prev, attrs, key) {
				inputs[key] = prev.DigestInputs[key]
				for p, v := range prev.Attributes {
					if p == key+".tools" || strings.HasPrefix(p, key+".tools.") {
						attrs.m[p] = v
					}
				}
				continue
			}
			attrs.set(key+".tools", "(known after its sandbox starts)")
			inputs[key] = digestJSON(map[string]any{"settings": settings, "tools": "unlisted"})
			continue
		}
		setMCPToolAttributes(attrs, key, listed)
		inputs[key] = mcpDigest(settings, listed)
	}
}

// recordedMCPTools reports whether run prev recorded the tools of the
// server at key with the settings attrs holds, so a plan that cannot
// list the server may take them.
func recordedMCPTools(prev *state.Run, attrs *attributes, key string) bool {
	return prev != nil && prev.DigestInputs[key] != "" && sameAttributes(prev.Attributes, attrs.m, key+".", key+".tools")
}

// recordedMCPTools reports whether run prev recorded the tools of server
// s under its present settings (mcpInputs takes them then).
func (e *Engine) recordedMCPTools(prev *state.Run, s *config.MCPServer) bool {
	attrs := newAttributes(e.scrubber())
	setMCPSettings(attrs, s)
	return recordedMCPTools(prev, attrs, s.Addr())
}

func setMCPToolAttributes(attrs *attributes, key string, listed []mcphost.ToolInfo) {
	names := make([]string, 0, len(listed))
	for _, t := range listed {
		names = append(names, t.Exposed)
		attrs.setDigest(key+".tools."+t.Exposed, map[string]any{"name": t.Name, "description": t.Description, "input_schema": string(t.InputSchema)})
	}
	attrs.set(key+".tools", names)
}

// setMCPSettings records the settings of s in attrs and returns them.
func setMCPSettings(attrs *attributes, s *config.MCPServer) map[string]any {
	settings := mcpSettings(s)
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		attrs.set(s.Addr()+"."+k, settings[k])
	}
	return settings
}

func mcpDigest(settings map[string]any, listed []mcphost.ToolInfo) string {
	return digestJSON(map[string]any{"settings": settings, "tools": listed})
}

// mcpSettings are the settings of s a run's digest covers: what decides
// which server runs and what its tools do. Sensitive values are left out
// (a rotated token does not re-run anything); so is the timeout.
func mcpSettings(s *config.MCPServer) map[string]any {
	out := map[string]any{}
	if len(s.Command) > 0 {
		out["command"] = s.Command
	}
	if s.URL != "" {
		out["url"] = s.URL
	}
	if s.Sandbox != "" {
		out["sandbox"] = s.Sandbox
	}
	for k, v := range s.Env {
		if slices.Contains(s.SensitiveEnv, k) {
			v = "(sensitive)"
		}
		out["env."+k] = v
	}
	for k, v := range s.Headers {
		if slices.Contains(s.SensitiveHeaders, k) {
			v = "(sensitive)"
		}
		out["headers."+k] = v
	}
	if s.AllowedTools != nil {
		out["allowed_tools"] = s.AllowedTools
	}
	if !s.NeedsApproval.IsZero() {
		out["needs_approval"] = s.NeedsApproval.Value()
	}
	return out
}

// sameAttributes reports whether a and b agree on every path with prefix,
// except the paths under skip.
func sameAttributes(a, b map[string]state.Attribute, prefix, skip string) bool {
	under := func(p string) bool {
		return strings.HasPrefix(p, prefix) && p != skip && !strings.HasPrefix(p, skip+".")
	}
	for p, v := range b {
		if under(p) && !sameAttribute(a[p], v) {
			return false
		}
	}
	for p := range a {
		if _, ok := b[p]; under(p) && !ok {
			return false
		}
	}
	return true
}

// mcpSessions are the MCP servers of one run, started when the run
// starts and stopped when it ends.
type mcpSessions struct {
	sessions map[string]*mcphost.Session
	logs     []*mcpLog
	// sc masks sensitive values in the tools' definitions.
	sc *sandbox.Scrubber
}

// startMCP starts the run's MCP servers: on the host, in their sandbox
// (running by now) or over HTTP. Each server's stderr goes to its log
// under the state directory, named for the state's lineage.
func (e *Engine) startMCP(ctx context.Context, lineage string, ri *config.RunInstance, workspaces map[string]*sandbox.Workspace, resume bool) (*mcpSessions, error) {
	ms := &mcpSessions{sessions: map[string]*mcphost.Session{}, sc: e.scrubber()}
	for _, name := range runMCPServers(e.Config, ri) {
		s := e.Config.MCPServers[name]
		if s == nil {
			ms.close()
			return nil, fmt.Errorf("mcp_server.%s is not declared", name)
		}
		var ws *sandbox.Workspace
		if s.Sandbox != "" {
			if ws = workspaces[s.Sandbox]; ws == nil {
				ms.close()
				return nil, fmt.Errorf("%s runs in %s, which is not running", s.Addr(), s.Sandbox)
			}
		}
		log, err := e.openMCPLog(lineage, ri.Addr, name, resume)
		if err != nil {
			ms.close()
			return nil, err
		}
		ms.logs = append(ms.logs, log)
		srv := e.mcpServer(s, ws)
		srv.Log = log
		sess, err := mcphost.Connect(ctx, srv)
		if err != nil {
			ms.close()
			return nil, fmt.Errorf("starting %s: %w (its stderr is in %s)", s.Addr(), err, log.path)
		}
		ms.sessions[name] = sess
		e.mcp.put(name, scrubMCPTools(ms.sc, sess.Tools()))
	}
	return ms, nil
}

// close stops every server and flushes the logs.
func (ms *mcpSessions) close() {
	if ms == nil {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(ms.sessions)) {
		ms.sessions[name].Close()
	}
	for _, l := range ms.logs {
		l.Close()
	}
	ms.sessions, ms.logs = nil, nil
}

// addTools gives each agent the tools of its MCP servers, scrubbed,
// checking that no name clashes with another of its tools, and their
// approval policies.
func (ms *mcpSessions) addTools(cfg *config.Config, agents map[string]*agentloop.Agent) error {
	for _, name := range slices.Sorted(maps.Keys(agents)) {
		a := cfg.Agents[name]
		if a == nil || len(a.MCPServers) == 0 {
			continue
		}
		ra := agents[name]
		owners := builtinToolOwners(cfg, a)
		for _, sn := range a.MCPServers {
			sess := ms.sessions[sn]
			if sess == nil {
				return fmt.Errorf("mcp_server.%s was not started", sn)
			}
			listed := sess.Tools()
			infos := scrubMCPTools(ms.sc, listed)
			if err := checkMCPServerNames(sn, infos); err != nil {
				return err
			}
			if err := addMCPOwners(owners, name, sn, infos); err != nil {
				return err
			}
			policy := cfg.MCPServers[sn].NeedsApproval
			for i, t := range sess.AgentTools() {
				ra.Tools = append(ra.Tools, scrubbedTool{Tool: t, def: scrubDefinition(ms.sc, t.Definition(), infos[i]), sc: ms.sc})
				setApproval(ra, infos[i].Exposed, policy.ForTool(listed[i].Name))
			}
		}
	}
	return nil
}

// scrubbedTool is an MCP tool offered to the model under a scrubbed
// definition; calls still reach the server's tool by its own name, and
// their errors, which name it, are scrubbed as its results are.
type scrubbedTool struct {
	tools.Tool
	def model.Tool
	sc  *sandbox.Scrubber
}

func (t scrubbedTool) Definition() model.Tool { return t.def }

func (t scrubbedTool) Call(ctx context.Context, arguments string) (tools.Output, error) {
	out, err := t.Tool.Call(ctx, arguments)
	if err != nil {
		if msg := t.sc.String(err.Error()); msg != err.Error() {
			err = &scrubbedError{msg: msg, err: err}
		}
	}
	return out, err
}

// scrubDefinition is def with the name, description and input schema of
// info (scrubbed); a description def made up names the tool as info does.
func scrubDefinition(sc *sandbox.Scrubber, def model.Tool, info mcphost.ToolInfo) model.Tool {
	def.Name = info.Exposed
	def.Description = sc.String(def.Description)
	def.Parameters = info.InputSchema
	return def
}

// mcpLogLimit bounds one server's log per run attempt.
const mcpLogLimit = 1 << 20

// mcpLog is an MCP server's stderr as the run keeps it: scrubbed, and
// cut after mcpLogLimit bytes.
type mcpLog struct {
	path   string
	mu     sync.Mutex
	f      *os.File
	stream *sandbox.Stream
	n      int64
	cut    bool
}

// MCPLogPath is where the stderr of a run's MCP server is kept, in the
// state of lineage (state files given with -state share the directory).
func (e *Engine) MCPLogPath(lineage, run, server string) string {
	return e.State.Abs(filepath.Join("logs", state.ScopedName(lineage, run)+".mcp_server."+server+".log"))
}

func (e *Engine) openMCPLog(lineage, run, server string, resume bool) (*mcpLog, error) {
	path := e.MCPLogPath(lineage, run, server)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if !resume {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the log of mcp_server.%s: %w", server, err)
	}
	return &mcpLog{path: path, f: f, stream: e.scrubber().NewStream()}, nil
}

func (l *mcpLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.write(l.stream.Write(string(p)))
	return len(p), nil
}

func (l *mcpLog) write(s string) {
	if l.cut || s == "" {
		return
	}
	if l.n+int64(len(s)) > mcpLogLimit {
		s = s[:mcpLogLimit-l.n] + "\n[agentctl: log cut at 1 MiB]\n"
		l.cut = true
	}
	n, _ := l.f.WriteString(s)
	l.n += int64(n)
}

// Close writes what the scrubber held back and closes the file.
func (l *mcpLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.write(l.stream.Flush())
	return l.f.Close()
}

// mcpPlanAttributes shows, on a run's change, the tools each of its MCP
// servers gives (the refresh plan made).
func (e *Engine) mcpPlanAttributes(ri *config.RunInstance, attrs map[string]string) {
	for _, name := range runMCPServers(e.Config, ri) {
		s := e.Config.MCPServers[name]
		if s == nil {
			continue
		}
		if listed, ok := e.mcp.get(name); ok {
			attrs[s.Addr()] = "tools: " + mcpToolSummary(listed)
		} else if s.Sandbox != "" {
			attrs[s.Addr()] = "(tools listed once " + s.Sandbox + " runs)"
		} else {
			attrs[s.Addr()] = "(tools listed at apply: plan ran without -refresh)"
		}
	}
}

// mcpToolSummary is a server's tools as plan lists them.
func mcpToolSummary(listed []mcphost.ToolInfo) string {
	names := make([]string, 0, len(listed))
	for _, t := range listed {
		names = append(names, t.Exposed)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
