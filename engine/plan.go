package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine/agentmemory"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/manifest"
	"github.com/agentctl/agentctl/state"
)

// Plan diffs the configuration against st. With opts.Refresh it first asks
// the providers whether the sandboxes still exist.
func (e *Engine) Plan(ctx context.Context, st *state.State, opts PlanOptions) (_ *Plan, err error) {
	ctx, span := e.startSpan(ctx, "plan", attrDestroy.Bool(opts.Destroy))
	defer func() { endSpan(span, err) }()
	p, err := e.plan(ctx, st, opts)
	if p != nil && span.IsRecording() {
		n := 0
		for _, c := range p.Changes {
			if c.Action != ActionNoop {
				n++
			}
		}
		span.SetAttributes(attrChanges.Int(n))
	}
	return p, err
}

func (e *Engine) plan(ctx context.Context, st *state.State, opts PlanOptions) (*Plan, error) {
	p := &Plan{Destroy: opts.Destroy, Targets: opts.Targets, Excludes: opts.Excludes, Replace: opts.Replace, Lineage: st.Lineage, Serial: st.Serial, RefreshOnly: opts.RefreshOnly}
	if err := checkExcludes(e.Config, st, opts.Excludes); err != nil {
		return nil, err
	}
	if opts.RefreshOnly {
		return e.planRefreshOnly(ctx, st, p)
	}
	live := map[string]liveSandbox{}
	if opts.Refresh {
		var err error
		if live, err = e.refresh(ctx, st); err != nil {
			return nil, err
		}
	}
	if opts.Destroy {
		for _, addr := range slices.Sorted(maps.Keys(st.Sandboxes)) {
			p.Changes = append(p.Changes, &Change{Address: addr, Kind: KindSandbox, Action: ActionDelete, Reasons: leftElsewhere([]string{"destroy"}, live[addr])})
		}
		for _, addr := range slices.Sorted(maps.Keys(st.Runs)) {
			p.Changes = append(p.Changes, &Change{Address: addr, Kind: KindRun, Action: ActionForget, Reasons: []string{"destroy"}})
		}
		for _, addr := range slices.Sorted(maps.Keys(st.Chats)) {
			p.Changes = append(p.Changes, &Change{Address: addr, Kind: KindChat, Action: ActionForget, Reasons: []string{"destroy"}})
		}
		p.filterTargets(e.Config, opts.Targets)
		p.filterExcludes(e.Config, opts.Excludes)
		sortChanges(p.Changes)
		return p, nil
	}
	cfg := e.Config
	sbDigest := map[string]string{} // sandbox addr -> config+manifest digest
	mcache := map[string]*manifestDigests{}
	for _, addr := range slices.Sorted(maps.Keys(cfg.SandboxInstances)) {
		c, digest, err := e.planSandbox(ctx, st, live, mcache, addr, slices.Contains(opts.Replace, addr), opts.Apply)
		if err != nil {
			return nil, err
		}
		if digest != "" {
			sbDigest[addr] = digest // else known once apply has copied its manifest
		}
		p.Changes = append(p.Changes, c)
	}
	for _, addr := range slices.Sorted(maps.Keys(st.Sandboxes)) {
		if _, ok := cfg.SandboxInstances[addr]; !ok {
			p.Changes = append(p.Changes, &Change{Address: addr, Kind: KindSandbox, Action: ActionDelete, Reasons: leftElsewhere([]string{"no longer in the configuration"}, live[addr])})
		}
	}
	// The cache only spares reading unchanged trees again: plan does not
	// fail for want of writing it (apply reports that).
	_ = e.digestCache().Save()
	order, err := e.runOrder()
	if err != nil {
		return nil, err
	}
	var unreachable map[string]error // MCP servers plan could not list
	if opts.Refresh {
		if unreachable, err = e.refreshMCP(ctx, st, live); err != nil {
			return nil, err
		}
	}
	if err := e.resolveSkills(ctx, nil); err != nil {
		return nil, err
	}
	eval := newPlanEvaluators(cfg, st)
	for _, addr := range order {
		c, err := e.planRun(ctx, st, p, sbDigest, eval, addr, slices.Contains(opts.Replace, addr))
		if err != nil {
			return nil, err
		}
		p.Changes = append(p.Changes, c)
	}
	for _, addr := range slices.Sorted(maps.Keys(st.Runs)) {
		if _, ok := cfg.RunInstances[addr]; !ok {
			p.Changes = append(p.Changes, &Change{Address: addr, Kind: KindRun, Action: ActionForget, Reasons: []string{"no longer in the configuration: its record is removed from the state"}})
		}
	}
	for _, r := range opts.Replace {
		if p.Change(r) == nil {
			return nil, fmt.Errorf("-replace=%s: no such run or sandbox in the configuration", r)
		}
	}
	p.filterTargets(cfg, opts.Targets)
	p.filterExcludes(cfg, opts.Excludes)
	sortChanges(p.Changes)
	if len(opts.Targets) == 0 && len(opts.Excludes) == 0 {
		p.Memory = agentmemory.Pending(st)
	}
	e.placeElsewhere(ctx, st, p, live)
	if err := e.resumeReasons(ctx, st, p); err != nil {
		return nil, err
	}
	if err := e.unreachableMCP(st, p, unreachable); err != nil {
		return nil, err
	}
	if err := e.checkModels(p); err != nil {
		return nil, err
	}
	return p, nil
}

// runOrder lists run instance addresses dependencies first.
func (e *Engine) runOrder() ([]string, error) {
	g, diags := e.Config.DependencyGraph()
	if diags.HasErrors() {
		return nil, diags
	}
	topo, err := g.TopoOrder()
	if err != nil {
		return nil, err
	}
	var runs []string
	for _, id := range topo {
		if _, ok := e.Config.RunInstances[id]; ok {
			runs = append(runs, id)
		}
	}
	return runs, nil
}

// manifestDigests are a manifest's entry digests and overall digest,
// computed once per manifest and root in a plan: sandboxes share
// manifests, and digesting local_dir and git_repo entries reads them.
// digest is "" when a local_dir was left for apply's copy to hash
// (manifest.PlanDigests).
type manifestDigests struct {
	entries map[string]string
	digest  string
}

// planSandbox decides one sandbox's action and returns its digest as a
// run's input ("" when known only after apply).
func (e *Engine) planSandbox(ctx context.Context, st *state.State, live map[string]liveSandbox, mcache map[string]*manifestDigests, addr string, replace, applying bool) (*Change, string, error) {
	sb := e.Config.SandboxInstances[addr]
	m := sandboxManifest(e.Config, sb)
	cdigest := sandboxConfigDigest(e.Config, sb)
	prev := st.Sandboxes[addr]
	// A sandbox made anew from its manifest needs no digest to decide
	// anything: a local_dir not hashed before is hashed by its copy
	// (known after apply), so apply reads it once, not twice.
	creating := prev == nil || replace || prev.ConfigDigest != cdigest
	if creating {
		if err := e.checkMountsAvailable(sb); err != nil {
			return nil, "", err
		}
	}
	md, err := e.planManifestDigests(ctx, st, mcache, sb, m, creating, applying)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", addr, err)
	}
	entries, mdigest := md.entries, md.digest
	c := &Change{Address: addr, Kind: KindSandbox, Action: ActionNoop, Attributes: map[string]string{
		"provider": sb.Provider,
	}}
	if sb.Image != "" {
		c.Attributes["image"] = sb.Image
	}
	if sb.Manifest != "" {
		c.Attributes["manifest"] = fmt.Sprintf("manifest.%s (%d %s%s)", sb.Manifest, len(m.Entries), plural(len(m.Entries), "entry", "entries"), accountsSummary(sandboxAccounts(e.Config, sb)))
	}
	setMountAttributes(e.Config, sb, func(p, v string) { c.Attributes[p] = v })
	digest := ""
	if mdigest != "" {
		digest = digestJSON([]string{cdigest, mdigest})
	}
	drift := "" // only asked when refreshing: live holds refreshed sandboxes
	if s, ok := live[addr]; ok && s.status != sandbox.StatusMissing && prev != nil && prev.ConfigDigest == cdigest && prev.RestorePending == nil {
		var err error
		if drift, err = e.sandboxDrift(ctx, st, addr); err != nil {
			return nil, "", err
		}
	}
	switch {
	case prev == nil && e.Config.Imports[addr] != nil:
		if err := e.planImport(ctx, st, c, e.Config.Imports[addr].ID); err != nil {
			return nil, "", err
		}
	case prev == nil:
		c.Action = ActionCreate
	case replace:
		c.Action = ActionReplace
		c.Reasons = leftElsewhere([]string{"forced by -replace: a new sandbox is created from the manifest"}, live[addr])
	case prev.ConfigDigest != cdigest:
		c.Action = ActionReplace
		c.Reasons = e.sandboxReasons(prev, sb, func(p string) bool { return !isEnvAttribute(p) })
		if len(c.Reasons) == 0 {
			c.Reasons = []string{"image, provider, isolation, network, ports, resources, provider settings or the manifest's users and groups changed"}
		}
		c.Reasons = leftElsewhere(c.Reasons, live[addr])
	case live[addr].elsewhere != "":
		// Another working directory's: left there unless a run here
		// needs it (placeElsewhere), which restores it with the manifest
		// as it is now.
		if prev.ManifestDigest != mdigest {
			c.Reasons = []string{"its manifest changed"}
		}
	case prev.RestorePending != nil:
		c.Action = ActionRestore
		c.Reasons = []string{restorePendingReason(prev.RestorePending)}
	case drift != "":
		c.Action = ActionReplace
		c.Reasons = []string{drift}
	case live[addr].missing():
		if prev.Snapshot != "" {
			c.Action = ActionRestore
			c.Reasons = []string{"sandbox no longer exists: it is recreated from its latest snapshot"}
		} else {
			c.Action = ActionCreate
			c.Reasons = []string{"sandbox no longer exists and has no snapshot: it is recreated from the manifest"}
		}
	case prev.ManifestDigest != mdigest:
		e.planManifestUpdate(c, prev, sb, m, entries)
	}
	// A restore needs its snapshot file: say now that it is gone, also for
	// a sandbox deleted by on_exit that a run would restore.
	if prev != nil && (c.Action == ActionRestore || prev.Status == statusDeleted && c.Action != ActionReplace) {
		if err := e.snapshotFileError(ctx, addr, prev); err != nil {
			c.Action = ActionRestore
			c.Reasons = append(c.Reasons, "apply will fail: "+err.Error())
		}
	}
	return c, digest, nil
}

// planManifestDigests returns the digests of the entries of sandbox sb's
// manifest m, and the manifest's digest ("" while one of them is known
// only once apply copies it), computed once per manifest and root
// (mcache). A sandbox being created (creating) hashes only what apply
// will not copy anyway (manifest.PlanDigests).
func (e *Engine) planManifestDigests(ctx context.Context, st *state.State, mcache map[string]*manifestDigests, sb *config.SandboxInstance, m manifest.Manifest, creating, applying bool) (*manifestDigests, error) {
	key := sb.Manifest + "\x00" + m.Root
	if md := mcache[key]; md != nil {
		return md, nil
	}
	m.DigestCache = e.digestCache()
	m.Digests = st.Digests()
	var entries map[string]string
	var deferred []string
	var err error
	if creating {
		entries, deferred, err = manifest.PlanDigests(ctx, m, applying)
	} else {
		entries, err = manifest.EntryDigests(ctx, m)
	}
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", sb.Manifest, err)
	}
	md := &manifestDigests{entries: entries, digest: manifest.Digest(m, entries)}
	if len(deferred) > 0 {
		md.digest = ""
	} else {
		mcache[key] = md
	}
	return md, nil
}

// planManifestUpdate makes c the update of a sandbox whose manifest
// changed: the entries to materialize again, those no longer declared,
// and why.
func (e *Engine) planManifestUpdate(c *Change, prev *state.Sandbox, sb *config.SandboxInstance, m manifest.Manifest, entries map[string]string) {
	c.Action = ActionUpdate
	for _, en := range m.Entries {
		if prev.EntryDigests[en.Path] != entries[en.Path] {
			c.Entries = append(c.Entries, en.Path)
		}
	}
	for p := range prev.EntryDigests {
		if _, ok := entries[p]; !ok {
			c.Removed = append(c.Removed, p)
		}
	}
	slices.Sort(c.Removed)
	if len(c.Entries) == 0 && len(c.Removed) == 0 {
		c.Reasons = e.sandboxReasons(prev, sb, isEnvAttribute)
		if len(c.Reasons) == 0 {
			c.Reasons = []string{"manifest environment or root changed"}
		}
	} else {
		c.Reasons = []string{"manifest entries changed"}
	}
	if len(c.Removed) > 0 {
		c.Reasons = append(c.Reasons, "entries no longer declared are left in the workspace: "+strings.Join(c.Removed, ", "))
	}
}

// sandboxReasons names the attributes keep selects that differ between
// the recorded sandbox and its configuration ("image "a" → "b""); none
// when the state has no attributes for it (written by an older agentctl).
func (e *Engine) sandboxReasons(prev *state.Sandbox, sb *config.SandboxInstance, keep func(string) bool) []string {
	if prev.Attributes == nil {
		return nil
	}
	sc := e.scrubber()
	return attributeReasons(sc, prev.Attributes, sandboxAttributes(e.Config, sb, sc), keep, func(p string) string { return p })
}

// restorePendingReason is the plan reason for a sandbox whose last
// restore did not finish.
func restorePendingReason(p *state.RestorePending) string {
	why := "agentctl stopped during it"
	if p.Error != "" {
		why = p.Error
	}
	return "a previous restore did not finish: " + why + "; the sandbox is recreated from its latest snapshot"
}

// ownReasons are the changes of a run's own inputs (its agent, its
// settings, ...) while an upstream run it reads executes first: its
// inputs are computed with the upstream outputs the state has now, so
// every difference found is the run's own. None when they cannot be
// computed yet.
func (e *Engine) ownReasons(ctx context.Context, st *state.State, prev *state.Run, ri *config.RunInstance, sbDigest map[string]string, eval *planEvaluators) []string {
	in, err := e.runInputs(ctx, st, ri, sbDigest, eval.standIns)
	if err != nil || runDigest(in.digests) == prev.Digest {
		return nil
	}
	return inputReasons(e.scrubber(), prev, in.digests, in.attrs)
}

// planRun decides one run's action, in dependency order so upstream
// actions are known.
func (e *Engine) planRun(ctx context.Context, st *state.State, p *Plan, sbDigest map[string]string, eval *planEvaluators, addr string, replace bool) (*Change, error) {
	cfg := e.Config
	ri := cfg.RunInstances[addr]
	c := &Change{Address: addr, Kind: KindRun, Attributes: map[string]string{"agent": agentAddr(ri.Agent)}}
	if ri.Continue != "" {
		c.Attributes["continue"] = ri.Continue
	}
	prev := st.Runs[addr]
	var pending []string // upstream runs that execute in this apply
	standIn := ""
	for _, up := range runUpstream(cfg, ri) {
		if uc := p.Change(up); uc != nil && uc.Action != ActionNoop {
			pending = append(pending, up)
		}
	}
	var creating []string // its sandboxes whose digest apply's copy computes
	for _, sb := range cfg.RunSandboxes(ri) {
		if _, ok := sbDigest[sb]; !ok {
			creating = append(creating, sb)
		}
	}
	if len(pending) == 0 {
		in, err := e.runInputs(ctx, st, ri, sbDigest, eval.standIns)
		if err != nil {
			return nil, err
		}
		if err := e.planPreconditions(st, ri); err != nil {
			return nil, err
		}
		c.Digest = runDigest(in.digests)
		standIn = in.input
		if prev != nil && prev.Digest != c.Digest {
			c.Reasons = inputReasons(e.scrubber(), prev, in.digests, in.attrs)
		}
	} else {
		c.Attributes["input"] = "(known after " + strings.Join(pending, ", ") + ")"
	}
	switch {
	case prev == nil:
		c.Action = ActionExecute
	case replace:
		c.Action = ActionRerun
		c.Reasons = []string{"forced by -replace"}
	case len(pending) > 0:
		c.Action = ActionRerun
		c.Reasons = e.ownReasons(ctx, st, prev, ri, sbDigest, eval)
		upstream := "upstream " + strings.Join(pending, ", ") + " executes first"
		if len(c.Reasons) == 0 {
			upstream += "; this run is skipped during apply if its inputs turn out unchanged"
		}
		c.Reasons = append(c.Reasons, upstream)
	case len(creating) > 0:
		c.Action = ActionRerun
		c.Reasons = []string{strings.Join(creating, ", ") + " is created first and its manifest's digest is known once it is copied; this run is skipped during apply if its inputs turn out unchanged"}
	case prev.Digest != c.Digest:
		c.Action = ActionRerun
		if len(c.Reasons) == 0 {
			c.Reasons = []string{"its digest changed"}
		}
	case prev.Status == RunCompleted:
		c.Action = ActionNoop
	case prev.Status == RunPending:
		c.Action = ActionExecute
	default:
		// Its reason (the turn it stopped at) comes from its journal,
		// read once the plan is targeted (resumeReasons).
		c.Action = ActionResume
	}
	if len(pending) == 0 {
		c.Attributes["input"] = e.planInputText(st, p, ri, standIn, c.Action == ActionNoop, eval.urls)
	}
	e.mcpPlanAttributes(ri, c.Attributes)
	budgetAttributes(cfg, ri, c.Attributes)
	guardrailPlanAttributes(cfg, ri, c.Attributes)
	conditionPlanAttributes(cfg, ri, c.Attributes)
	return c, nil
}

// runUpstream lists the run instances a run depends on directly.
func runUpstream(cfg *config.Config, ri *config.RunInstance) []string {
	var ups []string
	for _, d := range ri.DependsOn {
		if _, ok := cfg.RunInstances[d]; ok && !slices.Contains(ups, d) {
			ups = append(ups, d)
		}
	}
	slices.Sort(ups)
	return ups
}

// inputEvaluator evaluates a run's input (config.RunInputEvaluator).
type inputEvaluator func(ri *config.RunInstance) (string, hcl.Diagnostics)

// planEvaluators evaluate run inputs against the state: with URL
// stand-ins (for digests), and with the recorded URLs (for the input
// plan shows), built only when a run needs it.
type planEvaluators struct {
	standIns inputEvaluator
	urls     func() inputEvaluator
}

func newPlanEvaluators(cfg *config.Config, st *state.State) *planEvaluators {
	rv := stateRuntimeValues(st)
	standIns := rv
	standIns.SandboxURLs, standIns.URLStandIns = nil, true
	var urls inputEvaluator
	return &planEvaluators{
		standIns: cfg.RunInputEvaluator(standIns),
		urls: func() inputEvaluator {
			if urls == nil {
				urls = cfg.RunInputEvaluator(rv)
			}
			return urls
		},
	}
}

// stateRuntimeValues are the outputs of every completed run in st and the
// sandbox URLs, for evaluating many run inputs at once.
func stateRuntimeValues(st *state.State) config.RuntimeValues {
	rv := config.RuntimeValues{RunOutputs: map[string]cty.Value{}, SandboxURLs: map[string]map[string]string{}}
	for addr, r := range st.Runs {
		if r.Status != RunCompleted {
			continue
		}
		if v, err := outputValue(r.Output); err == nil {
			rv.RunOutputs[addr] = v
		}
	}
	for addr, ss := range st.Sandboxes {
		if len(ss.URLs) > 0 {
			rv.SandboxURLs[addr] = ss.URLs
		}
	}
	return rv
}

// runInputs are what a run's digest covers: the named digest inputs
// (docs/engine.md), the attribute values behind them, and the input text with
// URL stand-ins.
type runInputs struct {
	digests map[string]string
	attrs   map[string]state.Attribute
	input   string
	// prior is the transcript of the run it continues (continue.go).
	prior []model.Item
}

// runInputs evaluates a run's input against the upstream outputs in st,
// with every sandbox URL as its stand-in (config.URLStandIn), and returns
// the named digest inputs (docs/engine.md), their attribute values and that
// input text. A URL is an
// address, not content: it is left out of the digest, so a run's digest
// is known before its sandboxes exist and stays the same when their URLs
// change (a stopped Docker sandbox starts on new host ports, a Daytona
// preview URL is signed anew). eval, when not nil, evaluates the input
// against values already built from st with URLStandIns (plan evaluates
// every run against the same state).
func (e *Engine) runInputs(ctx context.Context, st *state.State, ri *config.RunInstance, sbDigest map[string]string, eval inputEvaluator) (*runInputs, error) {
	cfg := e.Config
	rv := config.RuntimeValues{RunOutputs: map[string]cty.Value{}, URLStandIns: true}
	inputs := map[string]string{}
	attrs := newAttributes(e.scrubber())
	for _, up := range runUpstream(cfg, ri) {
		prev := st.Runs[up]
		if prev == nil || prev.Status != RunCompleted {
			return nil, fmt.Errorf("%s: upstream %s has no output yet", ri.Addr, up)
		}
		v, err := outputValue(prev.Output)
		if err != nil {
			return nil, fmt.Errorf("%s: output of %s: %w", ri.Addr, up, err)
		}
		rv.RunOutputs[up] = v
		inputs[up+".output"] = digestString(string(prev.Output))
		attrs.set(up+".output", prev.Output)
	}
	var input string
	var diags hcl.Diagnostics
	if eval != nil {
		input, diags = eval(ri)
	} else {
		input, diags = cfg.EvalRunInput(ri, rv)
	}
	if diags.HasErrors() {
		return nil, diags
	}
	inputs["input"] = digestString(input)
	attrs.set("input", input)
	prior, err := e.continuedTranscript(ctx, st, ri, inputs)
	if err != nil {
		return nil, err
	}
	for _, name := range cfg.AgentClosure(ri.Agent) {
		inputs[agentAddr(name)] = agentDigest(cfg, name, ri.Name)
		agentAttributes(cfg, name, ri.Name, attrs)
	}
	for _, sb := range cfg.RunSandboxes(ri) {
		if d, ok := sbDigest[sb]; ok {
			inputs[sb] = d
		}
	}
	e.mcpInputs(st, ri, inputs, attrs)
	e.skillsInputs(ri, inputs, attrs)
	guardrailInputs(cfg, ri, inputs, attrs)
	return &runInputs{digests: inputs, attrs: attrs.m, input: input, prior: prior}, nil
}

// urlSandboxes lists the sandboxes with exposed ports a run's input
// refers to (for their URLs).
func urlSandboxes(cfg *config.Config, ri *config.RunInstance) []string {
	var out []string
	for _, sb := range ri.InputSandboxes {
		if si := cfg.SandboxInstances[sb]; si != nil && len(si.Ports) > 0 {
			out = append(out, sb)
		}
	}
	return out
}

// runInputText is a run's input as the run receives it: standIn (from
// runInputs) evaluated again with the sandbox URLs recorded in st when it
// references any.
func (e *Engine) runInputText(st *state.State, ri *config.RunInstance, standIn string) (string, error) {
	if len(urlSandboxes(e.Config, ri)) == 0 {
		return standIn, nil
	}
	text, diags := e.Config.EvalRunInput(ri, stateRuntimeValues(st))
	if diags.HasErrors() {
		return "", diags
	}
	return text, nil
}

// planInputText is the input plan shows for a run: standIn with the
// sandbox URLs recorded in st, or, when the run executes and one of the
// sandboxes it takes a URL from is created by this apply (or started:
// Docker publishes its ports on new host ports), "(known after sandbox.X
// is created)". A run that stays as it is (noop) shows the recorded URLs.
func (e *Engine) planInputText(st *state.State, p *Plan, ri *config.RunInstance, standIn string, noop bool, eval func() inputEvaluator) string {
	sbs := urlSandboxes(e.Config, ri)
	if len(sbs) == 0 {
		return standIn
	}
	var after []string
	for _, sb := range sbs {
		ss := st.Sandboxes[sb]
		c := p.Change(sb)
		switch {
		case ss == nil || len(ss.URLs) == 0 || ss.Status == statusDeleted ||
			c != nil && (c.Action == ActionCreate || c.Action == ActionReplace || c.Action == ActionRestore || c.Action == ActionImport):
			after = append(after, sb+" is created")
		case ss.Status == statusStopped && !noop:
			after = append(after, sb+" is started")
		}
	}
	if len(after) == 0 {
		if text, diags := eval()(ri); !diags.HasErrors() {
			return text
		}
		for _, sb := range sbs {
			after = append(after, sb+" is created")
		}
	}
	return "(known after " + strings.Join(after, ", ") + ")"
}

// outputValue turns a stored run output (JSON) into a cty value for
// expressions: a string stays a string, an object becomes an object.
func outputValue(raw json.RawMessage) (cty.Value, error) {
	if len(raw) == 0 {
		return cty.StringVal(""), nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return cty.StringVal(s), nil
	}
	t, err := ctyjson.ImpliedType(raw)
	if err != nil {
		return cty.NilVal, err
	}
	return ctyjson.Unmarshal(raw, t)
}

// filterTargets keeps only the targeted objects and what they depend on,
// as Terraform's -target does; for a destroy, the targeted objects and
// what depends on them (destroying a sandbox forgets the runs that used
// it, never the other way round).
func (p *Plan) filterTargets(cfg *config.Config, targets []string) {
	if len(targets) == 0 {
		return
	}
	keep := map[string]bool{}
	g, _ := cfg.DependencyGraph()
	var add func(string)
	add = func(a string) {
		if keep[a] {
			return
		}
		keep[a] = true
		if g == nil {
			return
		}
		next := g.DependenciesOf(a)
		if p.Destroy {
			next = g.DependentsOf(a)
		}
		for _, d := range next {
			add(d)
		}
	}
	for _, t := range targets {
		ta, terr := addrs.ParseInstance(t)
		for _, c := range p.Changes {
			if c.Address == t {
				add(c.Address)
				continue
			}
			if ca, err := addrs.ParseInstance(c.Address); err == nil && terr == nil && ta.Selects(ca) {
				add(c.Address)
			}
		}
	}
	out := p.Changes[:0]
	for _, c := range p.Changes {
		if keep[c.Address] {
			out = append(out, c)
		}
	}
	p.Changes = out
}

// checkModels configures the model provider of every agent a planned run
// uses, as terraform plan configures its providers, so a missing API key
// is reported by plan rather than in the middle of apply.
func (e *Engine) checkModels(p *Plan) error {
	checked := map[string]bool{}
	for _, c := range p.Changes {
		if c.Kind != KindRun || !executes(c.Action) {
			continue
		}
		ri := e.Config.RunInstances[c.Address]
		if ri == nil {
			continue
		}
		for _, name := range e.Config.AgentClosure(ri.Agent) {
			a := e.Config.Agents[name]
			if a == nil || checked[name] {
				continue
			}
			checked[name] = true
			if _, _, err := e.provs().model(e, a, ri.Name); err != nil {
				return fmt.Errorf("%s: %w", c.Address, err)
			}
		}
	}
	return nil
}

// executes reports whether a run planned for action a runs its agents in
// apply.
func executes(a Action) bool {
	return a == ActionExecute || a == ActionRerun || a == ActionResume
}

// accountsSummary is ", N users, M groups" for a manifest that declares
// any, "" otherwise.
func accountsSummary(a sandbox.Accounts) string {
	s := ""
	plural := func(n int, what string) string {
		if n == 1 {
			return fmt.Sprintf(", 1 %s", what)
		}
		return fmt.Sprintf(", %d %ss", n, what)
	}
	if len(a.Users) > 0 {
		s += plural(len(a.Users), "user")
	}
	if len(a.Groups) > 0 {
		s += plural(len(a.Groups), "group")
	}
	return s
}
