package config

import (
	"maps"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/addrs"
)

// Import is an import block: an existing sandbox (a container, a local
// sandbox directory, a Pod, a hosted sandbox) the next apply adopts as
// the sandbox at To instead of creating one.
type Import struct {
	// To is the sandbox instance address (sandbox.NAME, sandbox.NAME["key"]).
	To string
	// ID is the provider's id of the sandbox to adopt.
	ID        string
	DeclRange hcl.Range
}

var importSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
	{Name: "to", Required: true},
	{Name: "id", Required: true},
}}

// decodeImport decodes one import block, after the sandboxes: To must
// name a sandbox instance of the configuration, and only one import
// block may name it.
func (l *loader) decodeImport(b *hcl.Block) {
	content, diags := b.Body.Content(importSchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return
	}
	to, ok := l.importTarget(content.Attributes["to"])
	if !ok {
		return
	}
	idAttr := content.Attributes["id"]
	v, ok := l.eval(idAttr.Expr, scope{where: "an import block's id"}, nil, nil)
	if !ok || !l.noSensitive(v, idAttr.Expr.Range(), "An import block's id") {
		return
	}
	id, ok := l.toString(v, idAttr.Expr.Range(), "id")
	if !ok {
		return
	}
	if strings.TrimSpace(id) == "" {
		l.errorf(idAttr.Expr.Range(), "Empty import id", "id must name the sandbox to adopt: a container id or name (docker), a sandbox directory (local), a Pod name (kubernetes), a sandbox id (daytona, e2b).")
		return
	}
	if prev := l.cfg.Imports[to]; prev != nil {
		l.errorf(b.DefRange, "Duplicate import block", "%s is already imported by the block at %s: one sandbox can adopt only one existing sandbox.", to, rangeString(prev.DeclRange))
		return
	}
	l.cfg.Imports[to] = &Import{To: to, ID: id, DeclRange: b.DefRange}
}

// importTarget reads an import block's to: a sandbox instance address,
// written as a reference (to = sandbox.box), that the configuration
// declares.
func (l *loader) importTarget(a *hcl.Attribute) (string, bool) {
	rng := a.Expr.Range()
	src := ""
	if f := l.cfg.Files[rng.Filename]; f != nil && rng.End.Byte <= len(f.Bytes) {
		src = strings.Join(strings.Fields(string(rng.SliceBytes(f.Bytes))), "")
	}
	addr, err := addrs.ParseInstance(src)
	if err != nil || addr.Kind() != addrs.KindSandbox {
		l.errorf(rng, "Invalid import target", "to must be a sandbox address, such as to = sandbox.box or to = sandbox.review[\"eu\"], written without quotes.")
		return "", false
	}
	to := addr.String()
	if _, ok := l.cfg.SandboxInstances[to]; !ok {
		l.errorf(rng, "Import into an undeclared sandbox", "%s is not a sandbox of this configuration: declare the sandbox block the existing sandbox is adopted as.%s", to, suggest(to, slices.Sorted(maps.Keys(l.cfg.SandboxInstances))))
		return "", false
	}
	return to, true
}
