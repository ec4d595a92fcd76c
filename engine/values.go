package engine

import (
	"encoding/json"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/state"

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

// Outputs evaluates the root outputs against the completed runs in st,
// sensitive ones included (for agentctl output NAME, which prints them on
// request; they are never stored).
func (e *Engine) Outputs(st *state.State) (map[string]config.OutputValue, error) {
	rv := config.RuntimeValues{RunOutputs: map[string]cty.Value{}, SandboxURLs: map[string]map[string]string{}}
	for addr, r := range st.Runs {
		if r.Status == RunCompleted {
			if v, err := outputValue(r.Output); err == nil {
				rv.RunOutputs[addr] = v
			}
		}
	}
	for addr, ss := range st.Sandboxes {
		rv.SandboxURLs[addr] = ss.URLs
	}
	vals, diags := e.Config.EvalOutputs(rv)
	if diags.HasErrors() {
		return nil, diags
	}
	return vals, nil
}
