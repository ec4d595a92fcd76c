package agentloop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/internal/jsonschema"
)

// validateOutput parses text as JSON and validates it against schema,
// returning the compact JSON.
func validateOutput(schema json.RawMessage, text string) (json.RawMessage, error) {
	sch, err := jsonschema.Compile(schema)
	if err != nil {
		return nil, fmt.Errorf("output_schema: %w", err)
	}
	if err := sch.Validate([]byte(text)); err != nil {
		if errors.Is(err, jsonschema.ErrNotJSON) {
			return nil, fmt.Errorf("the model's answer is %w", err)
		}
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(strings.TrimSpace(text))); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
