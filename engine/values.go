package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/state"

	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// ctyJSON encodes a known value as plain JSON.
func ctyJSON(v cty.Value) (json.RawMessage, error) {
	b, err := ctyjson.Marshal(v, v.Type())
	if err != nil {
		return nil, err
	}
	return b, nil
}

// ConfigDigest is a digest over the configuration files (not variable
// files: variable values reach runs through their digests, and sensitive
// ones must not reach anything stored), keyed by their path relative to
// the configuration directory, so a configuration loaded as "." and as
// its absolute path digest equally. It is recorded as the provenance of
// each run and in saved plans.
func (e *Engine) ConfigDigest() string {
	files := map[string]string{}
	single := ""
	if e.Config.Path != "" {
		if fi, err := os.Stat(e.Config.Path); err == nil && !fi.IsDir() {
			single, _ = filepath.Abs(e.Config.Path)
		}
	}
	for name, f := range e.Config.Files {
		abs, err := filepath.Abs(name)
		if err != nil {
			continue
		}
		if single != "" && abs != single {
			continue
		}
		if single == "" && (filepath.Dir(abs) != e.Config.Dir || !isConfigFileName(filepath.Base(abs))) {
			continue
		}
		rel, err := filepath.Rel(e.Config.Dir, abs)
		if err != nil {
			rel = filepath.Base(abs)
		}
		files[filepath.ToSlash(rel)] = digestString(string(f.Bytes))
	}
	return digestJSON(files)
}

// isConfigFileName reports whether a file in a configuration directory is
// part of the configuration (docs/language.md, "Files and directories":
// *.hcl, not *.test.hcl or variable files).
func isConfigFileName(n string) bool {
	return strings.HasSuffix(n, ".hcl") && !strings.HasSuffix(n, ".test.hcl") && !strings.HasSuffix(n, ".vars.hcl") && !strings.HasPrefix(n, ".")
}

// Outputs evaluates the root outputs against the completed runs in st,
// sensitive ones included (for agentctl output NAME, which prints them on
// request; they are never stored).
func (e *Engine) Outputs(st *state.State) (map[string]config.OutputValue, error) {
	vals, diags := e.Config.EvalOutputs(RuntimeValues(st))
	if diags.HasErrors() {
		return nil, diags
	}
	return vals, nil
}

// RuntimeValues are the outputs of the runs st records as completed and
// the URLs of the sandboxes it records: what outputs, and expressions in
// agentctl console, are evaluated against.
func RuntimeValues(st *state.State) config.RuntimeValues {
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
	return rv
}
