package config

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/agentctl/agentctl/graph"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// EnvVarPrefix is the prefix of environment variables that set input
// variables: AGENTCTL_VAR_name=value.
const EnvVarPrefix = "AGENTCTL_VAR_"

var variableSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "type"}, {Name: "default"}, {Name: "description"}, {Name: "sensitive"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "validation"}},
}

var validationSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "condition", Required: true}, {Name: "error_message", Required: true},
	},
}

type varSource struct {
	val cty.Value
	rng *hcl.Range // nil for -var and environment values
	src string     // where the value came from, for messages
}

// decodeVariables decodes variable blocks and assigns each its final
// value. Precedence, lowest first: default, AGENTCTL_VAR_name in the
// environment, -var-file files in order, -var arguments in order.
func (l *loader) decodeVariables() {
	l.vars = map[string]cty.Value{}
	l.valueRanges = map[string]hcl.Range{}
	type pending struct {
		v           *Variable
		validations []*hcl.Block
	}
	var all []pending
	hasDefaultAttr := map[string]bool{}
	for _, b := range l.varBlocks {
		name := b.Labels[0]
		if oneOf(name, "each", "run", "sandbox", "agent", "count", "for_each", "depends_on") {
			l.errorf(b.LabelRanges[0], "Invalid variable name", "The name %q is reserved: choose another name.", name)
			continue
		}
		v := &Variable{Name: name, Type: cty.DynamicPseudoType, Default: cty.NilVal, DeclRange: b.DefRange}
		content, diags := b.Body.Content(variableSchema)
		l.diags = append(l.diags, diags...)
		if a, ok := content.Attributes["type"]; ok {
			ty, diags := typeexpr.TypeConstraint(a.Expr)
			l.diags = append(l.diags, diags...)
			if !diags.HasErrors() {
				v.Type = ty
			}
		}
		if a, ok := content.Attributes["description"]; ok {
			v.Description, _ = l.staticString(a)
		}
		if a, ok := content.Attributes["sensitive"]; ok {
			val, diags := a.Expr.Value(nil)
			l.diags = append(l.diags, diags...)
			if !diags.HasErrors() {
				v.Sensitive, _ = l.toBool(val, a.Expr.Range(), "sensitive")
			}
		}
		_, hasDefault := content.Attributes["default"]
		if hasDefault {
			hasDefaultAttr[name] = true
		}
		if a, ok := content.Attributes["default"]; ok {
			val, diags := a.Expr.Value(&hcl.EvalContext{Functions: l.funcs})
			if len(a.Expr.Variables()) > 0 {
				l.errorf(a.Expr.Range(), "Variables not allowed", "A variable's default must be a literal value; it can't refer to other variables or objects.")
			} else {
				l.diags = append(l.diags, diags...)
				if !diags.HasErrors() {
					cv, err := convert.Convert(val, v.Type)
					if err != nil {
						l.errorf(a.Expr.Range(), "Invalid default value for variable",
							"This default value is not compatible with the variable's type constraint %s: %s.", typeexpr.TypeString(v.Type), err)
					} else {
						v.Default = cv
					}
				}
			}
		}
		l.cfg.Variables[name] = v
		all = append(all, pending{v, content.Blocks})
	}

	sources := l.variableSources()
	for _, p := range all {
		v := p.v
		val := v.Default
		if s, ok := sources[v.Name]; ok {
			if s.rng != nil {
				l.valueRanges[v.Name] = *s.rng
			}
			cv, err := convert.Convert(s.val, v.Type)
			if err != nil {
				r := v.DeclRange
				if s.rng != nil {
					r = *s.rng
				}
				l.errorf(r, "Invalid value for variable",
					"The value for var.%s from %s is not compatible with its type constraint %s: %s.", v.Name, s.src, typeexpr.TypeString(v.Type), err)
				cv = cty.UnknownVal(v.Type)
			}
			val = cv
		}
		if val == cty.NilVal && !hasDefaultAttr[v.Name] {
			l.errorf(v.DeclRange, "No value for required variable",
				"The variable %q has no default, so it needs a value: pass -var '%s=...', a -var-file, or set %s%s in the environment.", v.Name, v.Name, EnvVarPrefix, v.Name)
		}
		if val == cty.NilVal {
			val = cty.UnknownVal(v.Type)
		}
		if v.Sensitive {
			l.col.addValue(val)
			val = val.Mark(sensitiveMark)
		}
		v.Value = val
		l.vars[v.Name] = val
	}
	// Validation rules see every variable.
	for _, p := range all {
		for _, vb := range p.validations {
			l.checkValidation(p.v, vb)
		}
	}
}

func (l *loader) checkValidation(v *Variable, b *hcl.Block) {
	content, diags := b.Body.Content(validationSchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return
	}
	cond := content.Attributes["condition"]
	for _, tr := range cond.Expr.Variables() {
		if tr.RootName() != "var" {
			l.errorf(tr.SourceRange(), "Invalid reference in variable validation", "A validation condition may refer only to input variables.")
			return
		}
		if n, _, _ := stepName(tr, 1); n != v.Name {
			l.errorf(tr.SourceRange(), "Invalid reference in variable validation",
				"The condition for variable %q can only refer to the variable itself, using var.%s.", v.Name, v.Name)
			return
		}
	}
	if !v.Value.IsWhollyKnown() {
		return
	}
	ctx := l.ctx(cond.Expr, nil, nil)
	res, diags := cond.Expr.Value(ctx)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return
	}
	res, _ = res.Unmark()
	ok, conv := l.toBool(res, cond.Expr.Range(), "condition")
	if !conv {
		return
	}
	if res.IsNull() {
		l.errorf(cond.Expr.Range(), "Invalid validation result", "The condition must be true or false, not null.")
		return
	}
	if !ok {
		msgV, diags := content.Attributes["error_message"].Expr.Value(ctx)
		l.diags = append(l.diags, diags...)
		msg, _ := l.toString(msgV, content.Attributes["error_message"].Expr.Range(), "error_message")
		if v.Sensitive {
			msg = "(the error message is hidden because the variable is sensitive)"
		}
		subject := cond.Expr.Range()
		if r, ok := l.valueRanges[v.Name]; ok {
			subject = r // where the offending value was set
		}
		l.errorf(subject, "Invalid value for variable",
			"%s\n\nThis was checked by the validation rule for var.%s at %s.", msg, v.Name, rangeString(b.DefRange))
	}
}

// variableSources collects values from the environment, var files and
// -var arguments, the later overriding the earlier.
func (l *loader) variableSources() map[string]varSource {
	out := map[string]varSource{}
	for _, kv := range l.opts.Environ {
		if !strings.HasPrefix(kv, EnvVarPrefix) {
			continue
		}
		name, raw, _ := strings.Cut(kv[len(EnvVarPrefix):], "=")
		v, ok := l.cfg.Variables[name]
		if !ok {
			continue // like Terraform: undeclared environment values are ignored
		}
		val, ok := l.parseRawValue(v, raw, "the environment variable "+EnvVarPrefix+name)
		if ok {
			out[name] = varSource{val: val, src: "the environment variable " + EnvVarPrefix + name}
		}
	}
	for _, f := range l.autoVarFiles() {
		l.readVarFile(f, out)
	}
	for _, f := range l.opts.VarFiles {
		l.readVarFile(f, out)
	}
	for _, arg := range l.opts.Vars {
		name, raw, found := strings.Cut(arg, "=")
		if !found || name == "" {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid -var option",
				Detail:   fmt.Sprintf("The given -var option %q is not correctly specified. It must be a variable name and value separated by an equals sign, like -var=\"key=value\".", arg),
			})
			continue
		}
		v, ok := l.cfg.Variables[name]
		if !ok {
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Value for undeclared variable",
				Detail:   fmt.Sprintf("A variable named %q was assigned on the command line, but the configuration does not declare it.%s Declare it with a variable block or remove the -var option.", name, suggest(name, slices.Sorted(maps.Keys(l.cfg.Variables)))),
			})
			continue
		}
		if val, ok := l.parseRawValue(v, raw, "-var "+name); ok {
			out[name] = varSource{val: val, src: "the -var option"}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(l.opts.Values)) {
		tv := l.opts.Values[name]
		if _, ok := l.cfg.Variables[name]; !ok {
			r := tv.Range
			l.errorf(r, "Value for undeclared variable",
				"A variable named %q is set here, but the configuration does not declare it.%s Declare it with a variable block or remove the value.", name, suggest(name, slices.Sorted(maps.Keys(l.cfg.Variables))))
			continue
		}
		r := tv.Range
		out[name] = varSource{val: tv.Value, src: "the test's variables", rng: &r}
	}
	return out
}

// autoVarFiles lists the variable files loaded without -var-file, as
// Terraform loads terraform.tfvars and *.auto.tfvars: agentctl.vars.hcl
// (or .json), then *.auto.vars.hcl (or .json) in lexical order, from the
// configuration directory.
func (l *loader) autoVarFiles() []string {
	var out []string
	for _, n := range []string{"agentctl.vars.hcl", "agentctl.vars.json"} {
		p := filepath.Join(l.cfg.Dir, n)
		if _, err := os.Stat(p); err == nil {
			out = append(out, l.relToPath(p))
		}
	}
	var auto []string
	for _, pat := range []string{"*.auto.vars.hcl", "*.auto.vars.json"} {
		m, _ := filepath.Glob(filepath.Join(l.cfg.Dir, pat))
		auto = append(auto, m...)
	}
	sort.Strings(auto)
	for _, p := range auto {
		out = append(out, l.relToPath(p))
	}
	return out
}

// relToPath shows an auto-loaded file relative to the working directory
// when it is below it, for shorter diagnostics.
func (l *loader) relToPath(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
	}
	return p
}

// parseRawValue reads a command-line or environment value: taken
// literally for primitive and unconstrained types, parsed as an HCL
// expression for collections and objects (as Terraform does).
func (l *loader) parseRawValue(v *Variable, raw, src string) (cty.Value, bool) {
	if v.Type.IsPrimitiveType() || v.Type == cty.DynamicPseudoType {
		return cty.StringVal(raw), true
	}
	expr, diags := parseExpression([]byte(raw), src)
	if diags.HasErrors() {
		l.diags = append(l.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for variable",
			Detail:   fmt.Sprintf("The value of var.%s from %s is not a valid HCL expression: %s.", v.Name, src, diags[0].Summary),
		})
		return cty.NilVal, false
	}
	val, diags := expr.Value(nil)
	if diags.HasErrors() {
		l.diags = append(l.diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Invalid value for variable",
			Detail:   fmt.Sprintf("The value of var.%s from %s must be a literal: %s.", v.Name, src, diags[0].Detail),
		})
		return cty.NilVal, false
	}
	return val, true
}

func (l *loader) readVarFile(path string, out map[string]varSource) {
	file, diags := parseFile(path)
	if file != nil {
		l.cfg.Files[path] = file
	}
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() || file == nil {
		if file == nil && len(diags) == 0 {
			l.diags = append(l.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Failed to read variables file", Detail: fmt.Sprintf("Could not read %s.", path)})
		}
		return
	}
	attrs, diags := file.Body.JustAttributes()
	l.diags = append(l.diags, diags...)
	for name, a := range attrs {
		if _, ok := l.cfg.Variables[name]; !ok {
			r := a.NameRange
			l.diags = append(l.diags, &hcl.Diagnostic{
				Severity: hcl.DiagWarning,
				Summary:  "Value for undeclared variable",
				Detail:   fmt.Sprintf("The variables file sets %q, but the configuration declares no such variable; the value is ignored.%s", name, suggest(name, slices.Sorted(maps.Keys(l.cfg.Variables)))),
				Subject:  &r,
			})
			continue
		}
		val, diags := a.Expr.Value(nil)
		l.diags = append(l.diags, diags...)
		if diags.HasErrors() {
			continue
		}
		r := a.Expr.Range()
		out[name] = varSource{val: val, rng: &r, src: path}
	}
}

// decodeLocals evaluates locals in dependency order.
func (l *loader) decodeLocals() {
	l.locals = map[string]cty.Value{}
	g := graph.New()
	for name, a := range l.localAttrs {
		l.cfg.Locals[name] = &Local{Name: name, Expr: a.Expr, DeclRange: a.Range}
		g.AddNode(name)
		for _, tr := range a.Expr.Variables() {
			if tr.RootName() == "local" {
				if n, _, ok := stepName(tr, 1); ok && l.declared("local", n) {
					g.AddEdge(name, n)
				}
			}
		}
	}
	cycles := g.Cycles()
	for _, cyc := range cycles {
		var parts []string
		for _, n := range cyc {
			parts = append(parts, fmt.Sprintf("local.%s (%s)", n, rangeString(l.localAttrs[n].NameRange)))
			l.locals[n] = cty.DynamicVal
		}
		l.errorf(l.localAttrs[cyc[0]].NameRange, "Cycle in local values",
			"Local values refer to each other in a cycle: %s. Break the cycle by removing one of the references.", strings.Join(parts, ", "))
	}
	if len(cycles) > 0 {
		return
	}
	order, _ := g.TopoOrder()
	for _, name := range order {
		a := l.localAttrs[name]
		v, ok := l.eval(a.Expr, scope{where: "a local value"}, nil, nil)
		if !ok {
			v = cty.DynamicVal
		}
		l.locals[name] = v
	}
}
