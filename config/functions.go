package config

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"

	"github.com/hashicorp/go-cty-funcs/collection"
	"github.com/hashicorp/go-cty-funcs/crypto"
	"github.com/hashicorp/go-cty-funcs/encoding"
	"github.com/hashicorp/go-cty-funcs/filesystem"
	"github.com/hashicorp/go-cty-funcs/uuid"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	ctyyaml "github.com/zclconf/go-cty-yaml"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
)

// sensitiveCollector records every sensitive string value that flows
// through evaluation (env() results, sensitive variables, credentials).
type sensitiveCollector struct {
	mu     sync.Mutex
	values map[string]struct{}
}

func (s *sensitiveCollector) add(v string) {
	if v == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.values == nil {
		s.values = map[string]struct{}{}
	}
	s.values[v] = struct{}{}
}

// addValue records every string leaf of v.
func (s *sensitiveCollector) addValue(v cty.Value) {
	v, _ = v.UnmarkDeep()
	if !v.IsWhollyKnown() || v.IsNull() {
		return
	}
	switch {
	case v.Type() == cty.String:
		s.add(v.AsString())
	case v.CanIterateElements():
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			s.addValue(e)
		}
	}
}

// functions returns the function table of the language: go-cty's stdlib,
// try/can, type conversion, go-cty-funcs' filesystem, encoding, crypto,
// uuid and collection sets with paths relative to baseDir, plus env()
// reading from environ and marking its result sensitive.
func functions(baseDir string, environ []string, col *sensitiveCollector) map[string]function.Function {
	funcs := map[string]function.Function{
		"abs":             stdlib.AbsoluteFunc,
		"base64decode":    encoding.Base64DecodeFunc,
		"base64encode":    encoding.Base64EncodeFunc,
		"bcrypt":          boundedBcryptFunc(),
		"can":             tryfunc.CanFunc,
		"ceil":            stdlib.CeilFunc,
		"chomp":           stdlib.ChompFunc,
		"chunklist":       stdlib.ChunklistFunc,
		"coalesce":        collection.CoalesceFunc,
		"coalescelist":    stdlib.CoalesceListFunc,
		"compact":         stdlib.CompactFunc,
		"concat":          stdlib.ConcatFunc,
		"contains":        stdlib.ContainsFunc,
		"convert":         typeexpr.ConvertFunc,
		"csvdecode":       stdlib.CSVDecodeFunc,
		"distinct":        stdlib.DistinctFunc,
		"element":         stdlib.ElementFunc,
		"flatten":         stdlib.FlattenFunc,
		"floor":           stdlib.FloorFunc,
		"format":          stdlib.FormatFunc,
		"formatdate":      stdlib.FormatDateFunc,
		"formatlist":      stdlib.FormatListFunc,
		"indent":          stdlib.IndentFunc,
		"index":           stdlib.IndexFunc,
		"join":            stdlib.JoinFunc,
		"jsondecode":      stdlib.JSONDecodeFunc,
		"jsonencode":      stdlib.JSONEncodeFunc,
		"keys":            stdlib.KeysFunc,
		"length":          lengthFunc,
		"log":             stdlib.LogFunc,
		"lookup":          stdlib.LookupFunc,
		"lower":           stdlib.LowerFunc,
		"max":             stdlib.MaxFunc,
		"md5":             crypto.Md5Func,
		"merge":           stdlib.MergeFunc,
		"min":             stdlib.MinFunc,
		"parseint":        stdlib.ParseIntFunc,
		"pow":             stdlib.PowFunc,
		"range":           stdlib.RangeFunc,
		"regex":           stdlib.RegexFunc,
		"regexall":        stdlib.RegexAllFunc,
		"regex_replace":   stdlib.RegexReplaceFunc,
		"replace":         stdlib.ReplaceFunc,
		"reverse":         stdlib.ReverseListFunc,
		"rsadecrypt":      crypto.RsaDecryptFunc,
		"setintersection": stdlib.SetIntersectionFunc,
		"setproduct":      stdlib.SetProductFunc,
		"setsubtract":     stdlib.SetSubtractFunc,
		"setunion":        stdlib.SetUnionFunc,
		"sha1":            crypto.Sha1Func,
		"sha256":          crypto.Sha256Func,
		"sha512":          crypto.Sha512Func,
		"signum":          stdlib.SignumFunc,
		"slice":           stdlib.SliceFunc,
		"sort":            stdlib.SortFunc,
		"split":           stdlib.SplitFunc,
		"strrev":          stdlib.ReverseFunc,
		"substr":          stdlib.SubstrFunc,
		"timeadd":         stdlib.TimeAddFunc,
		"title":           stdlib.TitleFunc,
		"trim":            stdlib.TrimFunc,
		"trimprefix":      stdlib.TrimPrefixFunc,
		"trimspace":       stdlib.TrimSpaceFunc,
		"trimsuffix":      stdlib.TrimSuffixFunc,
		"try":             tryfunc.TryFunc,
		"upper":           stdlib.UpperFunc,
		"urlencode":       encoding.URLEncodeFunc,
		"uuidv4":          uuid.V4Func,
		"uuidv5":          uuid.V5Func,
		"values":          stdlib.ValuesFunc,
		"yamldecode":      boundedYAMLDecodeFunc(),
		"yamlencode":      ctyyaml.YAMLEncodeFunc,
		"zipmap":          stdlib.ZipmapFunc,

		// Type conversion.
		"tobool":   stdlib.MakeToFunc(cty.Bool),
		"tolist":   toCollectionFunc(cty.List(cty.DynamicPseudoType)),
		"tomap":    toCollectionFunc(cty.Map(cty.DynamicPseudoType)),
		"tonumber": stdlib.MakeToFunc(cty.Number),
		"toset":    toCollectionFunc(cty.Set(cty.DynamicPseudoType)),
		"tostring": stdlib.MakeToFunc(cty.String),

		// Filesystem, relative to the configuration directory.
		"abspath":    filesystem.AbsPathFunc,
		"basename":   filesystem.BasenameFunc,
		"dirname":    filesystem.DirnameFunc,
		"file":       boundedFileFunc(baseDir, false),
		"filebase64": boundedFileFunc(baseDir, true),
		"fileexists": filesystem.MakeFileExistsFunc(baseDir),
		"fileset":    filesetFunc(baseDir),
		"pathexpand": filesystem.PathExpandFunc,

		"env": envFunc(environ, col),
	}
	funcs["templatefile"] = templateFileFunc(baseDir, func() map[string]function.Function { return funcs })
	return funcs
}

// envFunc returns env(NAME): the value of an environment variable from
// environ ("" when unset), marked sensitive.
func envFunc(environ []string, col *sensitiveCollector) function.Function {
	return function.New(&function.Spec{
		Description: "Returns the value of an environment variable, marked sensitive.",
		Params:      []function.Parameter{{Name: "name", Type: cty.String}},
		Type:        function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			name := args[0].AsString()
			val := ""
			prefix := name + "="
			for _, kv := range environ {
				if strings.HasPrefix(kv, prefix) {
					val = kv[len(prefix):]
				}
			}
			col.add(val)
			return cty.StringVal(val).Mark(sensitiveMark), nil
		},
	})
}

// templateFileFunc renders a file as an HCL template with the given
// variables. go-cty-funcs has no templatefile, so this small one parses
// the file with hclsyntax.ParseTemplate.
func templateFileFunc(baseDir string, funcs func() map[string]function.Function) function.Function {
	return function.New(&function.Spec{
		Description: "Renders a template file with the given variables.",
		Params: []function.Parameter{
			{Name: "path", Type: cty.String},
			{Name: "vars", Type: cty.DynamicPseudoType},
		},
		Type: function.StaticReturnType(cty.String),
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			p := args[0].AsString()
			if !filepath.IsAbs(p) {
				p = filepath.Join(baseDir, p)
			}
			src, err := ReadSourceFile(p)
			if err != nil {
				return cty.DynamicVal, fmt.Errorf("reading template: %w", err)
			}
			expr, diags := parseTemplate(src, p)
			if diags.HasErrors() {
				return cty.DynamicVal, diags
			}
			vars := map[string]cty.Value{}
			v := args[1]
			if !v.IsNull() {
				if !v.Type().IsObjectType() && !v.Type().IsMapType() {
					return cty.DynamicVal, function.NewArgErrorf(1, "vars must be an object or a map")
				}
				if !v.IsWhollyKnown() {
					return cty.UnknownVal(cty.String), nil
				}
				for it := v.ElementIterator(); it.Next(); {
					k, e := it.Element()
					vars[k.AsString()] = e
				}
			}
			for _, tr := range expr.Variables() {
				if _, ok := vars[tr.RootName()]; !ok {
					return cty.DynamicVal, function.NewArgErrorf(1, "vars has no %q used by the template", tr.RootName())
				}
			}
			fs := map[string]function.Function{}
			for k, f := range funcs() {
				if k != "templatefile" {
					fs[k] = f
				}
			}
			out, diags := expr.Value(&hcl.EvalContext{Variables: vars, Functions: fs})
			if diags.HasErrors() {
				return cty.DynamicVal, diags
			}
			return out, nil
		},
	})
}

// lengthFunc is length() for collections (go-cty's LengthFunc) and, as
// in Terraform, strings (counted in characters, go-cty's StrlenFunc).
var lengthFunc = function.New(&function.Spec{
	Description: "Returns the number of elements of a collection or characters of a string.",
	Params: []function.Parameter{{
		Name: "value", Type: cty.DynamicPseudoType, AllowUnknown: true, AllowDynamicType: true, AllowMarked: true,
	}},
	Type: function.StaticReturnType(cty.Number),
	Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
		v, marks := args[0].Unmark()
		var out cty.Value
		var err error
		if v.Type() == cty.String {
			out, err = stdlib.Strlen(v)
		} else {
			out, err = stdlib.Length(v)
		}
		return out.WithMarks(marks), err
	},
})

// toCollectionFunc is tolist, toset or tomap (go-cty's MakeToFunc) with a
// fast path for the common case of a tuple or object whose elements all
// have one type and are known, unmarked and not null: go-cty unifies the
// element types pairwise, which grows quadratically with the number of
// elements (50,000 for_each keys took minutes), while here the result is
// built directly. Anything else goes to go-cty, unchanged.
func toCollectionFunc(ty cty.Type) function.Function {
	slow := stdlib.MakeToFunc(ty)
	return function.New(&function.Spec{
		Description: slow.Description(),
		Params:      slow.Params(),
		Type: func(args []cty.Value) (cty.Type, error) {
			if v, ok := toCollectionFast(args[0], ty); ok {
				return v.Type(), nil
			}
			return slow.ReturnTypeForValues(args)
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			if v, ok := toCollectionFast(args[0], ty); ok {
				return v, nil
			}
			return slow.Call(args)
		},
	})
}

func toCollectionFast(v cty.Value, ty cty.Type) (cty.Value, bool) {
	t := v.Type()
	if !(t.IsTupleType() || (t.IsObjectType() && ty.IsMapType())) || v.IsMarked() || !v.IsWhollyKnown() || v.IsNull() || v.LengthInt() == 0 {
		return cty.NilVal, false
	}
	var elems []cty.Value
	var attrs map[string]cty.Value
	if t.IsTupleType() {
		if ty.IsMapType() {
			return cty.NilVal, false
		}
		elems = v.AsValueSlice()
	} else {
		attrs = v.AsValueMap()
		for _, e := range attrs {
			elems = append(elems, e)
		}
	}
	et := elems[0].Type()
	if !et.IsPrimitiveType() {
		return cty.NilVal, false
	}
	for _, e := range elems {
		if e.IsNull() || e.ContainsMarked() || !e.Type().Equals(et) {
			return cty.NilVal, false
		}
	}
	switch {
	case ty.IsSetType():
		return cty.SetVal(elems), true
	case ty.IsListType():
		return cty.ListVal(elems), true
	default:
		return cty.MapVal(attrs), true
	}
}
