package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// PlanFormatVersion is the version of the saved plan format written.
const PlanFormatVersion = 1

// planKind marks a saved plan file, so that a state file or anything else
// given to `apply PLANFILE` is recognised as not being a plan.
const planKind = "agentctl-plan"

// PlanFile is a saved plan (`plan -out FILE`): a compact JSON file, written
// atomically with mode 0600. It records the lineage and serial of the
// state it was made against, so apply can refuse it once the state has
// changed. It never holds sensitive values: Vars carries only
// non-sensitive variables, and the engine-owned Plan must not contain any.
type PlanFile struct {
	// Kind is always "agentctl-plan"; WritePlanFile sets it.
	Kind            string `json:"kind"`
	FormatVersion   int    `json:"format_version"`
	AgentctlVersion string `json:"agentctl_version"`
	Lineage         string `json:"lineage"`
	Serial          uint64 `json:"serial"`
	// ConfigDir is the configuration the plan was made from.
	ConfigDir    string                     `json:"config_dir"`
	ConfigDigest string                     `json:"config_digest"`
	Vars         map[string]json.RawMessage `json:"vars,omitempty"`
	// Plan is owned by the engine.
	Plan json.RawMessage `json:"plan"`
}

// WritePlanFile writes p to path atomically. Kind and FormatVersion are
// set by it.
func WritePlanFile(path string, p PlanFile) error {
	p.Kind = planKind
	p.FormatVersion = PlanFormatVersion
	if p.Lineage == "" {
		return fmt.Errorf("writing saved plan %s: the plan has no state lineage", path)
	}
	if len(p.Plan) == 0 {
		p.Plan = json.RawMessage("null")
	}
	// Compact, so the engine-owned plan reads back byte for byte.
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("writing saved plan %s: %w", path, err)
	}
	if err := WriteFileAtomic(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing saved plan: %w", err)
	}
	return nil
}

// ReadPlanFile reads a saved plan. A file that is not a saved plan, is
// damaged, or was written by a newer agentctl is refused with a message
// saying so.
func ReadPlanFile(path string) (*PlanFile, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("saved plan %s does not exist; create one with `agentctl plan -out %s`", path, path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading saved plan: %w", err)
	}
	return decodePlanFile(path, data)
}

func decodePlanFile(path string, data []byte) (*PlanFile, error) {
	var head struct {
		Kind          string `json:"kind"`
		FormatVersion int    `json:"format_version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) && se.Offset <= 1 {
			return nil, fmt.Errorf("%s is not an agentctl saved plan (not a JSON file); give the file written by `agentctl plan -out`", path)
		}
		return nil, jsonError(path, "saved plan", data, err)
	}
	if head.Kind != planKind {
		return nil, fmt.Errorf("%s is not an agentctl saved plan; give the file written by `agentctl plan -out`", path)
	}
	if head.FormatVersion > PlanFormatVersion {
		return nil, &NewerFormatError{File: path, What: "saved plan", Format: head.FormatVersion}
	}
	if head.FormatVersion < 1 {
		return nil, fmt.Errorf("%s: unsupported saved plan format_version %d; create the plan again", path, head.FormatVersion)
	}
	p := &PlanFile{}
	if err := json.Unmarshal(data, p); err != nil {
		return nil, jsonError(path, "saved plan", data, err)
	}
	if p.Lineage == "" {
		return nil, fmt.Errorf("%s: saved plan has no state lineage; the file is damaged, create the plan again", path)
	}
	return p, nil
}

// StalePlanError is returned by CheckFresh.
type StalePlanError struct {
	PlanLineage, StateLineage string
	PlanSerial, StateSerial   uint64
}

func (e *StalePlanError) Error() string {
	if e.PlanLineage != e.StateLineage {
		return fmt.Sprintf("saved plan is stale: it was made for a different state (lineage %s; the current state's lineage is %s); run `agentctl plan` again",
			e.PlanLineage, e.StateLineage)
	}
	return fmt.Sprintf("saved plan is stale: the state has changed since the plan was made (serial %d then, %d now); run `agentctl plan` again",
		e.PlanSerial, e.StateSerial)
}

// CheckFresh reports a *StalePlanError (message starting "saved plan is
// stale") unless s is the state the plan was made against: same lineage
// and serial.
//
// A state that has never been written (serial 0) has a lineage made up at
// read time, which a plan made against an equally empty state cannot know.
// When both serials are 0 the plan is fresh, and CheckFresh sets
// s.Lineage to the plan's lineage, so that the state apply writes is the
// one the plan was made for.
func (p *PlanFile) CheckFresh(s *State) error {
	if p.Serial == 0 && s.Serial == 0 {
		s.Lineage = p.Lineage
		return nil
	}
	if p.Lineage != s.Lineage || p.Serial != s.Serial {
		return &StalePlanError{PlanLineage: p.Lineage, StateLineage: s.Lineage, PlanSerial: p.Serial, StateSerial: s.Serial}
	}
	return nil
}
