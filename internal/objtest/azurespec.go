package objtest

import (
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// azureSpecJSON is the Azure Blob Storage data-plane REST API
// specification (Swagger 2.0) of API version 2020-10-02, the version
// rclone's Azure SDK speaks, vendored with its license under
// testdata/azure (see testdata/azure/README.md).
//
//go:embed testdata/azure/blob.json
var azureSpecJSON []byte

// azureParam is a parameter of the specification.
type azureParam struct {
	Ref              string       `json:"$ref"`
	Name             string       `json:"name"`
	In               string       `json:"in"`
	Required         bool         `json:"required"`
	Type             string       `json:"type"`
	Format           string       `json:"format"`
	Enum             []any        `json:"enum"`
	Items            *azureParam  `json:"items"`
	Schema           *azureSchema `json:"schema"`
	CollectionPrefix string       `json:"x-ms-header-collection-prefix"`
}

type azureSchema struct {
	Ref string `json:"$ref"`
	XML *struct {
		Name string `json:"name"`
	} `json:"xml"`
}

// azureOp is one operation: a method, a path template, the query values
// that select it (restype=container&comp=list) and its parameters.
type azureOp struct {
	ID       string
	Method   string
	Segments []string // "{containerName}", "{blob}"
	Fixed    url.Values
	Params   []*azureParam
}

// AzureSpec is the loaded specification.
type AzureSpec struct {
	Version string
	ops     []*azureOp
	defs    map[string]*azureSchema
}

var azureSpecOnce = sync.OnceValues(func() (*AzureSpec, error) { return loadAzureSpec(azureSpecJSON) })

// LoadAzureSpec returns the vendored Blob Storage specification.
func LoadAzureSpec() (*AzureSpec, error) { return azureSpecOnce() }

func loadAzureSpec(data []byte) (*AzureSpec, error) {
	var doc struct {
		Info struct {
			Version string `json:"version"`
		} `json:"info"`
		Paths      map[string]map[string]json.RawMessage `json:"paths"`
		XMSPaths   map[string]map[string]json.RawMessage `json:"x-ms-paths"`
		Parameters map[string]*azureParam                `json:"parameters"`
		Defs       map[string]*azureSchema               `json:"definitions"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("objtest: reading the Azure Blob specification: %w", err)
	}
	s := &AzureSpec{Version: doc.Info.Version, defs: doc.Defs}
	resolve := func(p *azureParam) (*azureParam, error) {
		if p.Ref == "" {
			return p, nil
		}
		r := doc.Parameters[strings.TrimPrefix(p.Ref, "#/parameters/")]
		if r == nil {
			return nil, fmt.Errorf("objtest: the Azure Blob specification has no parameter %s", p.Ref)
		}
		return r, nil
	}
	for _, paths := range []map[string]map[string]json.RawMessage{doc.Paths, doc.XMSPaths} {
		for key, item := range paths {
			ops, err := azureOps(key, item, resolve)
			if err != nil {
				return nil, err
			}
			s.ops = append(s.ops, ops...)
		}
	}
	// Operations selected by more query values are tried first.
	slices.SortStableFunc(s.ops, func(a, b *azureOp) int { return len(b.Fixed) - len(a.Fixed) })
	return s, nil
}

// azureOps reads the operations of one path item. A key like
// "/{containerName}?restype=container&comp=list&hierarchy" is a path, the
// query values that select the operation, and names without a value
// that only tell operations apart (their parameters do).
func azureOps(key string, item map[string]json.RawMessage, resolve func(*azureParam) (*azureParam, error)) ([]*azureOp, error) {
	path, query, _ := strings.Cut(key, "?")
	fixed := url.Values{}
	for _, kv := range strings.Split(query, "&") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			fixed.Set(k, v)
		}
	}
	var common []*azureParam
	if raw, ok := item["parameters"]; ok {
		if err := json.Unmarshal(raw, &common); err != nil {
			return nil, fmt.Errorf("objtest: %s parameters: %w", key, err)
		}
	}
	var out []*azureOp
	for method, raw := range item {
		if method == "parameters" {
			continue
		}
		var op struct {
			ID     string        `json:"operationId"`
			Params []*azureParam `json:"parameters"`
		}
		if err := json.Unmarshal(raw, &op); err != nil {
			return nil, fmt.Errorf("objtest: %s %s: %w", method, key, err)
		}
		o := &azureOp{ID: op.ID, Method: strings.ToUpper(method), Fixed: fixed, Segments: strings.Split(strings.Trim(path, "/"), "/")}
		if path == "/" {
			o.Segments = nil
		}
		for _, p := range append(slices.Clone(common), op.Params...) {
			r, err := resolve(p)
			if err != nil {
				return nil, err
			}
			o.Params = append(o.Params, r)
		}
		out = append(out, o)
	}
	return out, nil
}

// azureAuthQuery are the query parameters of a shared access signature:
// authorization, not the operation's parameters.
var azureAuthQuery = map[string]bool{
	"sv": true, "ss": true, "srt": true, "sp": true, "se": true, "st": true, "spr": true, "sip": true, "sr": true,
	"sig": true, "si": true, "sdd": true, "skoid": true, "sktid": true, "skt": true, "ske": true, "sks": true, "skv": true,
	"rscc": true, "rscd": true, "rsce": true, "rscl": true, "rsct": true, "ses": true,
}

// Match finds the operation a request is (its path relative to the
// account: "/container/blob") and checks it against the operation's
// parameters. It returns the operation's id, or why the request is not
// one the specification describes.
func (s *AzureSpec) Match(r *http.Request, path string) (string, error) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	if strings.Trim(path, "/") == "" {
		segs = nil
	}
	q := r.URL.Query()
	var errs []string
	for _, op := range s.ops {
		if op.Method != r.Method || !segmentsMatch(op.Segments, segs) || !fixedMatch(op.Fixed, q) {
			continue
		}
		err := op.check(r, q)
		if err == nil {
			return op.ID, nil
		}
		errs = append(errs, op.ID+": "+err.Error())
	}
	if len(errs) == 0 {
		return "", fmt.Errorf("no operation of the Blob service specification is %s %s?%s", r.Method, path, q.Encode())
	}
	return "", fmt.Errorf("the request matches no operation's parameters: %s", strings.Join(errs, "; "))
}

// segmentsMatch matches a path template: "{blob}" takes the rest of the
// path (a blob's name has slashes).
func segmentsMatch(tmpl, segs []string) bool {
	if len(tmpl) == 0 || len(segs) == 0 {
		return len(tmpl) == len(segs)
	}
	if tmpl[len(tmpl)-1] == "{blob}" {
		return len(segs) >= len(tmpl)
	}
	return len(tmpl) == len(segs)
}

// fixedMatch says whether the query holds an operation's selecting
// values, and the operation selects every restype and comp it holds.
func fixedMatch(fixed, q url.Values) bool {
	for k := range fixed {
		if q.Get(k) != fixed.Get(k) {
			return false
		}
	}
	for _, k := range []string{"restype", "comp"} {
		if q.Has(k) && !fixed.Has(k) {
			return false
		}
	}
	return true
}

// check validates the request's query and headers against op's
// parameters: required ones present, values of the declared type and
// enum, and no query parameter or x-ms- header the operation does not
// declare.
func (op *azureOp) check(r *http.Request, q url.Values) error {
	declared := map[string]bool{}
	var prefixes []string
	for _, p := range op.Params {
		name := p.Name
		if p.In == "header" {
			name = strings.ToLower(name)
			if p.CollectionPrefix != "" {
				prefixes = append(prefixes, p.CollectionPrefix)
				continue
			}
		}
		declared[p.In+":"+name] = true
		if err := checkAzureParam(p, r, q); err != nil {
			return err
		}
	}
	for k := range q {
		if !declared["query:"+k] && !op.Fixed.Has(k) && !azureAuthQuery[k] {
			return fmt.Errorf("query parameter %q is not a parameter of the operation", k)
		}
	}
	for k := range r.Header {
		lk := strings.ToLower(k)
		if !strings.HasPrefix(lk, "x-ms-") || declared["header:"+lk] || lk == "x-ms-date" {
			continue
		}
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(lk, p) }) {
			return fmt.Errorf("header %s is not a parameter of the operation", lk)
		}
	}
	return nil
}

// checkAzureParam checks one declared parameter's value.
func checkAzureParam(p *azureParam, r *http.Request, q url.Values) error {
	var v string
	var has bool
	switch p.In {
	case "query":
		v, has = q.Get(p.Name), q.Has(p.Name)
	case "header":
		v, has = r.Header.Get(p.Name), len(r.Header.Values(p.Name)) > 0
	case "body":
		if p.Required && r.Header.Get("Content-Length") == "" && len(r.TransferEncoding) == 0 {
			return fmt.Errorf("the operation needs a body")
		}
		return nil
	default:
		return nil // path parameters matched the template
	}
	if !has {
		if p.Required {
			return fmt.Errorf("required %s parameter %q is missing", p.In, p.Name)
		}
		return nil
	}
	if p.Type == "array" && p.Items != nil {
		for _, item := range strings.Split(v, ",") {
			if err := checkAzureValue(p.Name, p.Items.Type, p.Items.Format, p.Items.Enum, item); err != nil {
				return err
			}
		}
		return nil
	}
	return checkAzureValue(p.Name, p.Type, p.Format, p.Enum, v)
}

func checkAzureValue(name, typ, format string, enum []any, v string) error {
	switch typ {
	case "integer":
		if _, err := strconv.ParseInt(v, 10, 64); err != nil {
			return fmt.Errorf("%s = %q is not an integer", name, v)
		}
	case "boolean":
		if v != "true" && v != "false" {
			return fmt.Errorf("%s = %q is not a boolean", name, v)
		}
	}
	switch format {
	case "byte":
		if _, err := base64.StdEncoding.DecodeString(v); err != nil {
			return fmt.Errorf("%s = %q is not base64", name, v)
		}
	case "date-time-rfc1123":
		if _, err := time.Parse(http.TimeFormat, v); err != nil {
			return fmt.Errorf("%s = %q is not an RFC 1123 date", name, v)
		}
	}
	if len(enum) > 0 && !slices.ContainsFunc(enum, func(e any) bool { return fmt.Sprint(e) == v }) {
		return fmt.Errorf("%s = %q is not one of %v", name, v, enum)
	}
	return nil
}

// BodyElement is the XML root element the operation's body must have, or
// "" when its body is not XML.
func (s *AzureSpec) BodyElement(opID string) string {
	for _, op := range s.ops {
		if op.ID != opID {
			continue
		}
		for _, p := range op.Params {
			if p.In != "body" || p.Schema == nil || p.Schema.Ref == "" {
				continue
			}
			if d := s.defs[strings.TrimPrefix(p.Schema.Ref, "#/definitions/")]; d != nil && d.XML != nil {
				return d.XML.Name
			}
		}
	}
	return ""
}
