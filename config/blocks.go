package config

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"

	"github.com/agentctl/agentctl/providers/docker"
	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

// ---- capabilities ----

var capabilityTypes = []string{"shell", "filesystem", "compaction", "command"}

var capabilitySchemas = map[string]*hcl.BodySchema{
	"shell":      {Attributes: []hcl.AttributeSchema{{Name: "timeout"}, {Name: "max_output_tokens"}, {Name: "needs_approval"}}},
	"filesystem": {Attributes: []hcl.AttributeSchema{{Name: "max_image_bytes"}}},
	"compaction": {Attributes: []hcl.AttributeSchema{{Name: "threshold"}}},
	"command": {Attributes: []hcl.AttributeSchema{
		{Name: "description", Required: true}, {Name: "parameters"}, {Name: "command", Required: true},
		{Name: "timeout"}, {Name: "needs_approval"},
	}},
}

var jsonSchemaTypes = []string{"string", "number", "integer", "boolean", "array", "object"}

func (l *loader) decodeCapability(b *hcl.Block) {
	typ, name := b.Labels[0], b.Labels[1]
	schema, ok := capabilitySchemas[typ]
	if !ok {
		l.errorf(b.LabelRanges[0], "Unknown capability type", "There is no capability type %q.%s Capability types are %s.", typ, suggest(typ, capabilityTypes), quoteList(capabilityTypes))
		return
	}
	c := &Capability{Type: typ, Name: name, Addr: "capability." + typ + "." + name, DeclRange: b.DefRange}
	l.cfg.Capabilities[typ+"."+name] = c
	content, diags := b.Body.Content(schema)
	l.diags = append(l.diags, diags...)
	sc := scope{where: "a capability"}
	val := func(attr string) (cty.Value, hcl.Range, bool) {
		return l.settingAttr(content.Attributes, attr, sc, nil, "A capability setting")
	}
	positive := func(attr string) int64 {
		return l.nonNegativeAttr(content.Attributes, attr, sc, nil, "A capability setting")
	}
	switch typ {
	case "shell":
		s := &ShellCapability{}
		if v, r, ok := val("timeout"); ok {
			s.Timeout, _ = l.toDuration(v, r, "timeout")
		}
		if s.Timeout == 0 {
			s.Timeout = defaultShellTimeout
		}
		s.MaxOutputTokens = int(positive("max_output_tokens"))
		if v, r, ok := val("needs_approval"); ok {
			s.NeedsApproval, _ = l.toBool(v, r, "needs_approval")
		}
		c.Shell = s
	case "filesystem":
		c.Filesystem = &FilesystemCapability{MaxImageBytes: positive("max_image_bytes")}
	case "compaction":
		c.Compaction = &CompactionCapability{Threshold: positive("threshold")}
	case "command":
		cc := &CommandCapability{}
		if v, r, ok := val("description"); ok {
			cc.Description, _ = l.toString(v, r, "description")
		}
		if v, r, ok := val("command"); ok {
			if cc.Command, ok = l.toStringList(v, r, "command"); ok && len(cc.Command) == 0 {
				l.errorf(r, "Empty command", "command must name the program and its arguments, like [\"python3\", \"tools/query.py\"].")
			}
		}
		if v, r, ok := val("timeout"); ok {
			cc.Timeout, _ = l.toDuration(v, r, "timeout")
		}
		if v, r, ok := val("needs_approval"); ok {
			cc.NeedsApproval, _ = l.toBool(v, r, "needs_approval")
		}
		cc.Parameters = l.commandParameters(content.Attributes["parameters"])
		c.Command = cc
	}
}

// commandParameters builds the JSON Schema of a command tool's
// parameters map: every parameter is required, no others are allowed.
func (l *loader) commandParameters(a *hcl.Attribute) json.RawMessage {
	props := map[string]any{}
	required := []string{}
	if a != nil {
		v, ok := l.eval(a.Expr, scope{where: "a capability"}, nil, nil)
		if !ok || !l.noSensitive(v, a.Expr.Range(), "Command parameters") || !l.known(v, a.Expr.Range(), "parameters") {
			return nil
		}
		if !v.IsNull() {
			if !v.Type().IsObjectType() && !v.Type().IsMapType() {
				l.typeErr(a.Expr.Range(), "parameters", "an object of parameter schemas, like { sql = { type = \"string\", description = \"...\" } }", nil)
				return nil
			}
			js, err := ctyjson.Marshal(v, v.Type())
			if err != nil {
				l.typeErr(a.Expr.Range(), "parameters", "representable as JSON", err)
				return nil
			}
			var m map[string]map[string]any
			if err := json.Unmarshal(js, &m); err != nil {
				l.typeErr(a.Expr.Range(), "parameters", "an object whose values are objects like { type = \"string\" }", nil)
				return nil
			}
			for name, p := range m {
				t, _ := p["type"].(string)
				if !oneOf(t, jsonSchemaTypes...) {
					l.errorf(a.Expr.Range(), "Invalid parameter type", "Parameter %q needs type = one of %s.%s", name, quoteList(jsonSchemaTypes), suggest(t, jsonSchemaTypes))
					return nil
				}
				props[name] = p
				required = append(required, name)
			}
		}
	}
	sort.Strings(required)
	js, _ := json.Marshal(map[string]any{
		"type": "object", "properties": props, "required": required, "additionalProperties": false,
	})
	return js
}

// ---- for_each ----

// forEach evaluates a for_each expression: a map or object (keys, values)
// or a set of strings (each.value = each.key), known at load time.
func (l *loader) forEach(a *hcl.Attribute) ([]eachVal, bool) {
	v, ok := l.eval(a.Expr, scope{where: "for_each (it may refer only to var and local)"}, nil, nil)
	if !ok {
		return nil, false
	}
	rng := a.Expr.Range()
	if v.ContainsMarked() {
		l.errorf(rng, "Invalid for_each argument", "for_each can't use sensitive values: the keys become part of addresses, which are shown and stored.")
		return nil, false
	}
	if !l.known(v, rng, "for_each") {
		return nil, false
	}
	if v.IsNull() {
		l.errorf(rng, "Invalid for_each argument", "for_each must be a map or a set of strings, not null.")
		return nil, false
	}
	var out []eachVal
	ty := v.Type()
	switch {
	case ty.IsMapType() || ty.IsObjectType():
		for it := v.ElementIterator(); it.Next(); {
			k, e := it.Element()
			out = append(out, eachVal{key: k.AsString(), value: e})
		}
	case ty.IsSetType() && ty.ElementType() == cty.String:
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			if e.IsNull() {
				l.errorf(rng, "Invalid for_each argument", "for_each sets must not contain null.")
				return nil, false
			}
			out = append(out, eachVal{key: e.AsString(), value: e})
		}
	default:
		hint := ""
		if ty.IsListType() || ty.IsTupleType() {
			hint = " Convert a list with toset(...)."
		}
		l.errorf(rng, "Invalid for_each argument", "for_each must be a map or a set of strings, not %s.%s", ty.FriendlyName(), hint)
		return nil, false
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, true
}

// ---- sandboxes ----

var sandboxSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "provider", Required: true}, {Name: "image"}, {Name: "manifest"}, {Name: "network"},
		{Name: "ports"}, {Name: "on_exit"}, {Name: "for_each"}, {Name: "snapshot_exclude"},
		// docker
		{Name: "user"}, {Name: "commit_snapshot"}, {Name: "cap_add"}, {Name: "shm_size"},
		// daytona
		{Name: "snapshot"}, {Name: "env"}, {Name: "labels"}, {Name: "auto_stop_interval"},
		{Name: "auto_archive_interval"}, {Name: "auto_delete_interval"}, {Name: "network_block_all"},
		{Name: "network_allow_list"}, {Name: "public"}, {Name: "create_timeout"}, {Name: "start_timeout"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "resources"}},
}

var resourcesSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "cpus"}, {Name: "memory"}, {Name: "disk"}, {Name: "pids"}, {Name: "gpus"},
}}

// unenforcedResources says, per provider, which resources settings it
// cannot enforce and why. Such a setting is an error at its attribute
// rather than a promise silently not kept (DESIGN.md §10).
var unenforcedResources = map[string]map[string]string{
	"local": {
		"disk": "The local provider does not limit a sandbox's disk use. Remove disk.",
		"gpus": "The local provider does not assign GPUs. Remove gpus.",
	},
	"daytona": {
		"pids": "Daytona does not limit a sandbox's processes. Remove pids.",
	},
	"docker": {
		"disk": "The docker provider does not limit a container's disk use (the engine can only do so on some storage drivers). Remove disk.",
		"gpus": "The docker provider does not assign GPUs. Remove gpus.",
	},
}

// checkResources reports each resources setting the sandbox's provider
// cannot enforce (0, which means no limit, is accepted).
func (l *loader) checkResources(prov *Provider, attrs hcl.Attributes, r Resources) {
	set := map[string]bool{"cpus": r.CPUs > 0, "memory": r.MemoryMB > 0, "disk": r.DiskGB > 0, "pids": r.PIDs > 0, "gpus": r.GPUs > 0}
	for _, name := range []string{"cpus", "memory", "disk", "pids", "gpus"} {
		if why, ok := unenforcedResources[prov.Type][name]; ok && set[name] {
			l.errorf(attrs[name].NameRange, "Unsupported resource for this provider", "%s", why)
		}
	}
	if prov.Type != "local" {
		return
	}
	isolation := local.IsolationNamespaces
	if prov.Local != nil && prov.Local.Isolation != "" {
		isolation = prov.Local.Isolation
	}
	for _, x := range []struct {
		name, what string
		r          sandbox.Resources
	}{
		{"memory", "memory", sandbox.Resources{MemoryMB: r.MemoryMB}},
		{"cpus", "CPU time", sandbox.Resources{CPUs: r.CPUs}},
		{"pids", "processes", sandbox.Resources{PIDs: r.PIDs}},
	} {
		if !set[x.name] {
			continue
		}
		if isolation == local.IsolationNone {
			l.errorf(attrs[x.name].NameRange, "Unsupported resource for this provider",
				"With isolation = \"none\" the local provider runs commands directly on this machine and does not limit their %s. Remove %s, or use the default isolation \"namespaces\" (docs/local-provider.md says what it enforces where).", x.what, x.name)
			continue
		}
		if err := local.CheckResources(isolation, x.r); err != nil {
			l.errorf(attrs[x.name].NameRange, "Unsupported resource for this provider",
				"The local provider limits a sandbox's %s with a cgroup of its own, and cannot on this machine: %v. Remove %s, or use provider.docker, which enforces it.", x.what, err, x.name)
		}
	}
}

// providerSettings lists the provider-specific sandbox arguments.
var providerSettings = map[string][]string{
	"local":  {},
	"docker": {"user", "commit_snapshot", "cap_add", "shm_size"},
	"daytona": {"snapshot", "env", "labels", "auto_stop_interval", "auto_archive_interval", "auto_delete_interval",
		"network_block_all", "network_allow_list", "public", "create_timeout", "start_timeout"},
}

func (l *loader) decodeSandbox(b *hcl.Block) {
	name := b.Labels[0]
	s := &Sandbox{Name: name, DeclRange: b.DefRange}
	l.cfg.Sandboxes[name] = s
	content, diags := b.Body.Content(sandboxSchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return
	}
	attrs := content.Attributes
	provAddr, ok := l.resolveProvider(attrs["provider"].Expr, sandboxProviderTypes, "A sandbox")
	if !ok {
		return
	}
	prov := l.cfg.Providers[strings.TrimPrefix(provAddr, "provider.")]
	// Provider-specific arguments.
	for attr := range attrs {
		for typ, names := range providerSettings {
			if typ != prov.Type && oneOf(attr, names...) && !oneOf(attr, providerSettings[prov.Type]...) {
				l.errorf(attrs[attr].NameRange, "Unsupported argument for this provider",
					"%s is a %s sandbox setting; this sandbox uses %s. Remove it or change the provider.", attr, typ, provAddr)
			}
		}
	}
	var manifest string
	if a, ok := attrs["manifest"]; ok {
		manifest, _ = l.namedRef(a.Expr, "manifest", "manifest")
	}
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
			Provider: provAddr, Manifest: manifest, OnExit: "stop", Settings: map[string]any{}, DeclRange: b.DefRange,
		}
		l.decodeSandboxInstance(si, prov, content, each)
		l.cfg.SandboxInstances[si.Addr] = si
	}
}

func (l *loader) decodeSandboxInstance(si *SandboxInstance, prov *Provider, content *hcl.BodyContent, each *eachVal) {
	attrs := content.Attributes
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
	switch prov.Type {
	case "docker":
		if si.Image == "" {
			l.errorf(content.MissingItemRange, "Missing image", "A docker sandbox needs image = \"...\", for example image = \"python:3.12-slim\".")
		}
	case "local":
		if a, ok := attrs["image"]; ok {
			l.errorf(a.NameRange, "Unsupported argument for this provider", "A local sandbox runs on this machine and has no image; remove image or use provider.docker.")
		}
	}
	if a, ok := attrs["network"]; ok {
		si.Network = str("network")
		switch prov.Type {
		case "local":
			if !oneOf(si.Network, "none", "host") {
				l.errorf(a.Expr.Range(), "Invalid network", "A local sandbox's network must be \"none\" or \"host\", not %q.", si.Network)
			}
		case "daytona":
			l.errorf(a.NameRange, "Unsupported argument for this provider", "Daytona sandboxes configure their network with network_block_all and network_allow_list.")
		default:
			if si.Network == "" {
				l.errorf(a.Expr.Range(), "Invalid network", "network must be \"none\", \"host\", \"bridge\" or the name of a network.")
			}
		}
	} else if prov.Type != "daytona" {
		si.Network = "none"
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
			l.checkDockerPorts(si, prov, attrs, r)
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
	var resRange *hcl.Range
	for _, rb := range content.Blocks {
		if resRange != nil {
			l.errorf(rb.DefRange, "Duplicate resources block", "A sandbox may have one resources block.")
			continue
		}
		resRange = &rb.DefRange
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
		l.checkResources(prov, rc.Attributes, si.Resources)
	}
	set := si.Settings
	switch prov.Type {
	case "docker":
		if _, ok := attrs["user"]; ok {
			set["user"] = str("user")
		}
		if v, r, ok := val("commit_snapshot"); ok {
			set["commit_snapshot"], _ = l.toBool(v, r, "commit_snapshot")
		}
		if v, r, ok := val("cap_add"); ok {
			if caps, ok := l.toStringList(v, r, "cap_add"); ok {
				for _, c := range caps {
					name := strings.TrimPrefix(strings.ToUpper(c), "CAP_")
					if !oneOf(name, docker.Capabilities...) {
						l.errorf(r, "Invalid cap_add", "%q is not a Linux capability; use names from capabilities(7) without CAP_, for example \"NET_RAW\" or \"SYS_PTRACE\".%s", c, suggest(name, docker.Capabilities))
					}
				}
				set["cap_add"] = caps
			}
		}
		if a, ok := attrs["shm_size"]; ok {
			n := l.nonNegativeAttr(attrs, "shm_size", sc, each, "A sandbox argument")
			if n > 1<<20 {
				l.errorf(a.Expr.Range(), "Invalid shm_size", "shm_size is in MiB and must be at most 1048576 (1 TiB), got %d.", n)
			}
			set["shm_size"] = n
		}
	case "daytona":
		if _, ok := attrs["snapshot"]; ok {
			set["snapshot"] = str("snapshot")
			if resRange != nil {
				l.errorf(*resRange, "Resources with a snapshot", "A Daytona sandbox created from a snapshot gets the snapshot's resources; remove the resources block or the snapshot.")
			}
			if si.Image != "" {
				l.errorf(attrs["snapshot"].NameRange, "Image with a snapshot", "Set either image or snapshot for a Daytona sandbox, not both.")
			}
		}
		for _, k := range []string{"env", "labels"} {
			if v, r, ok := val(k); ok {
				if m, ok := l.toStringMap(v, r, k); ok {
					set[k] = m
				}
			}
		}
		for _, k := range []string{"auto_stop_interval", "auto_archive_interval", "auto_delete_interval"} {
			if v, r, ok := val(k); ok {
				if n, ok := l.toInt(v, r, k); ok {
					if n < daytonaIntervalMin(k) {
						l.errorf(r, "Invalid "+k, "%s", daytonaIntervalDetail(k, n))
					}
					set[k] = n
				}
			}
		}
		for _, k := range []string{"network_block_all", "public"} {
			if v, r, ok := val(k); ok {
				set[k], _ = l.toBool(v, r, k)
			}
		}
		if v, r, ok := val("network_allow_list"); ok {
			if cidrs, ok := l.toStringList(v, r, "network_allow_list"); ok {
				set["network_allow_list"] = cidrs
			}
		}
		for _, k := range []string{"create_timeout", "start_timeout"} {
			if v, r, ok := val(k); ok {
				set[k], _ = l.toDuration(v, r, k)
			}
		}
	}
}

// checkDockerPorts reports ports on a docker sandbox whose network has no
// container network to publish them from ("none", the default, or
// "host"): Docker refuses to create such a container.
func (l *loader) checkDockerPorts(si *SandboxInstance, prov *Provider, attrs hcl.Attributes, portsRange hcl.Range) {
	if prov.Type != "docker" || len(si.Ports) == 0 || !oneOf(si.Network, "none", "host") {
		return
	}
	network := fmt.Sprintf("network = %q", si.Network)
	if _, ok := attrs["network"]; !ok {
		network = "no network argument (the default is \"none\")"
	}
	l.errorf(portsRange, "Ports need a container network",
		"%s has ports but %s: Docker publishes ports only from a container network and refuses to create this container. Set network = \"bridge\" (or the name of a Docker network), or remove ports.", si.Addr, network)
}

// daytonaIntervalMin is the smallest value a Daytona interval setting
// takes: 0 disables auto-stop and means Daytona's maximum for auto-archive;
// auto_delete_interval also takes -1, which disables auto-delete (0
// deletes the sandbox as soon as it stops). The daytona provider relies
// on this check and keeps its own only as a defensive error.
func daytonaIntervalMin(setting string) int {
	if setting == "auto_delete_interval" {
		return -1
	}
	return 0
}

func daytonaIntervalDetail(setting string, n int) string {
	switch setting {
	case "auto_delete_interval":
		return fmt.Sprintf("auto_delete_interval is in minutes after the sandbox stops and must be -1 (never delete) or more (0 deletes it as soon as it stops), got %d.", n)
	case "auto_archive_interval":
		return fmt.Sprintf("auto_archive_interval is in minutes after the sandbox stops and must be 0 or more (0 means Daytona's maximum), got %d. Only auto_delete_interval takes -1.", n)
	}
	return fmt.Sprintf("%s is in minutes of inactivity and must be 0 or more (0 disables it), got %d. Only auto_delete_interval takes -1.", setting, n)
}

// sandboxAddrValue is the evaluation context value used to read a
// sandbox reference as an address: sandbox.NAME is the string
// "sandbox.NAME", sandbox.NAME["k"] the instance's address.
func (l *loader) sandboxAddrValue() cty.Value {
	if l.sandboxAddrs != cty.NilVal {
		return l.sandboxAddrs
	}
	m := map[string]cty.Value{}
	for name, s := range l.cfg.Sandboxes {
		if s.ForEach == nil {
			m[name] = cty.StringVal("sandbox." + name)
			continue
		}
		keys := map[string]cty.Value{}
		for _, si := range l.cfg.SandboxInstances {
			if si.Name == name {
				keys[si.Key] = cty.StringVal(si.Addr)
			}
		}
		m[name] = objectOf(keys)
	}
	for name := range l.names["sandbox"] {
		if _, ok := m[name]; !ok {
			m[name] = cty.DynamicVal // failed to decode; errors already reported
		}
	}
	// Sandboxes are all decoded before agents and runs refer to them.
	l.sandboxAddrs = objectOf(m)
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

// ---- agents ----

var agentSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "model"}, {Name: "provider"}, {Name: "instructions"}, {Name: "sandbox"},
		{Name: "capabilities"}, {Name: "handoffs"}, {Name: "output_schema"}, {Name: "max_turns"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "tool", LabelNames: []string{"name"}}, {Type: "settings"}},
}

var toolSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "agent", Required: true}, {Name: "description"}}}

var agentSettingsSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "reasoning_effort"}, {Name: "reasoning_summary"}, {Name: "verbosity"}, {Name: "temperature"},
	{Name: "top_p"}, {Name: "max_output_tokens"}, {Name: "parallel_tool_calls"}, {Name: "tool_choice"},
}}

func (l *loader) decodeAgent(b *hcl.Block) {
	name := b.Labels[0]
	ag := &Agent{Name: name, DeclRange: b.DefRange}
	l.cfg.Agents[name] = ag
	content, diags := b.Body.Content(agentSchema)
	l.diags = append(l.diags, diags...)
	attrs := content.Attributes
	sc := scope{where: "an agent"}
	val := func(attr, what string) (cty.Value, hcl.Range, bool) {
		a, ok := attrs[attr]
		if !ok {
			return cty.NilVal, hcl.Range{}, false
		}
		v, ok := l.eval(a.Expr, sc, nil, nil)
		if !ok || !l.noSensitive(v, a.Expr.Range(), what) {
			return cty.NilVal, a.Expr.Range(), false
		}
		return v, a.Expr.Range(), true
	}
	if v, r, ok := val("model", "An agent's model"); ok {
		ag.Model, _ = l.toString(v, r, "model")
	}
	if a, ok := attrs["provider"]; ok {
		ag.Provider, _ = l.resolveProvider(a.Expr, modelProviderTypes, "An agent")
	}
	if ag.Model == "" && !diags.HasErrors() && !strings.HasPrefix(ag.Provider, "provider.scripted") {
		if _, ok := attrs["model"]; !ok {
			l.errorf(b.DefRange, "Missing required argument", "Agent %q needs model = \"...\" (for example model = var.model). Only agents using a scripted provider may omit it.", name)
		}
	}
	if v, r, ok := val("instructions", "Instructions (they are sent to the model)"); ok {
		ag.Instructions, _ = l.toString(v, r, "instructions")
	}
	if a, ok := attrs["sandbox"]; ok {
		ag.Sandbox, _ = l.sandboxRef(a, nil)
	}
	if a, ok := attrs["capabilities"]; ok {
		exprs, diags := hcl.ExprList(a.Expr)
		l.diags = append(l.diags, diags...)
		for _, e := range exprs {
			tr, ok := l.traversalAddr(e, "capability", "capability.TYPE.NAME")
			if !ok {
				continue
			}
			typ, _, ok1 := stepName(tr, 1)
			cn, _, ok2 := stepName(tr, 2)
			if !ok1 || !ok2 || len(tr) != 3 {
				l.errorf(e.Range(), "Invalid reference", "Expected capability.TYPE.NAME, like capability.shell.default.")
				continue
			}
			key := typ + "." + cn
			if !l.declared("capability", key) {
				l.errorf(e.Range(), "Reference to undeclared capability", "There is no capability %q %q.%s Declare it with capability %q %q {}.", typ, cn, suggest(key, l.declaredNames("capability")), typ, cn)
				continue
			}
			if oneOf("capability."+key, ag.Capabilities...) {
				l.errorf(e.Range(), "Duplicate capability", "capability.%s is listed twice.", key)
				continue
			}
			ag.Capabilities = append(ag.Capabilities, "capability."+key)
			l.capRefs[name+" capability."+key] = e.Range()
		}
		if ag.Sandbox == "" {
			for i, c := range ag.Capabilities {
				if strings.HasPrefix(c, "capability.shell.") || strings.HasPrefix(c, "capability.filesystem.") || strings.HasPrefix(c, "capability.command.") {
					l.errorf(exprs[i].Range(), "Capability needs a sandbox", "%s runs in a sandbox, but agent %q has none. Set sandbox = sandbox.NAME on the agent.", c, name)
					break
				}
			}
		}
	}
	if a, ok := attrs["handoffs"]; ok {
		exprs, diags := hcl.ExprList(a.Expr)
		l.diags = append(l.diags, diags...)
		for _, e := range exprs {
			if n, ok := l.namedRef(e, "agent", "agent"); ok {
				ag.Handoffs = append(ag.Handoffs, n)
			}
		}
	}
	if v, r, ok := val("output_schema", "An output schema"); ok && l.known(v, r, "output_schema") && !v.IsNull() {
		if !v.Type().IsObjectType() && !v.Type().IsMapType() {
			l.typeErr(r, "output_schema", "a JSON Schema object, like { type = \"object\", properties = {...} }", nil)
		} else if js, err := ctyjson.Marshal(v, v.Type()); err != nil {
			l.typeErr(r, "output_schema", "representable as JSON", err)
		} else {
			var m map[string]any
			_ = json.Unmarshal(js, &m)
			if t, _ := m["type"].(string); t != "object" {
				l.errorf(r, "Invalid output_schema", "output_schema must describe an object: set type = \"object\" with properties.")
			}
			ag.OutputSchema = js
		}
	}
	if v, r, ok := val("max_turns", "max_turns"); ok {
		if n, ok := l.toInt(v, r, "max_turns"); ok {
			if n < 1 {
				l.errorf(r, "Invalid max_turns", "max_turns must be at least 1, got %d.", n)
			}
			ag.MaxTurns = n
		}
	}
	seenSettings := false
	for _, tb := range content.Blocks {
		switch tb.Type {
		case "tool":
			l.decodeAgentTool(ag, tb)
		case "settings":
			if seenSettings {
				l.errorf(tb.DefRange, "Duplicate settings block", "An agent may have one settings block.")
				continue
			}
			seenSettings = true
			l.decodeAgentSettings(ag, tb)
		}
	}
}

func (l *loader) decodeAgentTool(ag *Agent, tb *hcl.Block) {
	tname := tb.Labels[0]
	if !toolNameRe.MatchString(tname) {
		l.errorf(tb.LabelRanges[0], "Invalid tool name", "%q is not a valid tool name: use 1 to 64 letters, digits, underscores or dashes.", tname)
		return
	}
	for _, t := range ag.Tools {
		if t.Name == tname {
			l.errorf(tb.LabelRanges[0], "Duplicate tool", "Agent %q already has a tool named %q at %s.", ag.Name, tname, rangeString(t.DeclRange))
			return
		}
	}
	tc, diags := tb.Body.Content(toolSchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return
	}
	t := AgentTool{Name: tname, DeclRange: tb.DefRange}
	var ok bool
	if t.Agent, ok = l.namedRef(tc.Attributes["agent"].Expr, "agent", "agent"); !ok {
		return
	}
	if a, has := tc.Attributes["description"]; has {
		if v, good := l.eval(a.Expr, scope{where: "an agent"}, nil, nil); good && l.noSensitive(v, a.Expr.Range(), "A tool description") {
			t.Description, _ = l.toString(v, a.Expr.Range(), "description")
		}
	}
	ag.Tools = append(ag.Tools, t)
}

func (l *loader) decodeAgentSettings(ag *Agent, b *hcl.Block) {
	content, diags := b.Body.Content(agentSettingsSchema)
	l.diags = append(l.diags, diags...)
	s := &ag.Settings
	for name, a := range content.Attributes {
		v, ok := l.eval(a.Expr, scope{where: "agent settings"}, nil, nil)
		if !ok || !l.noSensitive(v, a.Expr.Range(), "An agent setting") {
			continue
		}
		r := a.Expr.Range()
		enum := func(allowed ...string) string {
			str, ok := l.toString(v, r, name)
			if ok && !oneOf(str, allowed...) {
				l.errorf(r, "Invalid "+name, "%s must be one of %s, not %q.%s", name, quoteList(allowed), str, suggest(str, allowed))
			}
			return str
		}
		switch name {
		case "reasoning_effort":
			s.ReasoningEffort = enum("none", "minimal", "low", "medium", "high", "xhigh")
		case "reasoning_summary":
			s.ReasoningSummary = enum("auto", "concise", "detailed")
		case "verbosity":
			s.Verbosity = enum("low", "medium", "high")
		case "tool_choice":
			s.ToolChoice, _ = l.toString(v, r, name)
		case "temperature", "top_p":
			if f, ok := l.toFloat(v, r, name); ok && !v.IsNull() {
				if name == "temperature" {
					s.Temperature = &f
				} else {
					s.TopP = &f
				}
			}
		case "max_output_tokens":
			s.MaxOutputTokens, _ = l.toInt64(v, r, name)
		case "parallel_tool_calls":
			if bv, ok := l.toBool(v, r, name); ok && !v.IsNull() {
				s.ParallelToolCalls = &bv
			}
		}
	}
}

// ---- runs ----

var runSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "agent", Required: true}, {Name: "input", Required: true}, {Name: "sandbox"},
	{Name: "max_turns"}, {Name: "depends_on"}, {Name: "for_each"},
}}

func (l *loader) decodeRun(b *hcl.Block) {
	name := b.Labels[0]
	r := &Run{Name: name, DeclRange: b.DefRange}
	l.cfg.Runs[name] = r
	content, diags := b.Body.Content(runSchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return
	}
	attrs := content.Attributes
	agent, ok := l.namedRef(attrs["agent"].Expr, "agent", "agent")
	if !ok {
		return
	}
	instances := []eachVal{{}}
	if a, ok := attrs["for_each"]; ok {
		r.ForEach = a.Expr
		if instances, ok = l.forEach(a); !ok {
			return
		}
	}
	var depends []hcl.Traversal
	if a, ok := attrs["depends_on"]; ok {
		exprs, diags := hcl.ExprList(a.Expr)
		l.diags = append(l.diags, diags...)
		for _, e := range exprs {
			tr, diags := hcl.AbsTraversalForExpr(e)
			if diags.HasErrors() || !oneOf(tr.RootName(), "run", "sandbox") {
				l.errorf(e.Range(), "Invalid depends_on reference", "depends_on lists runs and sandboxes, like [run.NAME, sandbox.NAME], without quotes.")
				continue
			}
			depends = append(depends, tr)
		}
	}
	for _, ev := range instances {
		var each *eachVal
		if r.ForEach != nil {
			e := ev
			each = &e
		}
		ri := &RunInstance{
			Addr: instanceAddr("run", name, ev.key, r.ForEach != nil), Name: name, Key: ev.key,
			Agent: agent, InputExpr: attrs["input"].Expr, DeclRange: b.DefRange,
		}
		if each != nil {
			ri.eachValue = ev.value
		}
		if a, ok := attrs["sandbox"]; ok {
			ri.Sandbox, _ = l.sandboxRef(a, each)
		}
		if a, ok := attrs["max_turns"]; ok {
			if v, good := l.eval(a.Expr, scope{each: each != nil, where: "max_turns"}, each, nil); good {
				if n, good := l.toInt(v, a.Expr.Range(), "max_turns"); good {
					if n < 1 {
						l.errorf(a.Expr.Range(), "Invalid max_turns", "max_turns must be at least 1, got %d.", n)
					}
					ri.MaxTurns = n
				}
			}
		}
		l.dependsOn[ri.Addr] = depends
		l.cfg.RunInstances[ri.Addr] = ri
	}
}

// traversalTargets resolves a run.* or sandbox.* traversal to the
// instance addresses it designates: one instance when a literal key is
// given, every instance of the block otherwise. With report, unknown
// names and keys are errors (for depends_on).
func (l *loader) traversalTargets(tr hcl.Traversal, report bool) []string {
	kind := tr.RootName()
	name, nrng, ok := stepName(tr, 1)
	if !ok {
		return nil
	}
	if !l.declared(kind, name) {
		if report {
			l.errorf(hcl.RangeBetween(tr[0].SourceRange(), nrng), "Reference to undeclared "+kind, "There is no %s named %q.%s", kind, name, suggest(name, l.declaredNames(kind)))
		}
		return nil
	}
	var all []string
	if kind == "run" {
		for addr, ri := range l.cfg.RunInstances {
			if ri.Name == name {
				all = append(all, addr)
			}
		}
	} else {
		for addr, si := range l.cfg.SandboxInstances {
			if si.Name == name {
				all = append(all, addr)
			}
		}
	}
	sort.Strings(all)
	if len(tr) > 2 {
		if ix, ok := tr[2].(hcl.TraverseIndex); ok && ix.Key.Type() == cty.String {
			addr := fmt.Sprintf("%s.%s[%q]", kind, name, ix.Key.AsString())
			if oneOf(addr, all...) {
				return []string{addr}
			}
			if report {
				l.errorf(tr.SourceRange(), "Invalid instance key", "%s.%s has no instance %q.", kind, name, ix.Key.AsString())
			}
			return nil
		}
	}
	return all
}

// ---- outputs ----

var outputSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "value", Required: true}, {Name: "sensitive"}, {Name: "description"},
}}

func (l *loader) decodeOutput(b *hcl.Block) {
	o := &Output{Name: b.Labels[0], DeclRange: b.DefRange}
	content, diags := b.Body.Content(outputSchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return
	}
	o.Expr = content.Attributes["value"].Expr
	if a, ok := content.Attributes["sensitive"]; ok {
		if v, ok := l.eval(a.Expr, scope{where: "an output's sensitive argument"}, nil, nil); ok {
			o.Sensitive, _ = l.toBool(v, a.Expr.Range(), "sensitive")
		}
	}
	if a, ok := content.Attributes["description"]; ok {
		o.Description, _ = l.staticString(a)
	}
	l.cfg.Outputs[o.Name] = o
}

// settingAttr evaluates the attribute name of attrs when it is present. A
// sensitive value is refused with an error that starts with what ("A
// sandbox argument"), since only ephemeral env entries, provider settings
// and sensitive outputs may hold one.
func (l *loader) settingAttr(attrs hcl.Attributes, name string, sc scope, each *eachVal, what string) (cty.Value, hcl.Range, bool) {
	a, ok := attrs[name]
	if !ok {
		return cty.NilVal, hcl.Range{}, false
	}
	v, ok := l.eval(a.Expr, sc, each, nil)
	if !ok || !l.noSensitive(v, a.Expr.Range(), what) {
		return cty.NilVal, a.Expr.Range(), false
	}
	return v, a.Expr.Range(), true
}

// nonNegativeAttr evaluates an optional whole-number setting (0 when
// absent) and reports a negative value as an error at its range.
func (l *loader) nonNegativeAttr(attrs hcl.Attributes, name string, sc scope, each *eachVal, what string) int64 {
	v, r, ok := l.settingAttr(attrs, name, sc, each, what)
	if !ok {
		return 0
	}
	n, ok := l.toInt64(v, r, name)
	if ok && n < 0 {
		l.errorf(r, "Invalid "+name, "%s must be 0 or more, got %d.", name, n)
	}
	return n
}
