package engine

import (
	"encoding/json"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

type ctyValue = cty.Value

// ctyJSON encodes a known value as plain JSON.
func ctyJSON(v cty.Value) (json.RawMessage, error) {
	b, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return nil, err
	}
	return b, nil
}

// ConfigDigest is a digest over every configuration file, recorded as the
// provenance of each run.
func (e *Engine) ConfigDigest() string {
	files := map[string]string{}
	for name, f := range e.Config.Files {
		files[name] = digestString(string(f.Bytes))
	}
	return digestJSON(files)
}
