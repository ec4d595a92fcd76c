// Package jsonschema compiles the JSON Schemas a configuration declares
// (a command tool's parameters, an agent's output_schema) and validates
// JSON values against them, with github.com/google/jsonschema-go (the
// library the MCP SDK uses too).
//
// A schema is checked against its draft's metaschema when it is
// compiled, so a mistake in it (a "type" that is no type, a negative
// "minLength") is reported where the schema is written rather than as
// every call failing. The metaschemas are embedded and resolved on first
// use: a command that compiles no schema does not pay for them (every
// agentctl process, the sandbox's init included, would at package
// initialization).
//
// Draft 2020-12 (the default, as for OpenAI's and MCP's tool schemas)
// and draft-07 are supported; a "$schema" naming another draft is
// refused with an error that says so.
package jsonschema

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"

	gjs "github.com/google/jsonschema-go/jsonschema"
)

//go:embed metaschemas/draft2020-12 metaschemas/draft-07
var metaschemaFiles embed.FS

// The "$schema" values github.com/google/jsonschema-go validates.
const (
	draft202012 = "https://json-schema.org/draft/2020-12/schema"
	draft07     = "http://json-schema.org/draft-07/schema#"
)

// draftOf is the draft a "$schema" value names ("" when none: draft
// 2020-12): the canonical URI, or an error for a draft that is not
// supported.
func draftOf(v any) (string, error) {
	if v == nil {
		return draft202012, nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("\"$schema\" must be a string, the URI of a draft, not %s", jsonKind(v))
	}
	u := strings.TrimSuffix(strings.TrimSuffix(s, "#"), "/")
	u = strings.TrimPrefix(strings.TrimPrefix(u, "https://"), "http://")
	switch u {
	case "json-schema.org/draft/2020-12/schema", "json-schema.org/schema":
		return draft202012, nil
	case "json-schema.org/draft-07/schema":
		return draft07, nil
	}
	return "", fmt.Errorf("\"$schema\": %q is not a supported draft: write the schema for draft 2020-12 (leave \"$schema\" out, or set it to %q) or draft-07 (%q)", s, draft202012, draft07)
}

// metaschemas are the two drafts' metaschemas, each resolved when a
// schema of its draft is first compiled (most configurations have only
// draft 2020-12 schemas, and resolving a metaschema takes milliseconds).
var metaschemas = map[string]func() (*gjs.Resolved, error){
	draft202012: sync.OnceValues(func() (*gjs.Resolved, error) { return resolveMetaschema("draft2020-12/schema") }),
	draft07:     sync.OnceValues(func() (*gjs.Resolved, error) { return resolveMetaschema("draft-07/schema") }),
}

// resolveMetaschema resolves the embedded metaschema name, the
// vocabularies it refers to loaded from the embedded files too.
func resolveMetaschema(name string) (*gjs.Resolved, error) {
	load := func(name string) (*gjs.Schema, error) {
		b, err := metaschemaFiles.ReadFile("metaschemas/" + name + ".json")
		if err != nil {
			return nil, err
		}
		var s gjs.Schema
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, fmt.Errorf("metaschema %s: %w", name, err)
		}
		return &s, nil
	}
	loader := func(u *url.URL) (*gjs.Schema, error) {
		if u.Host == "json-schema.org" {
			if rest, ok := strings.CutPrefix(u.Path, "/draft/2020-12/"); ok {
				return load("draft2020-12/" + rest)
			}
		}
		return nil, fmt.Errorf("%s: a metaschema may refer only to its own draft's vocabularies", u)
	}
	s, err := load(name)
	if err != nil {
		return nil, err
	}
	r, err := s.Resolve(&gjs.ResolveOptions{Loader: loader})
	if err != nil {
		return nil, fmt.Errorf("metaschema %s: %w", name, err)
	}
	return r, nil
}

// Schema is a compiled schema: checked against its draft's metaschema,
// its references resolved. It is safe for concurrent use.
type Schema struct {
	resolved *gjs.Resolved
}

// Compile checks doc, a JSON Schema, and compiles it. Its errors say
// what is wrong with the schema, not where it was written: the caller
// adds that.
func Compile(doc []byte) (*Schema, error) {
	v, err := decode(doc)
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		if b, isBool := v.(bool); isBool {
			// true and false are schemas too (everything, nothing).
			s := &gjs.Schema{}
			if !b {
				s.Not = &gjs.Schema{}
			}
			r, err := s.Resolve(nil)
			if err != nil {
				return nil, err
			}
			return &Schema{resolved: r}, nil
		}
		return nil, fmt.Errorf("a schema is a JSON object (or true or false), not %s", jsonKind(v))
	}
	draft, err := draftOf(obj["$schema"])
	if err != nil {
		return nil, err
	}
	meta, err := metaschemas[draft]()
	if err != nil {
		return nil, fmt.Errorf("loading the metaschema: %w", err)
	}
	if err := meta.Validate(v); err != nil {
		return nil, fmt.Errorf("it does not follow JSON Schema (%s): %w", draft, simplify(err))
	}
	var s gjs.Schema
	if err := json.Unmarshal(doc, &s); err != nil {
		return nil, err
	}
	s.Schema = draft
	r, err := s.Resolve(nil)
	if err != nil {
		return nil, errors.New(strings.ReplaceAll(err.Error(), "jsonschema.Schema: <anonymous schema>: ", ""))
	}
	return &Schema{resolved: r}, nil
}

// Validate parses text as JSON and validates it against s. A text that
// is not JSON is reported as such (errors.Is ErrNotJSON).
func (s *Schema) Validate(text []byte) error {
	v, err := decode(text)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	if err := s.resolved.Validate(v); err != nil {
		return simplify(err)
	}
	return nil
}

// ErrNotJSON is Validate's error for a text that is not JSON.
var ErrNotJSON = errors.New("not valid JSON")

// decode parses one JSON value and refuses anything after it.
func decode(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	var v any
	if err := d.Decode(&v); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("it is empty")
		}
		return nil, err
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// simplify shortens the library's chains of schema locations
// ("validating root: validating /properties/a: type: ...") to the last
// location and the reason, one per alternative that failed, which is
// what a reader acts on.
func simplify(err error) error {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(err.Error()), "\n") {
		line = strings.TrimSpace(line)
		// The keyword last named on the way, for a reason found deeper
		// (in a metaschema's definitions).
		keyword := ""
		if i := strings.LastIndex(line, "validating /properties/"); i >= 0 {
			keyword = line[i+len("validating /properties/"):]
			keyword = keyword[:strings.IndexAny(keyword+":", ":/")]
		}
		if i := strings.LastIndex(line, "validating "); i >= 0 {
			line = line[i+len("validating "):]
		}
		if keyword != "" && !strings.HasPrefix(line, "/properties/") {
			line = fmt.Sprintf("%s (keyword %q)", line, keyword)
		}
		line = strings.ReplaceAll(strings.TrimSuffix(line, ":"), "<anonymous schema> ", "")
		out = append(out, "at "+line)
	}
	return errors.New(strings.Join(out, "; "))
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
