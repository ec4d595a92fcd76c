package config

import (
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/agentctl/agentctl/providers/registry"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"

	"github.com/agentctl/agentctl/addrs"
)

// valueMark is the type of cty marks the language uses.
type valueMark string

// sensitiveMark marks values from sensitive variables and env().
const sensitiveMark = valueMark("sensitive")

// scope says which reference roots an expression may use.
type scope struct {
	each    bool // each.key, each.value
	run     bool // run.NAME.output (late)
	sandbox bool // sandbox.NAME.urls (late)
	// where names the place for messages, e.g. "a sandbox argument".
	where string
}

var valueRoots = []string{"var", "local", "each", "run", "sandbox", "agent", "manifest", "capability", "provider"}

// suggest returns a "Did you mean ...?" sentence for the closest
// candidate, or "" (the provider types' decoders use the same).
func suggest(given string, candidates []string) string { return registry.Suggest(given, candidates) }

// checkRefs validates every reference in expr against the declared names
// and the scope. It reports and returns false on any problem.
func (l *loader) checkRefs(expr hcl.Expression, sc scope) bool {
	ok := true
	for _, tr := range expr.Variables() {
		if !l.checkTraversal(tr, sc) {
			ok = false
		}
	}
	return ok
}

func stepName(tr hcl.Traversal, i int) (string, hcl.Range, bool) {
	if i >= len(tr) {
		return "", hcl.Range{}, false
	}
	switch s := tr[i].(type) {
	case hcl.TraverseAttr:
		return s.Name, s.SrcRange, true
	case hcl.TraverseIndex:
		if s.Key.Type() == cty.String && s.Key.IsKnown() {
			return s.Key.AsString(), s.SrcRange, true
		}
	}
	return "", tr[i].SourceRange(), false
}

func (l *loader) checkTraversal(tr hcl.Traversal, sc scope) bool {
	root := tr.RootName()
	rng := tr.SourceRange()
	kindName := map[string]string{"var": "variable", "local": "local", "run": "run", "sandbox": "sandbox"}
	switch root {
	case "var", "local", "run", "sandbox":
		if root == "run" && !sc.run || root == "sandbox" && !sc.sandbox {
			l.errorf(rng, "Invalid reference",
				"%s.* can't be used in %s: run outputs and sandbox URLs are known only during apply, so they may be used only in run inputs and outputs.", root, sc.where)
			return false
		}
		name, nrng, ok := stepName(tr, 1)
		if !ok {
			l.errorf(rng, "Invalid reference", "A reference to %s must name one, like %s.NAME.", root, root)
			return false
		}
		kind := kindName[root]
		if !l.declared(kind, name) {
			what := map[string]string{"var": "input variable", "local": "local value", "run": "run", "sandbox": "sandbox"}[root]
			hint := suggest(name, l.declaredNames(kind))
			if hint == "" {
				hint = fmt.Sprintf(" Declare it with a %s block, or fix the name.", map[string]string{"var": "variable \"" + name + "\" {}", "local": "locals", "run": "run \"" + name + "\"", "sandbox": "sandbox \"" + name + "\""}[root])
			}
			l.errorf(hcl.RangeBetween(rng, nrng), "Reference to undeclared "+what,
				"There is no %s named %q.%s", what, name, hint)
			return false
		}
	case "each":
		if !sc.each {
			l.errorf(rng, "Reference to \"each\" in context without for_each",
				"each.key and each.value may be used only in a sandbox or run block that sets for_each.")
			return false
		}
		name, nrng, ok := stepName(tr, 1)
		if !ok || (name != "key" && name != "value") {
			l.errorf(hcl.RangeBetween(rng, nrng), "Invalid \"each\" attribute", "The each object has only key and value.%s", suggest(name, []string{"key", "value"}))
			return false
		}
	case "agent", "manifest", "capability", "provider":
		l.errorf(rng, "Invalid use of a "+root+" reference",
			"%s.* is an address, not a value: use it only in the arguments that take one (for example agent = agent.NAME, sandbox's manifest = manifest.NAME).", root)
		return false
	default:
		l.errorf(rng, "Unknown reference",
			"There is no object named %q. References start with var., local., each., run. or sandbox..%s", root, suggest(root, valueRoots))
		return false
	}
	return true
}

// ctx builds the evaluation context of expr, with each set when the block
// has for_each and late values for run and sandbox. Its var and local
// objects hold only the names expr refers to, so the cost of an
// evaluation follows the expression, not the number of variables and
// locals: evaluating n locals is linear in n.
func (l *loader) ctx(expr hcl.Expression, each *eachVal, late *lateVals) *hcl.EvalContext {
	refs := expr.Variables()
	return buildCtx(l.funcs, refObject(l.vars, "var", refs), refObject(l.locals, "local", refs), each, late)
}

// refObject is the object of the values of m that refs name under root;
// all of m when a reference uses the root object itself (local[k]).
func refObject(m map[string]cty.Value, root string, refs []hcl.Traversal) cty.Value {
	picked := map[string]cty.Value{}
	for _, tr := range refs {
		if tr.RootName() != root {
			continue
		}
		name, _, ok := stepName(tr, 1)
		if !ok {
			return objectOf(m)
		}
		if v, ok := m[name]; ok {
			picked[name] = v
		}
	}
	return objectOf(picked)
}

type eachVal struct {
	key   string
	value cty.Value
}

// lateVals are the run and sandbox objects of the evaluation context.
type lateVals struct {
	run     cty.Value
	sandbox cty.Value
}

// buildCtx assembles an evaluation context from the var and local
// objects.
func buildCtx(funcs map[string]function.Function, vars, locals cty.Value, each *eachVal, late *lateVals) *hcl.EvalContext {
	v := map[string]cty.Value{
		"var":   vars,
		"local": locals,
	}
	if each != nil {
		v["each"] = cty.ObjectVal(map[string]cty.Value{"key": cty.StringVal(each.key), "value": each.value})
	}
	if late != nil {
		v["run"] = late.run
		v["sandbox"] = late.sandbox
	}
	return &hcl.EvalContext{Variables: v, Functions: funcs}
}

// addrValue is the evaluation context value that reads references to the
// blocks of one kind as addresses: NAME is the block's address (single,
// for a block without for_each); an expanded block's name is an object of
// its instances' addresses by key (instances yields name, key, address). A
// declared name that failed to decode is unknown: its errors are already
// reported.
func (l *loader) addrValue(kind string, single map[string]string, expanded []string, instances func(yield func(name, key, addr string))) cty.Value {
	m := map[string]cty.Value{}
	for name, addr := range single {
		m[name] = cty.StringVal(addr)
	}
	keys := map[string]map[string]cty.Value{}
	for _, name := range expanded {
		keys[name] = map[string]cty.Value{} // for_each over nothing: no instances
	}
	instances(func(name, key, addr string) {
		if k := keys[name]; k != nil {
			k[key] = cty.StringVal(addr)
		}
	})
	for name, k := range keys {
		m[name] = objectOf(k)
	}
	for name := range l.names[kind] {
		if _, ok := m[name]; !ok {
			m[name] = cty.DynamicVal
		}
	}
	return objectOf(m)
}

func objectOf(m map[string]cty.Value) cty.Value {
	if len(m) == 0 {
		return cty.EmptyObjectVal
	}
	return cty.ObjectVal(m)
}

// eval checks references and evaluates expr.
func (l *loader) eval(expr hcl.Expression, sc scope, each *eachVal, late *lateVals) (cty.Value, bool) {
	if !l.checkRefs(expr, sc) {
		return cty.DynamicVal, false
	}
	v, diags := expr.Value(l.ctx(expr, each, late))
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return cty.DynamicVal, false
	}
	return v, true
}

// noSensitive reports a sensitive value in a place that may not hold one.
func (l *loader) noSensitive(v cty.Value, rng hcl.Range, what string) bool {
	if !v.ContainsMarked() {
		return true
	}
	l.errorf(rng, "Sensitive value not allowed here",
		"%s can't use a sensitive value (a sensitive variable, env() or a value derived from them): it would be stored in state, plans or sent to the model. Sensitive values may flow only into ephemeral env entries (env \"NAME\" { value = ..., ephemeral = true }), provider settings and outputs with sensitive = true.", what)
	return false
}

// Typed conversions. Each reports a type error at rng naming what.

func (l *loader) typeErr(rng hcl.Range, what, want string, err error) {
	detail := fmt.Sprintf("%s must be %s", what, want)
	if err != nil {
		detail += ": " + err.Error()
	}
	l.errorf(rng, "Incorrect attribute value type", "%s.", detail)
}

func (l *loader) known(v cty.Value, rng hcl.Range, what string) bool {
	if !v.IsWhollyKnown() {
		if l.diags.HasErrors() {
			// Unknown values at load time come from variables or locals
			// that already failed; don't pile on.
			return false
		}
		l.errorf(rng, "Value not known", "%s must be known when the configuration is loaded; it can't depend on run outputs or sandbox URLs.", what)
		return false
	}
	return true
}

func (l *loader) toString(v cty.Value, rng hcl.Range, what string) (string, bool) {
	v, _ = v.UnmarkDeep()
	if v.IsNull() {
		return "", true
	}
	if !l.known(v, rng, what) {
		return "", false
	}
	s, err := convert.Convert(v, cty.String)
	if err != nil {
		l.typeErr(rng, what, "a string", err)
		return "", false
	}
	return s.AsString(), true
}

func (l *loader) toInt(v cty.Value, rng hcl.Range, what string) (int, bool) {
	n, ok := l.toInt64(v, rng, what)
	return int(n), ok
}

func (l *loader) toInt64(v cty.Value, rng hcl.Range, what string) (int64, bool) {
	bf, ok := l.toNumber(v, rng, what, "a whole number")
	if !ok || bf == nil {
		return 0, ok
	}
	i, acc := bf.Int64()
	if acc != big.Exact {
		l.typeErr(rng, what, "a whole number", fmt.Errorf("%s is not", bf.Text('g', -1)))
		return 0, false
	}
	return i, true
}

func (l *loader) toFloat(v cty.Value, rng hcl.Range, what string) (float64, bool) {
	bf, ok := l.toNumber(v, rng, what, "a number")
	if !ok || bf == nil {
		return 0, ok
	}
	f, _ := bf.Float64()
	return f, true
}

// toNumber converts v to a number, reporting a type error that says v
// must be want; a null value gives (nil, true).
func (l *loader) toNumber(v cty.Value, rng hcl.Range, what, want string) (*big.Float, bool) {
	v, _ = v.UnmarkDeep()
	if v.IsNull() {
		return nil, true
	}
	if !l.known(v, rng, what) {
		return nil, false
	}
	n, err := convert.Convert(v, cty.Number)
	if err != nil {
		l.typeErr(rng, what, want, err)
		return nil, false
	}
	return n.AsBigFloat(), true
}

func (l *loader) toBool(v cty.Value, rng hcl.Range, what string) (bool, bool) {
	v, _ = v.UnmarkDeep()
	if v.IsNull() {
		return false, true
	}
	if !l.known(v, rng, what) {
		return false, false
	}
	b, err := convert.Convert(v, cty.Bool)
	if err != nil {
		l.typeErr(rng, what, "true or false", err)
		return false, false
	}
	return b.True(), true
}

func (l *loader) toDuration(v cty.Value, rng hcl.Range, what string) (time.Duration, bool) {
	s, ok := l.toString(v, rng, what)
	if !ok || s == "" {
		return 0, ok
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		l.errorf(rng, "Invalid duration", "%s must be a duration like \"30s\", \"2m\" or \"1h30m\"; %q is not one.", what, s)
		return 0, false
	}
	return d, true
}

func (l *loader) toStringList(v cty.Value, rng hcl.Range, what string) ([]string, bool) {
	v, _ = v.UnmarkDeep()
	if v.IsNull() {
		return nil, true
	}
	if !l.known(v, rng, what) {
		return nil, false
	}
	lv, err := convert.Convert(v, cty.List(cty.String))
	if err != nil {
		l.typeErr(rng, what, "a list of strings", err)
		return nil, false
	}
	var out []string
	for _, e := range lv.AsValueSlice() {
		if e.IsNull() {
			l.typeErr(rng, what, "a list of strings", fmt.Errorf("an element is null"))
			return nil, false
		}
		out = append(out, e.AsString())
	}
	return out, true
}

func (l *loader) toStringMap(v cty.Value, rng hcl.Range, what string) (map[string]string, bool) {
	v, _ = v.UnmarkDeep()
	if v.IsNull() {
		return nil, true
	}
	if !l.known(v, rng, what) {
		return nil, false
	}
	mv, err := convert.Convert(v, cty.Map(cty.String))
	if err != nil {
		l.typeErr(rng, what, "a map of strings", err)
		return nil, false
	}
	out := map[string]string{}
	for k, e := range mv.AsValueMap() {
		if e.IsNull() {
			l.typeErr(rng, what, "a map of strings", fmt.Errorf("%s is null", k))
			return nil, false
		}
		out[k] = e.AsString()
	}
	return out, true
}

// traversalAddr reads expr as a static reference whose root is root,
// like agent.NAME, without evaluating it.
func (l *loader) traversalAddr(expr hcl.Expression, root, example string) (hcl.Traversal, bool) {
	tr, diags := hcl.AbsTraversalForExpr(expr)
	if diags.HasErrors() || tr.RootName() != root {
		l.errorf(expr.Range(), "Invalid reference",
			"Expected a reference like %s (without quotes).", example)
		return nil, false
	}
	return tr, true
}

// namedRef reads expr as root.NAME and checks that NAME is declared as kind.
func (l *loader) namedRef(expr hcl.Expression, root, kind string) (string, bool) {
	tr, ok := l.traversalAddr(expr, root, root+".NAME")
	if !ok {
		return "", false
	}
	name, nrng, ok := stepName(tr, 1)
	if !ok || len(tr) != 2 {
		l.errorf(expr.Range(), "Invalid reference", "Expected a reference like %s.NAME.", root)
		return "", false
	}
	if !l.declared(kind, name) {
		l.errorf(hcl.RangeBetween(tr[0].SourceRange(), nrng), "Reference to undeclared "+kind,
			"There is no %s named %q.%s", kind, name, suggest(name, l.declaredNames(kind)))
		return "", false
	}
	return name, true
}

// instanceAddr formats an instance address.
func instanceAddr(kind, name, key string, hasForEach bool) string {
	a := addrs.Instance{Type: addrs.Kind(kind), Name: name}
	if hasForEach {
		a.Key = addrs.StringKey(key)
	}
	return a.String()
}

func oneOf(s string, allowed ...string) bool {
	for _, a := range allowed {
		if s == a {
			return true
		}
	}
	return false
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
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
