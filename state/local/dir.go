// Package local is the local state store: the state directory
// (".agentctl/" next to the configuration, or as given), which holds:
//
//	state.json          the state, replaced atomically when written whole
//	state.json.log      the changes appended since (Append; see log.go)
//	state.json.backup   the state before it was last written whole
//	state.lock          the lock file (never removed; the lock is a kernel lock on it)
//	state.lock.info     who holds the lock (JSON), present while it is held
//	journals/*.jsonl    one append-only journal per run: its checkpoints, then its transcript
//	snapshots/...       sandbox snapshots (written by the engine)
//
// See docs/state.md for the file formats and the guarantees.
package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/sandbox/archive"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/statefile"
)

// StateFileName is the name of the state file inside a state directory.
const StateFileName = "state.json"

// BackupSuffix is appended to the state file's path to name its backup:
// the state as it was before the latest write.
const BackupSuffix = ".backup"

// Dir is a state directory.
type Dir struct {
	path      string
	stateFile string
	version   string

	mu   sync.Mutex         // guards held and log; serializes Write and Append
	held *Lock              // the lock taken through this Dir, if any
	log  *statefile.Journal // the state log, once Append opened it
	// verify makes Append read the state back and compare
	// (AGENTCTL_STATE_VERIFY=1).
	verify bool
	// keys encrypt the state file, the state log, the journals and the
	// snapshots (WithEncryption); nil for none.
	keys *seal.Keys
	// bound is the state the journals' records are bound to, as last
	// read from or written to the state file (nil before).
	bound atomic.Pointer[statefile.StateBinding]
}

// Option configures OpenDir.
type Option func(*Dir)

// WithStateFile makes the state file path differ from DIR/state.json (the
// -state flag). Journals, snapshots and the lock stay in the directory.
func WithStateFile(path string) Option {
	return func(d *Dir) { d.stateFile = path }
}

// WithAgentctlVersion sets the agentctl_version Write records.
func WithAgentctlVersion(v string) Option {
	return func(d *Dir) { d.version = v }
}

// WithEncryption encrypts what the directory keeps at rest (the state
// file, the state log, the journals and the snapshots) with keys, or
// decrypts it on the next write when keys say decrypt; nil keys read
// and write plaintext and refuse what is encrypted (docs/state.md,
// "Encryption").
func WithEncryption(keys *seal.Keys) Option {
	return func(d *Dir) { d.keys = keys }
}

// Encryption returns the directory's encryption setting (nil for none).
func (d *Dir) Encryption() *seal.Keys { return d.keys }

// OpenDir returns the state directory at path. It does not create it:
// Write, Lock and OpenJournal create it when first needed.
func OpenDir(path string, opts ...Option) (*Dir, error) {
	if path == "" {
		return nil, errors.New("state directory path is empty")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("state directory %s: %w", path, err)
	}
	d := &Dir{path: abs, verify: os.Getenv("AGENTCTL_STATE_VERIFY") == "1"}
	for _, o := range opts {
		o(d)
	}
	if d.stateFile == "" {
		d.stateFile = filepath.Join(abs, StateFileName)
	} else if d.stateFile, err = filepath.Abs(d.stateFile); err != nil {
		return nil, fmt.Errorf("state file %s: %w", d.stateFile, err)
	}
	if fi, err := os.Stat(abs); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("state directory %s is a file, not a directory; remove it or choose another location", abs)
	}
	if fi, err := os.Stat(d.stateFile); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("state file %s is a directory; give the path of a file", d.stateFile)
	}
	return d, nil
}

// Path returns the absolute path of the state directory.
func (d *Dir) Path() string { return d.path }

// StateFile returns the absolute path of the state file.
func (d *Dir) StateFile() string { return d.stateFile }

// BackupFile returns the absolute path of the state backup: the state
// file as it was before the latest write.
func (d *Dir) BackupFile() string { return d.stateFile + BackupSuffix }

// Abs resolves a path stored in state (relative to the state directory).
func (d *Dir) Abs(rel string) string {
	if filepath.IsAbs(rel) {
		return rel
	}
	return filepath.Join(d.path, filepath.FromSlash(rel))
}

// Sub returns the path of elem inside the state directory, e.g.
// d.Sub("snapshots") or d.Sub("providers", "local").
func (d *Dir) Sub(elem ...string) string {
	return filepath.Join(append([]string{d.path}, elem...)...)
}

// Rel returns path relative to the state directory, with forward slashes,
// as stored in state.
func (d *Dir) Rel(path string) (string, error) {
	r, err := filepath.Rel(d.path, path)
	if err != nil {
		return "", fmt.Errorf("path %s is not inside the state directory %s: %w", path, d.path, err)
	}
	return filepath.ToSlash(r), nil
}

// Ensure creates the state directory if needed. A new directory gets a
// .gitignore that ignores everything in it, so state, journals and
// snapshots are never committed by accident.
func (d *Dir) Ensure() error {
	if _, err := os.Stat(d.path); err == nil {
		return nil
	}
	if err := os.MkdirAll(d.path, 0o755); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	gi := filepath.Join(d.path, ".gitignore")
	if err := os.WriteFile(gi, []byte("# Created by agentctl: state, journals and snapshots are local.\n*\n"), 0o644); err != nil {
		return fmt.Errorf("creating state directory: %w", err)
	}
	return statefile.SyncDir(filepath.Dir(d.path))
}

// Exists reports whether the state file exists.
func (d *Dir) Exists() bool {
	_, err := os.Stat(d.stateFile)
	return err == nil
}

// Read reads the state: the state file, and the changes its log records
// since (see log.go). A missing file yields New() (serial 0, a fresh
// lineage, nothing written). A file written by a newer agentctl is
// refused with a *NewerFormatError; invalid content is reported with the
// file name and position, and with how to recover from the backup.
func (d *Dir) Read(ctx context.Context) (*state.State, error) {
	for attempt := 1; ; attempt++ {
		s, err := d.readOnce()
		var gap *statefile.LogGapError
		if errors.As(err, &gap) {
			if attempt < 5 {
				continue // compacted while read: read both again
			}
			return nil, fmt.Errorf("reading state: %w; if no agentctl command is running, remove the log to use %s as it is (the changes the log records are then lost), or put back the state file the log belongs to", err, d.stateFile)
		}
		return s, err
	}
}

func (d *Dir) readOnce() (*state.State, error) {
	data, err := os.ReadFile(d.stateFile)
	if errors.Is(err, fs.ErrNotExist) {
		s := state.New()
		if _, err := os.Stat(d.LogFile()); err == nil {
			return nil, fmt.Errorf("reading state: the state file %s is missing but its log %s is there; put the state file back (its backup is %s), or remove the log to start over with an empty state", d.stateFile, d.LogFile(), d.BackupFile())
		}
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading state: %w", err)
	}
	s, form, err := d.decodeStateFileForm(d.stateFile, data)
	var nf *state.NewerFormatError
	if err != nil && (errors.Is(err, seal.ErrNoKey) || errors.Is(err, seal.ErrWrongKey)) {
		return nil, fmt.Errorf("reading state: %w", err)
	}
	if err != nil && !errors.As(err, &nf) {
		return nil, fmt.Errorf("%w; %s", err, d.recoveryHint())
	}
	if err != nil {
		return s, err
	}
	n, err := d.replayLog(s, form)
	if err != nil {
		var gap *statefile.LogGapError
		if errors.As(err, &gap) {
			return nil, err
		}
		return nil, fmt.Errorf("reading state: %w", err)
	}
	if n > 0 {
		if err := statefile.CheckState(d.LogFile(), s); err != nil {
			return nil, fmt.Errorf("reading state: %w", err)
		}
	}
	sb := d.bindingOf(s.Lineage, form)
	d.bound.Store(&sb)
	return s, nil
}

// bindingOf is the binding of the journals of the state of lineage,
// its file in form.
func (d *Dir) bindingOf(lineage string, form statefile.Form) statefile.StateBinding {
	return statefile.StateBinding{Lineage: lineage, Strict: form == statefile.FormBound && d.keys.Encrypting()}
}

// stateBinding returns the state the journals belong to: as last read
// or written, or as the state file says now. With no state file, it has
// no lineage.
func (d *Dir) stateBinding() (statefile.StateBinding, error) {
	if sb := d.bound.Load(); sb != nil {
		return *sb, nil
	}
	if _, err := os.Stat(d.stateFile); errors.Is(err, fs.ErrNotExist) {
		return statefile.StateBinding{}, nil
	}
	if _, err := d.Read(context.Background()); err != nil {
		return statefile.StateBinding{}, err
	}
	if sb := d.bound.Load(); sb != nil {
		return *sb, nil
	}
	return statefile.StateBinding{}, nil
}

// journalBinding binds the journal name of this directory to its state.
func (d *Dir) journalBinding(name string) *statefile.Binding {
	return &statefile.Binding{Name: path.Clean(filepath.ToSlash(name)), State: d.stateBinding}
}

// recoveryHint tells how to recover from a damaged state file: from the
// backup when there is a readable one.
func (d *Dir) recoveryHint() string {
	backup := d.BackupFile()
	data, err := os.ReadFile(backup)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("there is no backup (%s does not exist): fix the file, or remove it to start over with an empty state (agentctl then no longer tracks the sandboxes and runs it recorded)", backup)
	case err != nil:
		return fmt.Sprintf("the backup %s cannot be read either (%v): fix the file, or remove it to start over with an empty state", backup, err)
	}
	b, err := d.decodeStateFile(backup, data)
	if err != nil {
		return fmt.Sprintf("the backup %s is damaged too (%v): fix the file, or remove it to start over with an empty state", backup, err)
	}
	return fmt.Sprintf("the state before the latest write is kept in %s (serial %d): to go back to it, copy it over the state file (cp %s %s)",
		backup, b.Serial, shellQuote(backup), shellQuote(d.stateFile))
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-+:,@", r)) {
			safe = false
			break
		}
	}
	if safe && s != "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Write increments s.Serial and replaces the state file atomically,
// keeping the file it replaces as the backup (BackupFile), then removes
// the state log, whose changes s holds (the compaction). On error
// s.Serial is left unchanged, except when only the log's removal failed
// (the state file is written; the log's records are then skipped by
// Read, as the state file has their serials).
func (d *Dir) Write(ctx context.Context, s *state.State) error {
	if s == nil {
		return errors.New("writing state: nil state")
	}
	if s.Lineage == "" {
		return fmt.Errorf("writing state %s: the state has no lineage (create states with state.New or Dir.Read)", d.stateFile)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held != nil {
		if err := d.held.Check(ctx); err != nil {
			return fmt.Errorf("writing state: %w", err)
		}
	}
	if err := d.Ensure(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(d.stateFile), 0o755); err != nil {
		return fmt.Errorf("writing state: %w", err)
	}
	data, err := statefile.EncodeStateVersion(s, d.version)
	if err != nil {
		return fmt.Errorf("%s: %w", d.stateFile, err)
	}
	data, err = d.sealStateFile(data)
	if err == nil {
		err = d.replaceStateFile(s, data)
	}
	if err != nil {
		s.Serial--
		return fmt.Errorf("writing state: %w", err)
	}
	form := statefile.FormPlain
	if d.keys.Encrypting() {
		form = statefile.FormBound
	}
	sb := d.bindingOf(s.Lineage, form)
	d.bound.Store(&sb)
	lerr := d.closeLog()
	if err := statefile.RemoveDurable(d.LogFile()); err != nil {
		lerr = errors.Join(lerr, err)
	}
	if lerr != nil {
		return fmt.Errorf("writing state: the state file is written (serial %d), but its log was not removed: %w", s.Serial, lerr)
	}
	return nil
}

// wantForm is the form the directory writes.
func (d *Dir) wantForm() statefile.Form {
	return statefile.WantForm(d.keys)
}

// sealStateFile returns the state file's bytes as written: data, or
// its encrypted form when the directory encrypts.
func (d *Dir) sealStateFile(data []byte) ([]byte, error) {
	return statefile.SealStateFile(d.keys, data)
}

// openStateFile returns the plaintext of a state file's content (data
// itself when it is not encrypted) and the form it was in.
func (d *Dir) openStateFile(name string, data []byte) (plain []byte, form statefile.Form, err error) {
	return statefile.OpenStateFile(d.keys, name, data)
}

// decodeStateFile is decodeState for the content of a state file that
// may be encrypted.
func (d *Dir) decodeStateFile(name string, data []byte) (*state.State, error) {
	s, _, err := d.decodeStateFileForm(name, data)
	return s, err
}

// decodeStateFileForm is decodeStateFile, also returning the form the
// file was in.
func (d *Dir) decodeStateFileForm(name string, data []byte) (*state.State, statefile.Form, error) {
	return statefile.DecodeStateFile(d.keys, name, data)
}

// replaceStateFile replaces the state file with data (Write), keeping
// the previous file as the backup. When the previous file was written
// with another encryption setting (before the key was configured,
// before decrypt was set, or encrypted by an agentctl that did not bind
// records to their places), the backup is written re-encoded with this
// one rather than linked, and the journals s refers to are converted
// too, so that nothing is left behind unencrypted (or, with decrypt,
// encrypted; or unbound) once the state is.
//
// A state file encrypted with another key, or encrypted while no key is
// configured, is not replaced: the state it holds would be lost.
func (d *Dir) replaceStateFile(s *state.State, data []byte) error {
	old, err := os.ReadFile(d.stateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return statefile.ReplaceFile(d.stateFile, d.BackupFile(), data, 0o600)
	}
	if err != nil {
		return err
	}
	plain, form, err := d.openStateFile(d.stateFile, old)
	if errors.Is(err, seal.ErrNoKey) || errors.Is(err, seal.ErrWrongKey) {
		return err
	}
	if err != nil || form == d.wantForm() {
		// Unreadable (kept as it is, as the backup) or already as wanted.
		return statefile.ReplaceFile(d.stateFile, d.BackupFile(), data, 0o600)
	}
	if err := d.convertFiles(s); err != nil {
		return err
	}
	backup, err := d.sealStateFile(plain)
	if err != nil {
		return err
	}
	if err := statefile.WriteFileAtomic(d.BackupFile(), backup, 0o600); err != nil {
		return err
	}
	return statefile.ReplaceFile(d.stateFile, "", data, 0o600)
}

// convertFiles rewrites the journals and the snapshots s refers to that
// were written with another encryption setting than the directory's.
func (d *Dir) convertFiles(s *state.State) error {
	for _, sb := range s.Sandboxes {
		if sb.Snapshot == "" {
			continue
		}
		path := d.Abs(sb.Snapshot)
		if _, err := os.Stat(path); err != nil {
			continue // a lost snapshot is reported where it is needed
		}
		if err := archive.ConvertSnapshot(path, d.keys.Key(), d.keys.WriteKey()); err != nil {
			return err
		}
	}
	var names []string
	for _, r := range s.Runs {
		names = append(names, r.Journal)
	}
	for _, c := range s.Chats {
		names = append(names, c.Journal, c.Current)
	}
	for _, m := range s.Memories {
		names = append(names, m.Journal)
	}
	for _, name := range names {
		if name == "" {
			continue
		}
		path := d.Abs(name)
		if _, err := os.Stat(path); err != nil {
			continue // a lost journal is reported where it is needed
		}
		bind := d.journalBinding(name)
		bind.State = func() (statefile.StateBinding, error) { return statefile.StateBinding{Lineage: s.Lineage}, nil }
		j, err := statefile.OpenSealedJournal(path, d.keys, statefile.KindJournal, bind)
		if err != nil {
			return fmt.Errorf("converting journal %s: %w", path, err)
		}
		if err := j.Close(); err != nil {
			return err
		}
	}
	return nil
}

// PendingConversion implements EncodingReporter.
func (d *Dir) PendingConversion(context.Context) (string, error) {
	data, err := os.ReadFile(d.stateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if _, form, err := d.openStateFile(d.stateFile, data); err == nil {
		return statefile.Conversion(form, d.wantForm()), nil
	}
	return "", nil // unreadable: Read reports it
}
