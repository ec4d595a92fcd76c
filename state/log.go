package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
)

// The state log (state.json.log beside the state file) makes a change to
// the state cost what the change is, not what the state is: Append
// writes the objects a change touched as one journal record (the journal
// format, so a record is one write and one fsync, and a crash can only
// tear the last one), and Read replays the records on top of state.json.
// Write, the compaction, replaces state.json whole and removes the log;
// releasing the lock compacts, so between commands state.json is whole
// unless a command died holding the lock (the next reader replays its
// log, the next lock holder compacts it).
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

// LogSuffix is appended to the state file's path to name its log.
const LogSuffix = ".log"

// Object kinds of a Ref.
const (
	refSandbox = "sandbox"
	refRun     = "run"
	refChat    = "chat"
	refMemory  = "memory"
	refOutputs = "outputs"
)

// Ref names one object of the state whose change Append records.
type Ref struct {
	kind, key string
}

// SandboxRef names the sandbox at addr.
func SandboxRef(addr string) Ref { return Ref{refSandbox, addr} }

// RunRef names the run at addr.
func RunRef(addr string) Ref { return Ref{refRun, addr} }

// ChatRef names the chat session at addr.
func ChatRef(addr string) Ref { return Ref{refChat, addr} }

// MemoryRef names the memory record at key (MemoryKey).
func MemoryRef(key string) Ref { return Ref{refMemory, key} }

// OutputsRef names the outputs, as a whole.
func OutputsRef() Ref { return Ref{kind: refOutputs} }

func (r Ref) String() string {
	if r.key == "" {
		return r.kind
	}
	return r.kind + " " + r.key
}

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

// LogFile returns the path of the state log.
func (d *Dir) LogFile() string { return d.stateFile + LogSuffix }

// Append records the current value (or the removal) of the objects refs
// of s in the state log, durably, and increments s.Serial. Its cost is
// that of those objects, whatever the size of the state: the state file
// is not rewritten (Write does that, and releasing the lock). The caller
// names every object it changed; an object changed but not named is not
// recorded until the next Write. A state never written is written whole.
// On error s.Serial is left unchanged.
func (d *Dir) Append(s *State, refs ...Ref) error {
	if s == nil {
		return errors.New("writing state: nil state")
	}
	if s.Serial == 0 {
		return d.Write(s)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held != nil {
		if err := d.held.Check(); err != nil {
			return fmt.Errorf("writing state: %w", err)
		}
	}
	rec, err := changeRecord(s, d.version, refs)
	if err != nil {
		return fmt.Errorf("writing state %s: %w", d.LogFile(), err)
	}
	if d.log == nil {
		sb, err := d.stateBinding()
		if err != nil {
			return fmt.Errorf("writing state: %w", err)
		}
		sb.lineage = s.Lineage
		j, err := openJournal(d.LogFile(), d.keys, kindStateLog, fixedBinding(stateLogName, sb))
		if err != nil {
			return fmt.Errorf("writing state: %w", err)
		}
		d.log = j
	}
	if err := d.log.Append(rec); err != nil {
		return fmt.Errorf("writing state: %w", err)
	}
	s.Serial++
	if d.verify {
		if err := d.verifyLog(s, refs); err != nil {
			return err
		}
	}
	return nil
}

// changeRecord is the record of the change of the objects refs of s,
// which gives the state serial s.Serial+1; version, when not "", becomes
// s's agentctl version.
func changeRecord(s *State, version string, refs []Ref) (logRecord, error) {
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
func encodeChange(s *State, r Ref) (logChange, error) {
	c := logChange{Kind: r.kind, Key: r.key}
	var v any
	switch r.kind {
	case refSandbox:
		if sb := s.Sandboxes[r.key]; sb != nil {
			if err := compactSandbox(r.key, sb); err != nil {
				return c, err
			}
			v = sb
		}
	case refRun:
		if run := s.Runs[r.key]; run != nil {
			if err := compactRun(r.key, run); err != nil {
				return c, err
			}
			v = run
		}
	case refChat:
		if ch := s.Chats[r.key]; ch != nil {
			v = ch
		}
	case refMemory:
		if m := s.Memories[r.key]; m != nil {
			v = m
		}
	case refOutputs:
		if err := compactOutputs(s.Outputs); err != nil {
			return c, err
		}
		v = s.Outputs
	default:
		return c, fmt.Errorf("unknown state object kind %q", r.kind)
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

// errLogGap is a log that does not continue the state file read with
// it: a compaction happened in between (Read tries again), or the log
// belongs to another state file.
type errLogGap struct {
	log           string
	serial, first uint64
	lineage       string
}

func (e *errLogGap) Error() string {
	switch {
	case e.log != "" && e.lineage != "":
		return fmt.Sprintf("the state log %s belongs to the state of lineage %s, not to this state file's", e.log, e.lineage)
	case e.log != "":
		return fmt.Sprintf("the state log %s does not continue the state file: the state file has serial %d, the log's next record serial %d", e.log, e.serial, e.first)
	case e.lineage != "":
		return fmt.Sprintf("the state changes belong to the state of lineage %s, not to the state version's", e.lineage)
	}
	return fmt.Sprintf("the state changes do not continue the state version: it has serial %d, the next change serial %d", e.serial, e.first)
}

// replayLog applies the records of the state log to s, read from the
// state file in form. It returns how many it applied.
func (d *Dir) replayLog(s *State, form stateForm) (int, error) {
	applied := 0
	bind := fixedBinding(stateLogName, d.bindingOf(s.Lineage, form))
	_, err := readJournal(d.LogFile(), d.keys, kindStateLog, bind, func(raw json.RawMessage) error {
		ok, err := applyRecord(s, raw)
		if gap, isGap := errors.AsType[*errLogGap](err); isGap {
			gap.log = d.LogFile()
		}
		if ok {
			applied++
		}
		return err
	})
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	return applied, err
}

// applyRecord applies one change record (a state log record, or a pg
// change row) to s: false for a record s already has, a *errLogGap for
// one that does not continue s.
func applyRecord(s *State, raw []byte) (bool, error) {
	var rec logRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return false, fmt.Errorf("not a state change record: %w", err)
	}
	if rec.Serial <= s.Serial {
		return false, nil // already in the whole state it continues
	}
	if rec.Lineage != s.Lineage {
		return false, &errLogGap{lineage: rec.Lineage}
	}
	if rec.Serial != s.Serial+1 {
		return false, &errLogGap{serial: s.Serial, first: rec.Serial}
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
func applyChange(s *State, c logChange) error {
	removed := len(c.Value) == 0 || string(c.Value) == "null"
	var err error
	switch c.Kind {
	case refSandbox:
		err = setObject(&s.Sandboxes, c, removed)
	case refRun:
		err = setObject(&s.Runs, c, removed)
	case refChat:
		err = setObject(&s.Chats, c, removed)
	case refMemory:
		err = setObject(&s.Memories, c, removed)
	case refOutputs:
		outputs := map[string]*Output{}
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

// closeLog closes the open state log, if any; d.mu is held.
func (d *Dir) closeLog() error {
	if d.log == nil {
		return nil
	}
	err := d.log.Close()
	d.log = nil
	return err
}

// compactLog writes the state file whole from the state file and its log
// when there is a log, and removes the log; the lock is held (Unlock).
func (d *Dir) compactLog() error {
	if _, err := os.Stat(d.LogFile()); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	s, err := d.Read()
	if err != nil {
		return fmt.Errorf("compacting the state log: %w", err)
	}
	if err := d.Write(s); err != nil {
		return fmt.Errorf("compacting the state log: %w", err)
	}
	return nil
}

// verifyLog checks that the state file and its log, read back, are s:
// that the caller named every object it changed. It costs a read of
// the whole state, and runs only under AGENTCTL_STATE_VERIFY=1 (the
// tests set it).
func (d *Dir) verifyLog(s *State, refs []Ref) error {
	data, err := os.ReadFile(d.stateFile)
	if err != nil {
		return fmt.Errorf("verifying the state log: %w", err)
	}
	back, form, err := d.decodeStateFileForm(d.stateFile, data)
	if err != nil {
		return fmt.Errorf("verifying the state log: %w", err)
	}
	if _, err := d.replayLog(back, form); err != nil {
		return fmt.Errorf("verifying the state log: %w", err)
	}
	var diff []string
	eq := func(a, b any) bool {
		x, _ := json.Marshal(a)
		y, _ := json.Marshal(b)
		return string(x) == string(y)
	}
	for _, k := range unionKeys(s.Sandboxes, back.Sandboxes) {
		if !eq(s.Sandboxes[k], back.Sandboxes[k]) {
			diff = append(diff, SandboxRef(k).String())
		}
	}
	for _, k := range unionKeys(s.Runs, back.Runs) {
		if !eq(s.Runs[k], back.Runs[k]) {
			diff = append(diff, RunRef(k).String())
		}
	}
	for _, k := range unionKeys(s.Chats, back.Chats) {
		if !eq(s.Chats[k], back.Chats[k]) {
			diff = append(diff, ChatRef(k).String())
		}
	}
	for _, k := range unionKeys(s.Memories, back.Memories) {
		if !eq(s.Memories[k], back.Memories[k]) {
			diff = append(diff, MemoryRef(k).String())
		}
	}
	if !eq(s.Outputs, back.Outputs) && !(len(s.Outputs) == 0 && len(back.Outputs) == 0) {
		diff = append(diff, refOutputs)
	}
	if s.Serial != back.Serial || s.AgentctlVersion != back.AgentctlVersion || s.Lineage != back.Lineage {
		diff = append(diff, "serial "+strconv.FormatUint(back.Serial, 10)+" read back for "+strconv.FormatUint(s.Serial, 10))
	}
	if len(diff) > 0 {
		return fmt.Errorf("state log check: changed but not recorded by the append of %v: %v", refs, diff)
	}
	return nil
}

func unionKeys[V any](a, b map[string]V) []string {
	m := map[string]bool{}
	for k := range a {
		m[k] = true
	}
	for k := range b {
		m[k] = true
	}
	return slices.Sorted(maps.Keys(m))
}
