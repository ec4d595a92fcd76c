package jsonschema

import (
	"errors"
	"strings"
	"sync"
	"testing"
)

const query = `{
  "type": "object",
  "properties": {
    "sql": {"type": "string", "minLength": 1},
    "limit": {"type": "integer", "minimum": 1},
    "tags": {"type": "array", "items": {"type": "string"}}
  },
  "required": ["sql", "limit"],
  "additionalProperties": false
}`

func TestValidate(t *testing.T) {
	s, err := Compile([]byte(query))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		want string // "" valid; else a part of the error
	}{
		{`{"sql": "select 1", "limit": 5}`, ""},
		{`{"sql": "x", "limit": 1, "tags": ["a", "b"]}`, ""},
		{`{"sql": 1, "limit": 5}`, `at /properties/sql: type: 1 has type "integer", want "string"`},
		{`{"sql": "x"}`, `required: missing properties: ["limit"]`},
		{`{"sql": "x", "limit": 0}`, `at /properties/limit: minimum`},
		{`{"sql": "x", "limit": 1.5}`, `want "integer"`},
		{`{"sql": "", "limit": 1}`, `minLength`},
		{`{"sql": "x", "limit": 1, "drop": true}`, `unexpected additional properties ["drop"]`},
		{`{"sql": "x", "limit": 1, "tags": [1]}`, `has type "integer", want "string"`},
		{`[]`, `want "object"`},
	} {
		err := s.Validate([]byte(tc.in))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.in, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %q", tc.in, err, tc.want)
		case err != nil && strings.Contains(err.Error(), "validating "):
			t.Errorf("%s: error %q still holds the library's chain of locations", tc.in, err)
		}
	}
}

func TestValidateNotJSON(t *testing.T) {
	s, err := Compile([]byte(query))
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{``, `{`, `{"sql": "x", "limit": 1} {}`, `select 1`} {
		if err := s.Validate([]byte(in)); !errors.Is(err, ErrNotJSON) {
			t.Errorf("%q: error %v, want ErrNotJSON", in, err)
		}
	}
}

// A schema is checked against its draft's metaschema when it is
// compiled: the mistake is reported there, naming the keyword.
func TestCompileChecksTheMetaschema(t *testing.T) {
	for _, tc := range []struct {
		doc  string
		want string // "" valid
	}{
		{query, ""},
		{`{"type": "object", "properties": {"a": {"type": "nope"}}}`, `nope does not equal any of`},
		{`{"type": "object", "properties": {"a": {"minLength": -1}}}`, `minLength`},
		{`{"type": "object", "required": "a"}`, `required`},
		{`{"type": "object", "properties": {"a": {"pattern": "("}}}`, `pattern: error parsing regexp`},
		{`{"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}}`, `missing`},
		{`{"type": "object", "$defs": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/$defs/n"}}}`, ""},
		// draft-07, by its own rules
		{`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "definitions": {"n": {"type": "integer"}}, "properties": {"a": {"$ref": "#/definitions/n"}}}`, ""},
		{`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {"minLength": -1}}}`, `(keyword "minLength")`},
		// the 2020-12 URI in its other spellings
		{`{"$schema": "http://json-schema.org/draft/2020-12/schema", "type": "object"}`, ""},
		{`{"$schema": "https://json-schema.org/draft/2020-12/schema#", "type": "object"}`, ""},
		// drafts the library does not implement
		{`{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"}`, `is not a supported draft: write the schema for draft 2020-12`},
		{`{"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "object"}`, `is not a supported draft`},
		{`{"$schema": 7}`, `"$schema" must be a string`},
		{`"object"`, `a schema is a JSON object (or true or false), not a string`},
		{`{"type": "object",}`, `not valid JSON`},
	} {
		_, err := Compile([]byte(tc.doc))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.doc, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one containing %q", tc.doc, err, tc.want)
		}
	}
}

func TestDraft07Semantics(t *testing.T) {
	// In draft-07 a $ref's siblings are ignored; in 2020-12 they apply.
	const ref = `"type": "object", "properties": {"a": {"$ref": "#/definitions/s", "maxLength": 1}}, "definitions": {"s": {"type": "string"}}`
	d07, err := Compile([]byte(`{"$schema": "http://json-schema.org/draft-07/schema#", ` + ref + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := d07.Validate([]byte(`{"a": "long"}`)); err != nil {
		t.Errorf("draft-07: %v", err)
	}
	d20, err := Compile([]byte(`{` + ref + `}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := d20.Validate([]byte(`{"a": "long"}`)); err == nil || !strings.Contains(err.Error(), "maxLength") {
		t.Errorf("2020-12: error %v, want maxLength", err)
	}
}

func TestBooleanSchemas(t *testing.T) {
	yes, err := Compile([]byte(`true`))
	if err != nil {
		t.Fatal(err)
	}
	no, err := Compile([]byte(`false`))
	if err != nil {
		t.Fatal(err)
	}
	if err := yes.Validate([]byte(`{"x": 1}`)); err != nil {
		t.Errorf("true: %v", err)
	}
	if err := no.Validate([]byte(`{"x": 1}`)); err == nil {
		t.Error("false accepted a value")
	}
}

// The metaschemas are loaded on first use, once, from any goroutine.
func TestCompileConcurrently(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range cap(errs) {
		wg.Go(func() {
			doc := query
			if i%2 == 1 {
				doc = `{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {"type": "nope"}}}`
			}
			_, err := Compile([]byte(doc))
			if (err != nil) != (i%2 == 1) {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("compile %d: %v", len(errs), err)
	}
}

func BenchmarkCompile(b *testing.B) {
	if _, err := Compile([]byte(query)); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Compile([]byte(query)); err != nil {
			b.Fatal(err)
		}
	}
}
