package agentloop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// validateOutput parses text as JSON and validates it against schema,
// returning the compact JSON.
func validateOutput(schema json.RawMessage, text string) (json.RawMessage, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil, fmt.Errorf("output_schema is not valid JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("output_schema.json", doc); err != nil {
		return nil, fmt.Errorf("output_schema: %w", err)
	}
	sch, err := c.Compile("output_schema.json")
	if err != nil {
		return nil, fmt.Errorf("output_schema: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("the model's answer is not JSON: %w", err)
	}
	if err := sch.Validate(v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(strings.TrimSpace(text))); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
