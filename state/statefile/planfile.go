package statefile

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/state"
)

// PlanFormatVersion is the version of the saved plan format written
// unencrypted.
const PlanFormatVersion = 1

// sealedPlanFormat is the version of an encrypted saved plan
// (sealedPlanFile).
const sealedPlanFormat = 2

// kindPlan is the kind of a sealed saved plan's envelope.
const kindPlan = "plan"

// planKind marks a saved plan file, so that a state file or anything else
// given to `apply PLANFILE` is recognised as not being a plan.
const planKind = "agentctl-plan"

// PlanFile is a saved plan (`plan -out FILE`): a compact JSON file, written
// atomically with mode 0600. It records the lineage and serial of the
// state it was made against, so apply can refuse it once the state has
// changed. It never holds sensitive values: Vars carries only
// non-sensitive variables, and the engine-owned Plan must not contain any.
// It does hold what the plan shows of the state (run inputs and
// outputs): when the state is encrypted, so is the file
// (sealedPlanFile).
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
	// Encrypted is set when the file was encrypted.
	Encrypted bool `json:"-"`
}

// sealedPlanFile is an encrypted saved plan: the configuration
// directory in clear (apply finds the key in its configuration), and the
// saved plan's JSON sealed (kind "plan", bound to that directory) in
// base64. Its format_version, 2, makes an agentctl that predates it
// refuse it as newer.
type sealedPlanFile struct {
	Kind          string `json:"kind"`
	FormatVersion int    `json:"format_version"`
	ConfigDir     string `json:"config_dir"`
	Encryption    string `json:"encryption"`
	KeyCheck      string `json:"key_check"`
	Data          string `json:"data"`
}

// PlanHead is what a saved plan says of itself before it is opened.
type PlanHead struct {
	// ConfigDir is the configuration the plan was made from, whose
	// encryption block has the key of an encrypted plan.
	ConfigDir string
	Encrypted bool
}

// ReadPlanHead reads the head of the saved plan at path; ok is false
// when path is not a saved plan (or cannot be read).
func ReadPlanHead(path string) (head PlanHead, ok bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return head, false
	}
	var h struct {
		Kind          string `json:"kind"`
		FormatVersion int    `json:"format_version"`
		ConfigDir     string `json:"config_dir"`
	}
	if json.Unmarshal(data, &h) != nil || h.Kind != planKind {
		return head, false
	}
	return PlanHead{ConfigDir: h.ConfigDir, Encrypted: h.FormatVersion == sealedPlanFormat}, true
}

// WritePlanFile writes p to path atomically, encrypted when keys
// encrypt. Kind and FormatVersion are set by it.
func WritePlanFile(path string, p PlanFile, keys *seal.Keys) error {
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
	if err == nil && keys.Encrypting() {
		data, err = sealPlan(p.ConfigDir, data, keys.Key())
	}
	if err != nil {
		return fmt.Errorf("writing saved plan %s: %w", path, err)
	}
	if err := WriteFileAtomic(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing saved plan: %w", err)
	}
	return nil
}

// sealPlan returns the encrypted saved plan file holding data, the JSON
// of the saved plan made from configDir.
func sealPlan(configDir string, data []byte, key *seal.Key) ([]byte, error) {
	env, err := key.Seal(kindPlan, seal.Place{Name: configDir}, data)
	if err != nil {
		return nil, err
	}
	return json.Marshal(sealedPlanFile{
		Kind: planKind, FormatVersion: sealedPlanFormat, ConfigDir: configDir,
		Encryption: encryptionMethod, KeyCheck: key.Check(), Data: string(seal.EncodeText(env)),
	})
}

// ReadPlanFile reads a saved plan; keys are the encryption setting of
// the configuration it was made from (ReadPlanHead). An encrypted plan
// is opened with their key; an unencrypted one is refused when they
// encrypt, as plan -out would have encrypted it. A file that is not a
// saved plan, is damaged, was encrypted with another key, or was
// written by a newer agentctl is refused with a message saying so.
func ReadPlanFile(path string, keys *seal.Keys) (*PlanFile, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("saved plan %s does not exist; create one with `agentctl plan -out %s`", path, path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading saved plan: %w", err)
	}
	return decodePlanFile(path, data, keys)
}

func decodePlanFile(path string, data []byte, keys *seal.Keys) (*PlanFile, error) {
	var head struct {
		Kind          string `json:"kind"`
		FormatVersion int    `json:"format_version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) && se.Offset <= 1 {
			return nil, fmt.Errorf("%s is not an agentctl saved plan (not a JSON file); give the file written by `agentctl plan -out`", path)
		}
		return nil, JSONError(path, "saved plan", data, err)
	}
	if head.Kind != planKind {
		return nil, fmt.Errorf("%s is not an agentctl saved plan; give the file written by `agentctl plan -out`", path)
	}
	if head.FormatVersion > sealedPlanFormat {
		return nil, &state.NewerFormatError{File: path, What: "saved plan", Format: head.FormatVersion}
	}
	if head.FormatVersion < 1 {
		return nil, fmt.Errorf("%s: unsupported saved plan format_version %d; create the plan again", path, head.FormatVersion)
	}
	if head.FormatVersion == sealedPlanFormat {
		return openPlan(path, data, keys)
	}
	if keys.Encrypting() {
		return nil, fmt.Errorf("saved plan %s is not encrypted, but the configuration encrypts the state, so agentctl plan -out would have encrypted it (it was made before the key was configured, or the file was replaced); run agentctl plan -out again", path)
	}
	p := &PlanFile{}
	if err := json.Unmarshal(data, p); err != nil {
		return nil, JSONError(path, "saved plan", data, err)
	}
	if p.Lineage == "" {
		return nil, fmt.Errorf("%s: saved plan has no state lineage; the file is damaged, create the plan again", path)
	}
	return p, nil
}

// openPlan opens the encrypted saved plan data read from path with keys.
func openPlan(path string, data []byte, keys *seal.Keys) (*PlanFile, error) {
	var f sealedPlanFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, JSONError(path, "saved plan", data, err)
	}
	if f.Encryption != encryptionMethod {
		return nil, &state.NewerFormatError{File: path, What: "saved plan", Format: f.FormatVersion}
	}
	env, err := seal.DecodeText([]byte(f.Data))
	if err != nil {
		return nil, fmt.Errorf("saved plan %s: %w", path, err)
	}
	plain, err := keys.Key().Open("saved plan "+path, kindPlan, seal.Place{Name: f.ConfigDir}, env)
	if errors.Is(err, seal.ErrDamaged) {
		return nil, fmt.Errorf("%w; run agentctl plan -out again", err)
	}
	if err != nil {
		return nil, err
	}
	p, err := decodePlanFile(path, plain, nil)
	if err == nil && (p.FormatVersion != PlanFormatVersion || p.ConfigDir != f.ConfigDir) {
		err = fmt.Errorf("saved plan %s: the encrypted plan is not the plan of %s; run agentctl plan -out again", path, f.ConfigDir)
	}
	if err != nil {
		return nil, err
	}
	p.Encrypted = true
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
func (p *PlanFile) CheckFresh(s *state.State) error {
	if p.Serial == 0 && s.Serial == 0 {
		s.Lineage = p.Lineage
		return nil
	}
	if p.Lineage != s.Lineage || p.Serial != s.Serial {
		return &StalePlanError{PlanLineage: p.Lineage, StateLineage: s.Lineage, PlanSerial: p.Serial, StateSerial: s.Serial}
	}
	return nil
}
