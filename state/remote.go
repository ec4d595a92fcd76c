package state

import (
	"encoding/json"
	"errors"
	"fmt"
)

// What a Store other than Dir needs to keep the same promises with the
// same encodings: a whole state is the bytes of state.json, a change is
// the record of the state log (log.go), and both are read back with the
// same checks (the newer-format refusal, lineage and serial continuity).

// EncodeStateVersion prepares s for a whole write (the format version,
// version, empty maps, compact raw values), increments its serial and
// returns the state file's bytes. On error s.Serial is unchanged; the
// caller decrements it again when storing the bytes fails.
func EncodeStateVersion(s *State, version string) ([]byte, error) {
	if s == nil {
		return nil, errors.New("writing state: nil state")
	}
	if s.Lineage == "" {
		return nil, errors.New("writing state: the state has no lineage (create states with state.New or Store.Read)")
	}
	s.FormatVersion = s.formatVersion()
	if version != "" {
		s.AgentctlVersion = version
	}
	if s.Sandboxes == nil {
		s.Sandboxes = map[string]*Sandbox{}
	}
	if s.Runs == nil {
		s.Runs = map[string]*Run{}
	}
	if s.Outputs == nil {
		s.Outputs = map[string]*Output{}
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
func DecodeStateVersion(name string, data []byte) (*State, error) {
	return decodeState(name, data)
}

// EncodeChange returns the state log record of the change of the
// objects refs of s, which makes its serial s.Serial+1 (the caller
// increments s.Serial once the record is stored).
func EncodeChange(s *State, version string, refs ...Ref) ([]byte, error) {
	if s == nil {
		return nil, errors.New("writing state: nil state")
	}
	rec, err := changeRecord(s, version, refs)
	if err != nil {
		return nil, fmt.Errorf("writing state: %w", err)
	}
	return json.Marshal(rec)
}

// ApplyChanges applies change records (EncodeChange), in serial order,
// to s, read from a whole state version, as Read replays the state log:
// records s already has are skipped, the others must continue it one
// serial at a time in its lineage. name says where they were read from.
func ApplyChanges(name string, s *State, records [][]byte) error {
	applied := false
	for _, raw := range records {
		ok, err := applyRecord(s, raw)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		applied = applied || ok
	}
	if applied {
		return checkState(name, s)
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

// NewLockInfo fills in what Lock fills in when info leaves it empty:
// the ID, who, the PID and the version (Created is the caller's).
func NewLockInfo(info LockInfo, version string) LockInfo {
	return fillLockInfo(info, version)
}
