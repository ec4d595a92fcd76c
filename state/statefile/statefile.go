// Package statefile is agentctl's file formats: the state file (its
// format versions, its encrypted form), the state log's change records
// (which the PostgreSQL store keeps as rows), the journal file, saved
// plans, and the atomic and durable file writes they are made with.
// The stores (packages local and pgstore) read and write with it; it
// reads and writes bytes and files, never a whole store.
//
// See docs/state.md for the formats.
package statefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/state"
)

func encodeState(s *state.State) ([]byte, error) {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(data, '\n'), nil
}

// decodeState parses and checks a state file's content. name is used in
// error messages.
func decodeState(name string, data []byte) (*state.State, error) {
	var head struct {
		FormatVersion *int `json:"format_version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, JSONError(name, "state file", data, err)
	}
	if head.FormatVersion == nil {
		return nil, fmt.Errorf("%s is not an agentctl state file: it has no format_version; check the -state path", name)
	}
	v := *head.FormatVersion
	if v > state.FormatVersion {
		return nil, &state.NewerFormatError{File: name, What: "state", Format: v}
	}
	if v < 1 {
		return nil, fmt.Errorf("%s: unsupported state format_version %d; the file is damaged or not an agentctl state file", name, v)
	}
	s := &state.State{}
	if err := json.Unmarshal(data, s); err != nil {
		return nil, JSONError(name, "state file", data, err)
	}
	if err := CheckState(name, s); err != nil {
		return nil, err
	}
	return s, nil
}

// CheckState checks what decoding cannot (a lineage, no null records,
// keys that match addresses), fills in empty maps and compacts the raw
// values; name is used in error messages.
func CheckState(name string, s *state.State) error {
	if s.Lineage == "" {
		return fmt.Errorf("%s: state has no lineage; the file is damaged", name)
	}
	switch s.DigestAlgorithm {
	case "", digest.SHA256, digest.BLAKE3:
	default:
		return fmt.Errorf("%s: digest_algorithm %q is not one this agentctl knows (%s, %s); upgrade agentctl, or the file is damaged", name, s.DigestAlgorithm, digest.BLAKE3, digest.SHA256)
	}
	if s.Digests() != digest.SHA256 && s.FormatVersion < 2 {
		return fmt.Errorf("%s: digest_algorithm %q needs format_version 2, the file has %d; the file is damaged or was edited by hand", name, s.DigestAlgorithm, s.FormatVersion)
	}
	if s.Sandboxes == nil {
		s.Sandboxes = map[string]*state.Sandbox{}
	}
	if s.Runs == nil {
		s.Runs = map[string]*state.Run{}
	}
	if s.Outputs == nil {
		s.Outputs = map[string]*state.Output{}
	}
	for addr, sb := range s.Sandboxes {
		if sb == nil {
			return fmt.Errorf("%s: sandboxes[%q] is null; the file is damaged (edit it to remove the entry)", name, addr)
		}
		if sb.Address == "" {
			sb.Address = addr
		} else if sb.Address != addr {
			return fmt.Errorf("%s: sandboxes[%q] has address %q; the key and the address must match", name, addr, sb.Address)
		}
	}
	for addr, r := range s.Runs {
		if r == nil {
			return fmt.Errorf("%s: runs[%q] is null; the file is damaged (edit it to remove the entry)", name, addr)
		}
		if r.Address == "" {
			r.Address = addr
		} else if r.Address != addr {
			return fmt.Errorf("%s: runs[%q] has address %q; the key and the address must match", name, addr, r.Address)
		}
		if err := state.CheckToolDecisions(r); err != nil {
			return fmt.Errorf("%s: runs[%q]: %w", name, addr, err)
		}
	}
	for k, o := range s.Outputs {
		if o == nil {
			return fmt.Errorf("%s: outputs[%q] is null; the file is damaged", name, k)
		}
	}
	if err := compactRaw(s); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// compactRaw rewrites the raw JSON values held in s (outputs, session
// data) in compact form, so that a state read back from the indented file
// holds exactly the bytes that were written and digests over them stay
// stable.
func compactRaw(s *state.State) error {
	for addr, sb := range s.Sandboxes {
		if err := compactSandbox(addr, sb); err != nil {
			return err
		}
	}
	for addr, r := range s.Runs {
		if err := compactRun(addr, r); err != nil {
			return err
		}
	}
	return compactOutputs(s.Outputs)
}

// compactJSON rewrites *raw in compact form; where names it in errors.
func compactJSON(where string, raw *json.RawMessage) error {
	if len(*raw) == 0 {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, *raw); err != nil {
		return fmt.Errorf("%s is not valid JSON: %w", where, err)
	}
	if b.Len() != len(*raw) {
		*raw = b.Bytes()
	}
	return nil
}

// compactSandbox is compactRaw for one sandbox.
func compactSandbox(addr string, sb *state.Sandbox) error {
	if sb == nil {
		return nil
	}
	if err := compactJSON(fmt.Sprintf("sandboxes[%q].session.data", addr), &sb.Session.Data); err != nil {
		return err
	}
	return fixAttributes(fmt.Sprintf("sandboxes[%q]", addr), sb.Attributes, compactJSON)
}

// compactRun is compactRaw for one run.
func compactRun(addr string, r *state.Run) error {
	if r == nil {
		return nil
	}
	if err := compactJSON(fmt.Sprintf("runs[%q].output", addr), &r.Output); err != nil {
		return err
	}
	return fixAttributes(fmt.Sprintf("runs[%q]", addr), r.Attributes, compactJSON)
}

// compactOutputs is compactRaw for the outputs.
func compactOutputs(outputs map[string]*state.Output) error {
	for name, o := range outputs {
		if o == nil {
			continue
		}
		if err := compactJSON(fmt.Sprintf("outputs[%q].value", name), &o.Value); err != nil {
			return err
		}
	}
	return nil
}

// fixAttributes compacts the values of attrs with fix.
func fixAttributes(where string, attrs map[string]state.Attribute, fix func(string, *json.RawMessage) error) error {
	for path, a := range attrs {
		if err := fix(fmt.Sprintf("%s.attributes[%q].value", where, path), &a.Value); err != nil {
			return err
		}
		attrs[path] = a
	}
	return nil
}

// JSONError turns a JSON decoding error into one that names the file and
// the line, column and byte offset of the problem.
func JSONError(name, what string, data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off := se.Offset
		if len(bytes.TrimSpace(data)) == 0 {
			return fmt.Errorf("%s: %s is empty; the file is damaged", name, what)
		}
		line, col := position(data, off)
		return fmt.Errorf("%s: %s is not valid JSON at line %d, column %d (byte offset %d): %v; the file is damaged",
			name, what, line, col, off, se)
	case errors.As(err, &te):
		line, col := position(data, te.Offset)
		field := te.Field
		if field == "" {
			field = "(top level)"
		}
		return fmt.Errorf("%s: %s has a %s where a %s is expected, in %s at line %d, column %d (byte offset %d)",
			name, what, te.Value, te.Type, field, line, col, te.Offset)
	default:
		return fmt.Errorf("%s: reading %s: %w", name, what, err)
	}
}

// position converts a byte offset into a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	before := data[:off]
	line = 1 + bytes.Count(before, []byte{'\n'})
	col = int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// encryptedStateFile is the state file when it is encrypted: the
// state file's bytes, sealed (seal.Key.Seal, kind "state") and in
// base64. Its format_version, 2, makes an agentctl that predates
// encryption refuse it as newer instead of misreading it.
type encryptedStateFile struct {
	FormatVersion int    `json:"format_version"`
	Encryption    string `json:"encryption"`
	KeyCheck      string `json:"key_check"`
	Data          string `json:"data"`
}

const (
	encryptedStateFormat = 2
	encryptionMethod     = "aes-256-gcm"
)

// Form is the form a state file is in.
type Form int

const (
	// FormPlain is not encrypted.
	FormPlain Form = iota
	// FormLegacy is encrypted by an agentctl that did not bind
	// records to their places (a version 1 envelope).
	FormLegacy
	// FormBound is encrypted by one that does: its journals' records
	// are all bound.
	FormBound
)

// WantForm is the form a state file is written in with keys.
func WantForm(keys *seal.Keys) Form {
	if keys.Encrypting() {
		return FormBound
	}
	return FormPlain
}

// SealStateFile returns the state file's bytes as written with keys:
// data, or its encrypted form when keys encrypt. The state file has no
// place of its own (its lineage is inside it).
func SealStateFile(keys *seal.Keys, data []byte) ([]byte, error) {
	if !keys.Encrypting() {
		return data, nil
	}
	env, err := keys.Seal(KindState, seal.Place{}, data)
	if err != nil {
		return nil, err
	}
	out, err := json.MarshalIndent(encryptedStateFile{
		FormatVersion: encryptedStateFormat,
		Encryption:    encryptionMethod,
		KeyCheck:      keys.Key().Check(),
		Data:          string(seal.EncodeText(env)),
	}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// OpenStateFile returns the plaintext of a state file's content (data
// itself when it is not encrypted), opened with keys, and the form it
// was in.
func OpenStateFile(keys *seal.Keys, name string, data []byte) (plain []byte, form Form, err error) {
	trimmed := bytes.TrimSpace(data)
	if !bytes.HasPrefix(trimmed, []byte("{")) || !bytes.Contains(trimmed, []byte(`"encryption"`)) {
		return data, FormPlain, nil
	}
	var f encryptedStateFile
	if err := json.Unmarshal(data, &f); err != nil || f.Encryption == "" {
		return data, FormPlain, nil // a plaintext state; decodeState reports it
	}
	if f.FormatVersion != encryptedStateFormat || f.Encryption != encryptionMethod {
		return nil, FormLegacy, &state.NewerFormatError{File: name, What: "encrypted state", Format: f.FormatVersion}
	}
	env, err := seal.DecodeText([]byte(f.Data))
	if err != nil {
		return nil, FormLegacy, fmt.Errorf("%s: %w", name, err)
	}
	form = FormLegacy
	if seal.Bound(env) {
		form = FormBound
	}
	plain, err = keys.Key().Open("the state file "+name, KindState, seal.Place{}, env)
	return plain, form, err
}

// DecodeStateFile is DecodeStateVersion for the content of a state
// file that may be encrypted, opened with keys; it also returns the
// form the file was in.
func DecodeStateFile(keys *seal.Keys, name string, data []byte) (*state.State, Form, error) {
	plain, form, err := OpenStateFile(keys, name, data)
	if err != nil {
		return nil, form, err
	}
	s, err := decodeState(name, plain)
	return s, form, err
}

// What every store keeps with the same encodings: a whole state is the
// bytes of state.json, a change is the record of the state log
// (change.go), and both are read back with the same checks (the
// newer-format refusal, lineage and serial continuity).

// EncodeStateVersion prepares s for a whole write (the format version,
// version, empty maps, compact raw values), increments its serial and
// returns the state file's bytes. On error s.Serial is unchanged; the
// caller decrements it again when storing the bytes fails.
func EncodeStateVersion(s *state.State, version string) ([]byte, error) {
	if s == nil {
		return nil, errors.New("writing state: nil state")
	}
	if s.Lineage == "" {
		return nil, errors.New("writing state: the state has no lineage (create states with state.New or Store.Read)")
	}
	s.FormatVersion = s.WrittenFormat()
	if version != "" {
		s.AgentctlVersion = version
	}
	if s.Sandboxes == nil {
		s.Sandboxes = map[string]*state.Sandbox{}
	}
	if s.Runs == nil {
		s.Runs = map[string]*state.Run{}
	}
	if s.Outputs == nil {
		s.Outputs = map[string]*state.Output{}
	}
	if err := compactRaw(s); err != nil {
		return nil, fmt.Errorf("writing state: %w", err)
	}
	s.Serial++
	data, err := encodeState(s)
	if err != nil {
		s.Serial--
		return nil, fmt.Errorf("writing state: %w", err)
	}
	return data, nil
}

// DecodeStateVersion parses and checks a whole state as
// EncodeStateVersion wrote it; name says where it was read from in
// errors. A state of a newer format is refused with a *NewerFormatError.
func DecodeStateVersion(name string, data []byte) (*state.State, error) {
	return decodeState(name, data)
}

// EncodeChange returns the state log record of the change of the
// objects refs of s, which makes its serial s.Serial+1 (the caller
// increments s.Serial once the record is stored).
func EncodeChange(s *state.State, version string, refs ...state.Ref) ([]byte, error) {
	if s == nil {
		return nil, errors.New("writing state: nil state")
	}
	rec, err := ChangeRecord(s, version, refs...)
	if err != nil {
		return nil, fmt.Errorf("writing state: %w", err)
	}
	return rec, nil
}

// ChangeRecord is EncodeChange for a s that is not nil, its error not
// wrapped.
func ChangeRecord(s *state.State, version string, refs ...state.Ref) (json.RawMessage, error) {
	rec, err := changeRecord(s, version, refs)
	if err != nil {
		return nil, err
	}
	return json.Marshal(rec)
}

// ApplyChanges applies change records (EncodeChange), in serial order,
// to s, read from a whole state version, as Read replays the state log:
// records s already has are skipped, the others must continue it one
// serial at a time in its lineage. name says where they were read from.
func ApplyChanges(name string, s *state.State, records [][]byte) error {
	applied := false
	for _, raw := range records {
		ok, err := ApplyRecord(s, raw)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		applied = applied || ok
	}
	if applied {
		return CheckState(name, s)
	}
	return nil
}

// ChangeSerial returns the serial and lineage a change record gives the
// state.
func ChangeSerial(record []byte) (serial uint64, lineage string, err error) {
	var rec logRecord
	if err := json.Unmarshal(record, &rec); err != nil {
		return 0, "", fmt.Errorf("not a state change record: %w", err)
	}
	return rec.Serial, rec.Lineage, nil
}

// Conversion names the change from the stored form to the wanted one.
func Conversion(stored, want Form) string {
	switch {
	case stored == want:
		return ""
	case want == FormPlain:
		return "decrypts"
	case stored == FormPlain:
		return "encrypts"
	}
	return "binds each record to its place"
}
