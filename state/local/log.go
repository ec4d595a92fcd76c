package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"

	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/statefile"
)

// The state log (state.json.log beside the state file) makes a change to
// the state cost what the change is, not what the state is: Append
// writes the objects a change touched as one journal record (the journal
// format, so a record is one write and one fsync, and a crash can only
// tear the last one), and Read replays the records on top of state.json.
// Write, the compaction, replaces state.json whole and removes the log;
// releasing the lock compacts, so between commands state.json is whole
// unless a command died holding the lock (the next reader replays its
// log, the next lock holder compacts it). The records are statefile's
// change records (statefile.ChangeRecord).

// LogSuffix is appended to the state file's path to name its log.
const LogSuffix = ".log"

// LogFile returns the path of the state log.
func (d *Dir) LogFile() string { return d.stateFile + LogSuffix }

// Append records the current value (or the removal) of the objects refs
// of s in the state log, durably, and increments s.Serial. Its cost is
// that of those objects, whatever the size of the state: the state file
// is not rewritten (Write does that, and releasing the lock). The caller
// names every object it changed; an object changed but not named is not
// recorded until the next Write. A state never written is written whole.
// On error s.Serial is left unchanged.
func (d *Dir) Append(ctx context.Context, s *state.State, refs ...state.Ref) error {
	if s == nil {
		return errors.New("writing state: nil state")
	}
	if s.Serial == 0 {
		return d.Write(ctx, s)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held != nil {
		if err := d.held.Check(ctx); err != nil {
			return fmt.Errorf("writing state: %w", err)
		}
	}
	rec, err := statefile.ChangeRecord(s, d.version, refs...)
	if err != nil {
		return fmt.Errorf("writing state %s: %w", d.LogFile(), err)
	}
	if d.log == nil {
		sb, err := d.stateBinding()
		if err != nil {
			return fmt.Errorf("writing state: %w", err)
		}
		sb.Lineage = s.Lineage
		j, err := statefile.OpenSealedJournal(d.LogFile(), d.keys, statefile.KindStateLog, statefile.FixedBinding(statefile.StateLogName, sb))
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

// state file in form. It returns how many it applied.
func (d *Dir) replayLog(s *state.State, form statefile.Form) (int, error) {
	applied := 0
	bind := statefile.FixedBinding(statefile.StateLogName, d.bindingOf(s.Lineage, form))
	_, err := statefile.ReadSealedJournal(d.LogFile(), d.keys, statefile.KindStateLog, bind, func(raw json.RawMessage) error {
		ok, err := statefile.ApplyRecord(s, raw)
		if gap, isGap := errors.AsType[*statefile.LogGapError](err); isGap {
			gap.Log = d.LogFile()
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
func (d *Dir) compactLog(ctx context.Context) error {
	if _, err := os.Stat(d.LogFile()); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	s, err := d.Read(ctx)
	if err != nil {
		return fmt.Errorf("compacting the state log: %w", err)
	}
	if err := d.Write(ctx, s); err != nil {
		return fmt.Errorf("compacting the state log: %w", err)
	}
	return nil
}

// verifyLog checks that the state file and its log, read back, are s:
// that the caller named every object it changed. It costs a read of
// the whole state, and runs only under AGENTCTL_STATE_VERIFY=1 (the
// tests set it).
func (d *Dir) verifyLog(s *state.State, refs []state.Ref) error {
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
			diff = append(diff, state.SandboxRef(k).String())
		}
	}
	for _, k := range unionKeys(s.Runs, back.Runs) {
		if !eq(s.Runs[k], back.Runs[k]) {
			diff = append(diff, state.RunRef(k).String())
		}
	}
	for _, k := range unionKeys(s.Chats, back.Chats) {
		if !eq(s.Chats[k], back.Chats[k]) {
			diff = append(diff, state.ChatRef(k).String())
		}
	}
	for _, k := range unionKeys(s.Memories, back.Memories) {
		if !eq(s.Memories[k], back.Memories[k]) {
			diff = append(diff, state.MemoryRef(k).String())
		}
	}
	if !eq(s.Outputs, back.Outputs) && !(len(s.Outputs) == 0 && len(back.Outputs) == 0) {
		diff = append(diff, state.RefOutputs)
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
