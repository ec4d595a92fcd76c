package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// maxArgumentDepth bounds the nesting of a call's JSON arguments.
const maxArgumentDepth = 64

// CanonicalArguments checks a tool call's arguments as the model sent
// them and returns the one form that both the approval policy and the
// tool read. JSON arguments are decoded strictly: a key that appears
// twice in one object, or two keys that differ only in case (which
// encoding/json would read as one field, the last winning), trailing data
// after the value, or nesting deeper than 64 levels are errors for the
// model. The canonical form is compact JSON with each object's keys
// sorted and numbers as written. Arguments that are not JSON at all (a
// freeform patch) are returned unchanged, unless they start like an
// object, which must then be valid JSON; empty arguments stay empty.
func CanonicalArguments(raw string) (string, error) {
	trimmed := strings.TrimSpace(raw)
	if trimmed == "" {
		return "", nil
	}
	if !json.Valid([]byte(trimmed)) {
		if strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[") {
			var v any
			err := json.NewDecoder(strings.NewReader(trimmed)).Decode(&v)
			if err == nil {
				err = errors.New("trailing data after the JSON value")
			}
			return "", fmt.Errorf("invalid arguments: %v: send exactly one JSON object matching the tool's parameters", err)
		}
		return raw, nil
	}
	dec := json.NewDecoder(strings.NewReader(trimmed))
	dec.UseNumber()
	v, err := strictValue(dec, 0)
	if err != nil {
		return "", fmt.Errorf("invalid arguments: %v", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("invalid arguments: %v", err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

// strictValue reads one JSON value from dec, refusing duplicate and
// case-variant keys in every object.
func strictValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxArgumentDepth {
		return nil, fmt.Errorf("nested deeper than %d levels", maxArgumentDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		obj := map[string]any{}
		var keys []string
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			if i := slices.IndexFunc(keys, func(seen string) bool { return strings.EqualFold(seen, k) }); i >= 0 {
				if keys[i] == k {
					return nil, fmt.Errorf("key %q appears twice in one object: send each argument once", k)
				}
				return nil, fmt.Errorf("keys %q and %q differ only in case: argument names are case-sensitive; send each argument once, spelled as the tool's parameters spell it", keys[i], k)
			}
			keys = append(keys, k)
			if obj[k], err = strictValue(dec, depth+1); err != nil {
				return nil, err
			}
		}
		_, err := dec.Token() // '}'
		return obj, err
	case json.Delim('['):
		arr := []any{}
		for dec.More() {
			v, err := strictValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		_, err := dec.Token() // ']'
		return arr, err
	}
	return tok, nil
}

// decodeArgs decodes a tool's JSON arguments into v, a pointer to a
// struct: every key must be one of its fields' JSON names, spelled
// exactly (encoding/json alone would match keys case-insensitively), and
// nothing may follow the object.
func decodeArgs(tool, arguments string, v any) error {
	if strings.TrimSpace(arguments) == "" {
		arguments = "{}"
	}
	var keys map[string]json.RawMessage
	kd := json.NewDecoder(strings.NewReader(arguments))
	if err := kd.Decode(&keys); err != nil {
		return fmt.Errorf("%s: invalid arguments: %v: send a JSON object matching the tool's parameters", tool, err)
	}
	if kd.More() {
		return fmt.Errorf("%s: invalid arguments: trailing data after the JSON object: send exactly one JSON object", tool)
	}
	names := fieldNames(v)
	for k := range keys {
		if !slices.Contains(names, k) {
			return fmt.Errorf("%s: invalid arguments: unknown field %q: the fields are %s (names are case-sensitive)", tool, k, strings.Join(names, ", "))
		}
	}
	dec := json.NewDecoder(strings.NewReader(arguments))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: invalid arguments: %v: send a JSON object matching the tool's parameters", tool, err)
	}
	if dec.More() {
		return fmt.Errorf("%s: invalid arguments: trailing data after the JSON object: send exactly one JSON object", tool)
	}
	return nil
}

// fieldNames are the JSON names of the fields of the struct v points to.
func fieldNames(v any) []string {
	t := reflect.TypeOf(v).Elem()
	names := make([]string, 0, t.NumField())
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}
