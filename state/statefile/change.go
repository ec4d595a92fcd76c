package statefile

import (
	"encoding/json"
	"fmt"

	"github.com/agentctl/agentctl/state"
)

// A change record is what the state log (state.json.log, package
// local) and the PostgreSQL store's changes hold: the change of a few
// objects of the state, which Append records at the cost of those
// objects.
//
// A record carries the serial it makes the state's, the lineage, the
// agentctl version and, per object, its new JSON value or its removal:
//
//	{"serial":12,"lineage":"…","agentctl_version":"…","changes":[
//	  {"kind":"run","key":"run.a","value":{…}},
//	  {"kind":"sandbox","key":"sandbox.b"}]}
//
// Records whose serial the state file already has are skipped (a crash
// between the compaction's rename and the log's removal leaves them);
// the others must continue it one serial at a time, or the log does not
// belong to this state file and Read says so.

type logRecord struct {
	Serial          uint64      `json:"serial"`
	Lineage         string      `json:"lineage"`
	AgentctlVersion string      `json:"agentctl_version,omitempty"`
	Changes         []logChange `json:"changes"`
}

type logChange struct {
	Kind string `json:"kind"`
	Key  string `json:"key,omitempty"`
	// Value is the object's new JSON; absent when it was removed.
	Value json.RawMessage `json:"value,omitempty"`
}

// changeRecord is the record of the change of the objects refs of s,
// which gives the state serial s.Serial+1; version, when not "", becomes
// s's agentctl version.
func changeRecord(s *state.State, version string, refs []state.Ref) (logRecord, error) {
	if version != "" {
		s.AgentctlVersion = version
	}
	rec := logRecord{Serial: s.Serial + 1, Lineage: s.Lineage, AgentctlVersion: s.AgentctlVersion}
	for _, r := range refs {
		c, err := encodeChange(s, r)
		if err != nil {
			return rec, err
		}
		rec.Changes = append(rec.Changes, c)
	}
	return rec, nil
}

// encodeChange encodes the current value of the object r of s, after
// compacting its raw values as Write does.
func encodeChange(s *state.State, r state.Ref) (logChange, error) {
	c := logChange{Kind: r.Kind(), Key: r.Key()}
	var v any
	switch r.Kind() {
	case state.RefSandbox:
		if sb := s.Sandboxes[r.Key()]; sb != nil {
			if err := compactSandbox(r.Key(), sb); err != nil {
				return c, err
			}
			v = sb
		}
	case state.RefRun:
		if run := s.Runs[r.Key()]; run != nil {
			if err := compactRun(r.Key(), run); err != nil {
				return c, err
			}
			v = run
		}
	case state.RefChat:
		if ch := s.Chats[r.Key()]; ch != nil {
			v = ch
		}
	case state.RefMemory:
		if m := s.Memories[r.Key()]; m != nil {
			v = m
		}
	case state.RefOutputs:
		if err := compactOutputs(s.Outputs); err != nil {
			return c, err
		}
		v = s.Outputs
	default:
		return c, fmt.Errorf("unknown state object kind %q", r.Kind())
	}
	if v == nil {
		return c, nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return c, fmt.Errorf("encoding %s: %w", r, err)
	}
	c.Value = data
	return c, nil
}

// LogGapError is a log that does not continue the state file read with
// it: a compaction happened in between (Read tries again), or the log
// belongs to another state file.
type LogGapError struct {
	// Log names the state log, when the records are one.
	Log           string
	serial, first uint64
	lineage       string
}

func (e *LogGapError) Error() string {
	switch {
	case e.Log != "" && e.lineage != "":
		return fmt.Sprintf("the state log %s belongs to the state of lineage %s, not to this state file's", e.Log, e.lineage)
	case e.Log != "":
		return fmt.Sprintf("the state log %s does not continue the state file: the state file has serial %d, the log's next record serial %d", e.Log, e.serial, e.first)
	case e.lineage != "":
		return fmt.Sprintf("the state changes belong to the state of lineage %s, not to the state version's", e.lineage)
	}
	return fmt.Sprintf("the state changes do not continue the state version: it has serial %d, the next change serial %d", e.serial, e.first)
}

// ApplyRecord applies one change record (a state log record, or a pg
// change row) to s: false for a record s already has, a *LogGapError for
// one that does not continue s.
func ApplyRecord(s *state.State, raw []byte) (bool, error) {
	var rec logRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return false, fmt.Errorf("not a state change record: %w", err)
	}
	if rec.Serial <= s.Serial {
		return false, nil // already in the whole state it continues
	}
	if rec.Lineage != s.Lineage {
		return false, &LogGapError{lineage: rec.Lineage}
	}
	if rec.Serial != s.Serial+1 {
		return false, &LogGapError{serial: s.Serial, first: rec.Serial}
	}
	for _, c := range rec.Changes {
		if err := applyChange(s, c); err != nil {
			return false, err
		}
	}
	s.Serial = rec.Serial
	if rec.AgentctlVersion != "" {
		s.AgentctlVersion = rec.AgentctlVersion
	}
	return true, nil
}

// applyChange sets or removes one object of s.
func applyChange(s *state.State, c logChange) error {
	removed := len(c.Value) == 0 || string(c.Value) == "null"
	var err error
	switch c.Kind {
	case state.RefSandbox:
		err = setObject(&s.Sandboxes, c, removed)
	case state.RefRun:
		err = setObject(&s.Runs, c, removed)
	case state.RefChat:
		err = setObject(&s.Chats, c, removed)
	case state.RefMemory:
		err = setObject(&s.Memories, c, removed)
	case state.RefOutputs:
		outputs := map[string]*state.Output{}
		if !removed {
			err = json.Unmarshal(c.Value, &outputs)
		}
		s.Outputs = outputs
	default:
		return fmt.Errorf("unknown state object kind %q; a newer agentctl wrote it", c.Kind)
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", c.Kind, c.Key, err)
	}
	return nil
}

// setObject sets (*m)[c.Key] to the object c holds, or removes it.
func setObject[T any](m *map[string]*T, c logChange, removed bool) error {
	if removed {
		delete(*m, c.Key)
		return nil
	}
	v := new(T)
	if err := json.Unmarshal(c.Value, v); err != nil {
		return err
	}
	if *m == nil {
		*m = map[string]*T{}
	}
	(*m)[c.Key] = v
	return nil
}
