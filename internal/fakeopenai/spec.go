package fakeopenai

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
)

// specYAML is OpenAI's OpenAPI document, vendored with its license under
// testdata/ (see testdata/README.md), so the fake needs nothing outside
// the repository.
//
//go:embed testdata/openapi.yaml
var specYAML []byte

// Spec is a loaded OpenAPI document with the operations the fake serves.
// It is immutable once loaded and safe for concurrent use.
type Spec struct {
	doc    *openapi3.T
	routes map[string]*routers.Route // by spec path, e.g. "/responses"
	events map[string]string         // Responses stream event type -> component schema
}

// specCache holds the one document loaded per test binary: the file is
// about 3 MB and takes a few hundred milliseconds to parse, so every
// server in the binary shares it.
var specCache struct {
	once sync.Once
	spec *Spec
	err  error
}

// LoadSpec returns the vendored OpenAI OpenAPI document, parsing it on
// first use and caching it for the life of the process.
func LoadSpec() (*Spec, error) {
	specCache.once.Do(func() {
		specCache.spec, specCache.err = loadSpec(specYAML)
	})
	return specCache.spec, specCache.err
}

// loadSpec parses the document and indexes the operations and stream
// events the fake serves.
func loadSpec(data []byte) (*Spec, error) {
	const path = "testdata/openapi.yaml"
	doc, err := openapi3.NewLoader().LoadFromData(data)
	if err != nil {
		return nil, fmt.Errorf("fakeopenai: loading OpenAPI document %s: %w", path, err)
	}
	// kin-openapi validates OpenAPI 3.1 documents by recompiling the
	// operation's whole schema with a JSON Schema 2020-12 compiler on
	// every call (tens of milliseconds of CPU per request for this
	// document) and then, for schemas like these that use component
	// references, mostly falls back to its built-in validator anyway.
	// Validating with the built-in validator directly keeps a request
	// well under a millisecond.
	doc.OpenAPI = "3.0.3"
	s := &Spec{doc: doc, routes: map[string]*routers.Route{}, events: map[string]string{}}
	if ev := doc.Components.Schemas["ResponseStreamEvent"]; ev != nil && ev.Value != nil {
		for _, ref := range append(ev.Value.AnyOf, ev.Value.OneOf...) {
			if ref.Value == nil || ref.Value.Properties["type"] == nil || ref.Value.Properties["type"].Value == nil {
				continue
			}
			name := strings.TrimPrefix(ref.Ref, "#/components/schemas/")
			for _, e := range ref.Value.Properties["type"].Value.Enum {
				if t, ok := e.(string); ok {
					s.events[t] = name
				}
			}
		}
	}
	for _, p := range []string{"/responses", "/chat/completions"} {
		item := doc.Paths.Find(p)
		if item == nil || item.Post == nil {
			return nil, fmt.Errorf("fakeopenai: %s has no POST %s operation", path, p)
		}
		s.routes[p] = &routers.Route{Spec: doc, Path: p, PathItem: item, Method: http.MethodPost, Operation: item.Post}
	}
	return s, nil
}

// eventSchema names the component schema of a Responses stream event type.
func (s *Spec) eventSchema(eventType string) (string, bool) {
	c, ok := s.events[eventType]
	return c, ok
}

// ValidateRequest checks a POST to specPath ("/responses" or
// "/chat/completions") with the given JSON body against the document.
func (s *Spec) ValidateRequest(ctx context.Context, specPath string, body []byte) error {
	route, ok := s.routes[specPath]
	if !ok {
		return fmt.Errorf("no operation POST %s in the OpenAPI document", specPath)
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "https://api.openai.com/v1"+specPath, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	err := openapi3filter.ValidateRequest(ctx, &openapi3filter.RequestValidationInput{
		Request: req,
		Route:   route,
		Options: &openapi3filter.Options{
			AuthenticationFunc:  openapi3filter.NoopAuthenticationFunc,
			SkipSettingDefaults: true,
			MultiError:          true,
			// Without this every failed anyOf branch renders its whole
			// schema into the error text, which dominates the cost.
			SchemaValidationOptions: []openapi3.SchemaValidationOption{openapi3.DisableSchemaErrorDetails()},
		},
	})
	if err != nil {
		return fmt.Errorf("request body does not conform to POST %s: %s", specPath, compact(err))
	}
	return nil
}

// ValidateSchema checks a JSON value against a named component schema,
// e.g. "ResponseStreamEvent" or "CreateChatCompletionStreamResponse".
func (s *Spec) ValidateSchema(component string, data []byte) error {
	ref, ok := s.doc.Components.Schemas[component]
	if !ok || ref.Value == nil {
		return fmt.Errorf("no component schema %q in the OpenAPI document", component)
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("%s: invalid JSON: %w", component, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: trailing data after JSON value", component)
	}
	v = numbersToFloat(v)
	if err := ref.Value.VisitJSON(v, openapi3.MultiErrors(), openapi3.DisableSchemaErrorDetails()); err != nil {
		return fmt.Errorf("does not conform to schema %s: %s", component, compact(err))
	}
	return nil
}

// numbersToFloat converts json.Number leaves to float64, the form
// kin-openapi's validator expects.
func numbersToFloat(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbersToFloat(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = numbersToFloat(e)
		}
		return x
	}
	return v
}

// compact renders a kin-openapi validation error as one line per failing
// location ("at /input/0/output: reason") instead of the verbose default
// that dumps whole schemas.
func compact(err error) string {
	var lines []string
	seen := map[string]bool{}
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
			return
		case openapi3.MultiError:
			for _, x := range e {
				walk(x)
			}
			return
		case *openapi3filter.RequestError:
			if e.Err != nil {
				walk(e.Err)
				return
			}
		case *openapi3.SchemaError:
			if e.Origin != nil {
				walk(e.Origin)
				return
			}
			l := "at /" + strings.Join(e.JSONPointer(), "/") + ": " + e.Reason
			if !seen[l] {
				seen[l] = true
				lines = append(lines, l)
			}
			return
		}
		if u, ok := err.(interface{ Unwrap() []error }); ok {
			for _, x := range u.Unwrap() {
				walk(x)
			}
			return
		}
		if u := errors.Unwrap(err); u != nil {
			walk(u)
			return
		}
		lines = append(lines, err.Error())
	}
	walk(err)
	if len(lines) == 0 {
		return err.Error()
	}
	if len(lines) > 12 {
		lines = append(lines[:12], fmt.Sprintf("... and %d more", len(lines)-12))
	}
	return strings.Join(lines, "; ")
}
