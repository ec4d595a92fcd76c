package config

import (
	"fmt"
	"maps"
	"slices"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/agentctl/agentctl/addrs"
	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox"
)

// sandboxSchema lists the arguments every sandbox takes; each provider
// type adds its own (registry.Type.SandboxSchema).
var sandboxSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "provider", Required: true}, {Name: "image"}, {Name: "manifest"}, {Name: "network"},
		{Name: "ports"}, {Name: "on_exit"}, {Name: "for_each"}, {Name: "snapshot_exclude"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "resources"}, {Type: "lifecycle"}},
}

var resourcesSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "cpus"}, {Name: "memory"}, {Name: "disk"}, {Name: "pids"}, {Name: "gpus"},
}}

// fullSandboxSchema is sandboxSchema with every sandbox provider type's
// own arguments, so that a misspelt argument gets a suggestion and an
// argument of another type a message saying so.
func (l *loader) fullSandboxSchema() *hcl.BodySchema {
	full := &hcl.BodySchema{Attributes: sandboxSchema.Attributes, Blocks: sandboxSchema.Blocks}
	seen := map[string]bool{}
	for _, a := range sandboxSchema.Attributes {
		seen[a.Name] = true
	}
	for _, b := range sandboxSchema.Blocks {
		seen[b.Type] = true
	}
	for _, name := range l.providerNames(registry.RoleSandbox) {
		t, _ := l.reg.Lookup(name)
		if t.SandboxSchema == nil {
			continue
		}
		for _, a := range t.SandboxSchema.Attributes {
			if !seen[a.Name] {
				seen[a.Name] = true
				full.Attributes = append(full.Attributes, hcl.AttributeSchema{Name: a.Name})
			}
		}
		for _, b := range t.SandboxSchema.Blocks {
			if !seen[b.Type] {
				seen[b.Type] = true
				full.Blocks = append(full.Blocks, b)
			}
		}
	}
	return full
}

// foreignArgs reports the arguments of attrs that belong to another
// sandbox provider type than the sandbox's, and says whether there were.
func (l *loader) foreignArgs(attrs hcl.Attributes, prov *Provider) bool {
	own := map[string]bool{}
	for _, a := range sandboxSchema.Attributes {
		own[a.Name] = true
	}
	if t, ok := l.reg.Lookup(prov.Type); ok && t.SandboxSchema != nil {
		for _, a := range t.SandboxSchema.Attributes {
			own[a.Name] = true
		}
	}
	found := false
	for _, name := range slices.Sorted(maps.Keys(attrs)) {
		if own[name] {
			continue
		}
		for _, typ := range l.providerNames(registry.RoleSandbox) {
			t, _ := l.reg.Lookup(typ)
			if t.SandboxSchema == nil || typ == prov.Type {
				continue
			}
			if hasAttr(t.SandboxSchema, name) {
				l.errorf(attrs[name].NameRange, "Unsupported argument for this provider",
					"%s is a %s sandbox setting; this sandbox uses %s. Remove it or change the provider.", name, typ, prov.Addr)
				found = true
				break
			}
		}
	}
	return found
}

func hasAttr(s *hcl.BodySchema, name string) bool {
	for _, a := range s.Attributes {
		if a.Name == name {
			return true
		}
	}
	return false
}

func (l *loader) decodeSandbox(b *hcl.Block) {
	name := b.Labels[0]
	s := &Sandbox{Name: name, DeclRange: b.DefRange}
	l.cfg.Sandboxes[name] = s
	content, diags := b.Body.Content(l.fullSandboxSchema())
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return
	}
	attrs := content.Attributes
	provAddr, ok := l.resolveProvider(attrs["provider"].Expr, registry.RoleSandbox, "A sandbox")
	if !ok {
		return
	}
	pa, err := addrs.ParseProvider(provAddr)
	if err != nil {
		return // resolveProvider made the address: it always parses
	}
	prov := l.cfg.Providers[pa.Name()]
	if l.foreignArgs(attrs, prov) {
		return
	}
	pt, _ := l.reg.Lookup(prov.Type)
	// The type-specific arguments: the body without the common ones.
	_, rest, _ := b.Body.PartialContent(sandboxSchema)
	var manifest string
	if a, ok := attrs["manifest"]; ok {
		manifest, _ = l.namedRef(a.Expr, "manifest", "manifest")
	}
	lifecycle := l.decodeLifecycle(content.Blocks.OfType("lifecycle"), "sandbox")
	instances := []eachVal{{}}
	if a, ok := attrs["for_each"]; ok {
		s.ForEach = a.Expr
		if instances, ok = l.forEach(a); !ok {
			return
		}
	}
	for _, ev := range instances {
		var each *eachVal
		if s.ForEach != nil {
			e := ev
			each = &e
		}
		si := &SandboxInstance{
			Addr: instanceAddr("sandbox", name, ev.key, s.ForEach != nil), Name: name, Key: ev.key,
			Provider: provAddr, Manifest: manifest, OnExit: "stop", DeclRange: b.DefRange,
		}
		args := l.decodeSandboxInstance(si, content, each)
		l.checkSandboxConditions(lifecycle, si, each)
		args.Address, args.Provider, args.ProviderAddr = si.Addr, prov.Settings, prov.Addr
		args.Body = &boundBody{l: l, body: rest, sc: scope{each: each != nil, where: "a sandbox"}, each: each, refuse: "A sandbox argument"}
		if args.NetworkRange == nil {
			si.Network = pt.DefaultNetwork
		}
		if m := l.cfg.Manifests[manifest]; m != nil && !m.Accounts.Empty() {
			args.Accounts = m.Accounts
			args.AccountsRange = attrs["manifest"].Expr.Range().Ptr()
		}
		if m := l.cfg.Manifests[manifest]; m != nil && len(m.Mounts) > 0 {
			l.checkMountSupport(pt, prov, si, m)
		}
		settings, diags := pt.DecodeSandbox(args)
		l.diags = append(l.diags, diags...)
		si.Settings = settings
		l.cfg.SandboxInstances[si.Addr] = si
	}
}

// decodeSandboxInstance decodes the common arguments of one instance
// into si and returns them, with where they are, for the provider type.
func (l *loader) decodeSandboxInstance(si *SandboxInstance, content *hcl.BodyContent, each *eachVal) *registry.SandboxArgs {
	attrs := content.Attributes
	args := &registry.SandboxArgs{MissingItemRange: content.MissingItemRange}
	sc := scope{each: each != nil, where: "a sandbox"}
	val := func(attr string) (cty.Value, hcl.Range, bool) {
		return l.settingAttr(attrs, attr, sc, each, "A sandbox argument")
	}
	str := func(attr string) string {
		if v, r, ok := val(attr); ok {
			s, _ := l.toString(v, r, attr)
			return s
		}
		return ""
	}
	si.Image = str("image")
	args.Image = si.Image
	if a, ok := attrs["image"]; ok {
		args.ImageRange = a.NameRange.Ptr()
	}
	if a, ok := attrs["network"]; ok {
		si.Network = str("network")
		args.Network, args.NetworkRange, args.NetworkValue = si.Network, a.NameRange.Ptr(), a.Expr.Range()
	}
	if v, r, ok := val("ports"); ok {
		if ps, ok := l.toStringList(v, r, "ports"); ok {
			for _, p := range ps {
				var n int
				if _, err := fmt.Sscanf(p, "%d", &n); err != nil || fmt.Sprint(n) != p || n < 1 || n > 65535 {
					l.errorf(r, "Invalid port", "ports must be numbers between 1 and 65535; %q is not.", p)
					continue
				}
				si.Ports = append(si.Ports, n)
			}
			args.Ports, args.PortsRange = si.Ports, r
		}
	}
	if a, ok := attrs["on_exit"]; ok {
		si.OnExit = str("on_exit")
		if !oneOf(si.OnExit, "stop", "keep", "delete") {
			l.errorf(a.Expr.Range(), "Invalid on_exit", "on_exit must be \"stop\", \"keep\" or \"delete\", not %q.%s", si.OnExit, suggest(si.OnExit, []string{"stop", "keep", "delete"}))
		}
	}
	if v, r, ok := val("snapshot_exclude"); ok {
		if ps, ok := l.toStringList(v, r, "snapshot_exclude"); ok {
			if _, err := sandbox.CompileExclude(ps); err != nil {
				l.errorf(r, "Invalid snapshot_exclude", "snapshot_exclude takes the patterns a manifest's exclude takes: %s.", err)
			} else {
				si.SnapshotExclude = ps
			}
		}
	}
	for _, rb := range content.Blocks {
		if rb.Type != "resources" {
			continue
		}
		if args.ResourcesRange != nil {
			l.errorf(rb.DefRange, "Duplicate resources block", "A sandbox may have one resources block.")
			continue
		}
		args.ResourcesRange = rb.DefRange.Ptr()
		rc, diags := rb.Body.Content(resourcesSchema)
		l.diags = append(l.diags, diags...)
		num := func(attr string) (cty.Value, hcl.Range, bool) {
			return l.settingAttr(rc.Attributes, attr, sc, each, "A sandbox resource")
		}
		pos := func(attr string) int64 {
			return l.nonNegativeAttr(rc.Attributes, attr, sc, each, "A sandbox resource")
		}
		if v, r, ok := num("cpus"); ok {
			si.Resources.CPUs, _ = l.toFloat(v, r, "cpus")
			if si.Resources.CPUs < 0 {
				l.errorf(r, "Invalid cpus", "cpus must be 0 or more.")
			}
		}
		si.Resources.MemoryMB = pos("memory")
		si.Resources.DiskGB = pos("disk")
		si.Resources.PIDs = pos("pids")
		si.Resources.GPUs = pos("gpus")
		r := si.Resources
		args.Resources = sandbox.Resources{CPUs: r.CPUs, MemoryMB: r.MemoryMB, DiskGB: r.DiskGB, PIDs: r.PIDs, GPUs: r.GPUs}
		args.ResourceRanges = map[string]hcl.Range{}
		for name, set := range map[string]bool{"cpus": r.CPUs > 0, "memory": r.MemoryMB > 0, "disk": r.DiskGB > 0, "pids": r.PIDs > 0, "gpus": r.GPUs > 0} {
			if set {
				args.ResourceRanges[name] = rc.Attributes[name].NameRange
			}
		}
	}
	return args
}

// sandboxAddrValue is the evaluation context value used to read a
// sandbox reference as an address: sandbox.NAME is the string
// "sandbox.NAME", sandbox.NAME["k"] the instance's address.
func (l *loader) sandboxAddrValue() cty.Value {
	if l.sandboxAddrs != cty.NilVal {
		return l.sandboxAddrs
	}
	single := map[string]string{}
	var expanded []string
	for name, s := range l.cfg.Sandboxes {
		if s.ForEach == nil {
			single[name] = addrs.Sandbox(name, nil).String()
		} else {
			expanded = append(expanded, name)
		}
	}
	// Sandboxes are all decoded before agents and runs refer to them.
	l.sandboxAddrs = l.addrValue("sandbox", single, expanded, func(yield func(name, key, addr string)) {
		for _, si := range l.cfg.SandboxInstances {
			yield(si.Name, si.Key, si.Addr)
		}
	})
	return l.sandboxAddrs
}

// sandboxRef reads sandbox = sandbox.NAME or sandbox.NAME[KEY] (KEY may
// use each) and returns the instance address.
func (l *loader) sandboxRef(a *hcl.Attribute, each *eachVal) (string, bool) {
	hasRef := false
	for _, tr := range a.Expr.Variables() {
		if tr.RootName() == "sandbox" {
			hasRef = true
		}
	}
	if !hasRef {
		l.errorf(a.Expr.Range(), "Invalid reference", "Expected a reference like sandbox.NAME or sandbox.NAME[\"KEY\"] (without quotes).")
		return "", false
	}
	if !l.checkRefs(a.Expr, scope{each: each != nil, sandbox: true, where: "a sandbox reference"}) {
		return "", false
	}
	ctx := l.ctx(a.Expr, each, nil)
	ctx.Variables["sandbox"] = l.sandboxAddrValue()
	v, diags := a.Expr.Value(ctx)
	if diags.HasErrors() {
		for _, d := range diags {
			d.Detail += " Refer to a sandbox as sandbox.NAME, or sandbox.NAME[\"KEY\"] when it has for_each."
		}
		l.diags = append(l.diags, diags...)
		return "", false
	}
	if !v.IsKnown() {
		return "", false
	}
	if v.Type() != cty.String {
		l.errorf(a.Expr.Range(), "Sandbox instance not selected",
			"This sandbox has for_each, so it is a collection of sandboxes: choose one, like sandbox.NAME[\"KEY\"] or sandbox.NAME[each.key].")
		return "", false
	}
	return v.AsString(), true
}
