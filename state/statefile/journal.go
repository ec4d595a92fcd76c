package statefile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/state"
)

// Journal file format (see docs/state.md):
//
//	AGENTCTL-JOURNAL 1\n                 header: magic and format version
//	<crc> <json>\n                       one line per record
//
// where <crc> is the CRC-32C (Castagnoli) of the JSON bytes as 8 lowercase
// hex digits and <json> is the compact JSON encoding of the record (which
// never contains a newline). `cut -d' ' -f2-` turns a journal into plain
// JSON Lines.
//
// A record is appended with one write(2) and made durable with fsync
// before Append returns. A crash in the middle of an append can only
// damage the last line: it is then incomplete (no newline) or fails its
// checksum. Readers ignore such a torn tail, and OpenJournal truncates it
// before appending. A damaged line followed by a complete line cannot
// come from a crash and is reported as corruption.

// JournalFormatVersion is the version of the journal format written.
// Version 3 is the encrypted journal: its header is followed by the key
// check, and each record's JSON is sealed (seal.Key.Seal) for its place
// (the lineage of the state the journal belongs to, the journal's name
// and the record's number) and written in base64, the CRC covering the
// base64 text (docs/state.md, "Encryption"). Version 2, written before
// records were bound to their place, is read, and rewritten as version
// 3 when opened for appending.
const JournalFormatVersion = 3

const (
	// plainJournalVersion is the version of an unencrypted journal.
	plainJournalVersion = 1
	// legacyJournalVersion is the encrypted journal whose records are
	// not bound to their place.
	legacyJournalVersion = 2
)

// StateLogName is the state log's name in its records' places.
const StateLogName = "state log"

// Binding is where a journal's sealed records belong: the
// journal's name in its store and the state it belongs to, asked for
// when first needed (the state of a new store is written after its
// first journal is opened, before its first record is appended).
type Binding struct {
	Name  string
	State func() (StateBinding, error)
}

// StateBinding is what a store knows of the state its journals belong
// to.
type StateBinding struct {
	// Lineage is the state's lineage ("" when no state is written).
	Lineage string
	// Strict is set when the state is encrypted with its place bound,
	// and encrypted so: every journal it refers to was rewritten with
	// bound records when it was, so a journal in another form (plaintext,
	// or encrypted without places) was put there, and is refused.
	Strict bool
}

// FixedBinding binds a journal named name to the state sb.
func FixedBinding(name string, sb StateBinding) *Binding {
	return &Binding{Name: name, State: func() (StateBinding, error) { return sb, nil }}
}

// lineage returns the lineage the records of the journal path are bound
// to; b is nil for a journal that is not a store's.
func (b *Binding) lineage(path string) (string, error) {
	if b == nil {
		return "", fmt.Errorf("journal %s: its records are bound to a state, and none was given", path)
	}
	sb, err := b.State()
	if err != nil {
		return "", fmt.Errorf("journal %s: %w", path, err)
	}
	if sb.Lineage == "" {
		return "", fmt.Errorf("journal %s: its records are bound to the state it belongs to, and no state is written yet", path)
	}
	return sb.Lineage, nil
}

// journalFormatFor is the format of a journal written with keys.
func journalFormatFor(keys *seal.Keys) int {
	if keys.Encrypting() {
		return JournalFormatVersion
	}
	return plainJournalVersion
}

// Kinds of sealed journal records (the additional data of their
// envelopes): a journal's record cannot pass for a state change.
const (
	KindJournal  = "journal"
	KindStateLog = "state-log"
	KindState    = "state"
)

const journalMagic = "AGENTCTL-JOURNAL"

var (
	journalHeader = journalMagic + " " + strconv.Itoa(plainJournalVersion) + "\n"
	// castagnoli is built on first use: computing the table costs about
	// 0.3 ms, which every command would pay at start-up.
	castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })
)

// Journal is an append-only file of checkpointed steps of one run.
type Journal struct {
	path string
	// keys seal the records when the journal is encrypted (sealed);
	// kind is their envelopes' kind, bind their place.
	keys   *seal.Keys
	kind   string
	bind   *Binding
	sealed bool

	mu     sync.Mutex
	f      *os.File
	size   int64 // bytes of valid content
	n      int   // records
	broken error // set when a failed append could not be undone

	// Group commit: appends that arrive while one is being written and
	// fsynced wait in queue; the next writer takes them all and makes
	// them durable with one write and one fsync.
	queue    []*pendingRecord
	flushing bool
	idle     *sync.Cond // signalled when flushing ends
	// sync makes the file durable (f.Sync; tests slow it down).
	sync func(*os.File) error
}

// pendingRecord is one record's JSON waiting for its group commit,
// which seals it once its position is known.
type pendingRecord struct {
	data []byte
	done chan error
}

// torn last record left by a crash is truncated away; a corrupt record
// before the end is an error.
func OpenJournal(path string) (*Journal, error) {
	return OpenSealedJournal(path, nil, KindJournal, nil)
}

// journalHeaderFor is the header of a journal written with keys.
func journalHeaderFor(keys *seal.Keys) string {
	if !keys.Encrypting() {
		return journalHeader
	}
	return journalMagic + " " + strconv.Itoa(JournalFormatVersion) + " " + keys.Key().Check() + "\n"
}

// OpenSealedJournal is OpenJournal for a journal whose records are sealed
// with keys (nil: unencrypted) as kind, for their places in bind. A
// journal written with another setting (unencrypted before the key was
// configured, encrypted when decrypt is set, or encrypted without
// places by an earlier agentctl) is first rewritten with this one.
func OpenSealedJournal(path string, keys *seal.Keys, kind string, bind *Binding) (*Journal, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("opening journal: %w", err)
	}
	_, statErr := os.Stat(path)
	created := os.IsNotExist(statErr)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening journal: %w", err)
	}
	fail := func(err error) (*Journal, error) {
		f.Close()
		return nil, err
	}
	n, good, format, err := scanJournal(path, f, keys, kind, bind, nil)
	if err != nil {
		return fail(err)
	}
	if good > 0 && format != journalFormatFor(keys) {
		f.Close()
		if err := rewriteJournal(path, keys, kind, bind); err != nil {
			return nil, err
		}
		return OpenSealedJournal(path, keys, kind, bind)
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(fmt.Errorf("opening journal: %w", err))
	}
	if good == 0 {
		// New, empty or torn header: start afresh.
		header := journalHeaderFor(keys)
		if err := f.Truncate(0); err != nil {
			return fail(fmt.Errorf("opening journal %s: %w", path, err))
		}
		if _, err := f.WriteAt([]byte(header), 0); err != nil {
			return fail(fmt.Errorf("opening journal %s: %w", path, err))
		}
		good = int64(len(header))
	} else if good < fi.Size() {
		if err := f.Truncate(good); err != nil {
			return fail(fmt.Errorf("opening journal %s: removing a torn last record: %w", path, err))
		}
	}
	if good != fi.Size() {
		if err := f.Sync(); err != nil {
			return fail(fmt.Errorf("opening journal %s: fsync: %w", path, err))
		}
	}
	if created {
		if err := SyncDir(filepath.Dir(path)); err != nil {
			return fail(err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		return fail(fmt.Errorf("opening journal %s: %w", path, err))
	}
	j := &Journal{path: path, keys: keys, kind: kind, bind: bind, sealed: keys.Encrypting(), f: f, size: good, n: n, sync: (*os.File).Sync}
	j.idle = sync.NewCond(&j.mu)
	return j, nil
}

// Path returns the journal's path.
func (j *Journal) Path() string { return j.path }

// Len returns the number of records in the journal.
func (j *Journal) Len() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.n
}

// Append marshals rec to JSON, appends it as one record and fsyncs; it
// returns once the record is durable. Its cost does not depend on the
// number of records already in the journal. Appends made at the same
// time share one write and one fsync (group commit): the first writes
// and syncs, the others queue behind it and are written together next.
func (j *Journal) Append(rec any) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("journal %s: encoding record: %w", j.path, err)
	}
	if len(data) > state.MaxJournalRecord {
		return fmt.Errorf("journal %s: record of %d bytes exceeds the limit of %d bytes", j.path, len(data), state.MaxJournalRecord)
	}
	p := &pendingRecord{data: data, done: make(chan error, 1)}
	j.mu.Lock()
	if j.f == nil {
		j.mu.Unlock()
		return fmt.Errorf("journal %s is closed", j.path)
	}
	if j.broken != nil {
		j.mu.Unlock()
		return j.broken
	}
	j.queue = append(j.queue, p)
	if !j.flushing {
		j.flushing = true
		for len(j.queue) > 0 {
			batch := j.queue
			j.queue = nil
			j.commit(batch)
		}
		j.flushing = false
		j.idle.Broadcast()
	}
	j.mu.Unlock()
	return <-p.done
}

// commit writes batch as one write and makes it durable with one fsync,
// then answers every record of it. It is called with j.mu held and
// releases it while writing and syncing; j.flushing keeps Close and
// other writers out meanwhile.
func (j *Journal) commit(batch []*pendingRecord) {
	answer := func(err error) {
		for _, p := range batch {
			p.done <- err
		}
	}
	if j.broken != nil {
		answer(j.broken)
		return
	}
	// j.n and j.size change only here, and j.flushing keeps other
	// writers out: the records' positions are known.
	f, size, n := j.f, j.size, j.n
	j.mu.Unlock()
	buf, eerr := j.encode(batch, n)
	var werr, serr error
	if eerr == nil {
		_, werr = f.Write(buf)
		if werr == nil {
			serr = j.sync(f)
		}
	}
	j.mu.Lock()
	switch {
	case eerr != nil:
		answer(eerr)
	case werr != nil:
		// Undo a partial write so the next record starts on a clean line.
		if terr := f.Truncate(size); terr != nil {
			j.broken = fmt.Errorf("journal %s: a failed append could not be undone: %w", j.path, terr)
		} else if _, err := f.Seek(size, io.SeekStart); err != nil {
			j.broken = fmt.Errorf("journal %s: %w", j.path, err)
		}
		answer(fmt.Errorf("journal %s: appending: %w", j.path, werr))
	case serr != nil:
		// After a failed fsync the kernel may have dropped the data; do
		// not pretend later records are durable.
		j.broken = fmt.Errorf("journal %s: fsync failed earlier: %w", j.path, serr)
		answer(fmt.Errorf("journal %s: fsync: %w", j.path, serr))
	default:
		j.size += int64(len(buf))
		j.n += len(batch)
		answer(nil)
	}
}

// encode returns the lines of batch, whose first record is record n+1:
// each record sealed for its place when the journal is encrypted.
func (j *Journal) encode(batch []*pendingRecord, n int) ([]byte, error) {
	var at seal.Place
	if j.sealed {
		lineage, err := j.bind.lineage(j.path)
		if err != nil {
			return nil, err
		}
		at = seal.Place{Lineage: lineage, Name: j.bind.Name}
	}
	var buf []byte
	for i, p := range batch {
		data := p.data
		if j.sealed {
			at.Position = uint64(n + i + 1)
			env, err := j.keys.Seal(j.kind, at, data)
			if err != nil {
				return nil, fmt.Errorf("journal %s: %w", j.path, err)
			}
			data = seal.EncodeText(env)
		}
		buf = encodeRecord(buf, data)
	}
	return buf, nil
}

// Close closes the journal file.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for j.flushing {
		j.idle.Wait()
	}
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	if err != nil {
		return fmt.Errorf("closing journal %s: %w", j.path, err)
	}
	return nil
}

// Remove closes and deletes the journal (once its run's record is gone
// from the state).
func (j *Journal) Remove() error {
	if err := j.Close(); err != nil {
		return err
	}
	return RemoveJournal(j.path)
}

// RemoveJournal deletes a journal file; a missing file is not an error.
func RemoveJournal(path string) error {
	return RemoveDurable(path)
}

func encodeRecord(dst, data []byte) []byte {
	dst = fmt.Appendf(dst, "%08x ", crc32.Checksum(data, castagnoli()))
	dst = append(dst, data...)
	return append(dst, '\n')
}

// ReadJournal calls fn with each record of the journal at path, in order,
// and returns the number of records. A torn last record (from a crash
// during an append) is ignored; a corrupt record before the end is a
// *JournalError. An error from fn stops the read and is returned wrapped.
// The raw message passed to fn may be retained.
func ReadJournal(path string, fn func(raw json.RawMessage) error) (int, error) {
	return ReadSealedJournal(path, nil, KindJournal, nil, fn)
}

// ReadSealedJournal is ReadJournal for a journal that may be encrypted with
// keys, its records for their places in bind.
func ReadSealedJournal(path string, keys *seal.Keys, kind string, bind *Binding, fn func(raw json.RawMessage) error) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("reading journal: %w", err)
	}
	defer f.Close()
	n, _, _, err := scanJournal(path, f, keys, kind, bind, fn)
	return n, err
}

// rewriteJournal rewrites the journal at path with keys: its records
// sealed for their places in bind when keys encrypt, in plaintext
// otherwise. The new file replaces the old one atomically (a temporary
// file, fsynced and renamed); a torn last record is dropped.
func rewriteJournal(path string, keys *seal.Keys, kind string, bind *Binding) (err error) {
	src, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("converting journal %s: %w", path, err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("converting journal %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 64<<10)
	if _, err := w.WriteString(journalHeaderFor(keys)); err != nil {
		return fmt.Errorf("converting journal %s: %w", path, err)
	}
	var line []byte
	var at seal.Place
	if keys.Encrypting() {
		lineage, err := bind.lineage(path)
		if err != nil {
			return fmt.Errorf("converting journal: %w", err)
		}
		at = seal.Place{Lineage: lineage, Name: bind.Name}
	}
	if _, _, _, err := scanJournal(path, src, keys, kind, bind, func(raw json.RawMessage) error {
		data := []byte(raw)
		if keys.Encrypting() {
			at.Position++
			env, err := keys.Seal(kind, at, data)
			if err != nil {
				return err
			}
			data = seal.EncodeText(env)
		}
		line = encodeRecord(line[:0], data)
		_, err := w.Write(line)
		return err
	}); err != nil {
		return fmt.Errorf("converting journal: %w", err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("converting journal %s: %w", path, err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("converting journal %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("converting journal %s: fsync: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("converting journal %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("converting journal %s: %w", path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// scanJournal reads a journal, calling fn (if not nil) for each valid
// record, decrypted with keys when the journal is encrypted, for its
// place in bind. It returns the number of records, the length of the
// valid prefix (0 when even the header is missing or torn) and the
// journal's format version.
func scanJournal(name string, r io.Reader, keys *seal.Keys, kind string, bind *Binding, fn func(json.RawMessage) error) (n int, good int64, format int, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	line, complete, tooLong, err := readLine(br, 64)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("reading journal %s: %w", name, err)
	}
	if !complete {
		if !tooLong && (strings.HasPrefix(journalHeader, string(line)) || strings.HasPrefix(string(line), journalMagic+" ")) {
			return 0, 0, 0, nil // empty, or a header torn by a crash at creation
		}
		return 0, 0, 0, &state.JournalError{Path: name, Reason: "not an agentctl journal"}
	}
	format, opener, err := journalHeaderOpener(name, line, keys, kind, bind)
	if err != nil {
		return 0, 0, format, err
	}
	good = int64(len(line)) + 1
	offset := good
	maxLine := state.MaxJournalRecord + 10
	if opener != nil {
		// base64 of the envelope: 4/3 of the record and its overhead.
		maxLine = (state.MaxJournalRecord+64)/3*4 + 20
	}
	var bad *state.JournalError
	for {
		line, complete, tooLong, err := readLine(br, maxLine)
		if err != nil {
			return n, good, format, fmt.Errorf("reading journal %s: %w", name, err)
		}
		if !complete {
			// EOF: an incomplete line is a torn tail.
			return n, good, format, nil
		}
		if bad != nil {
			return n, good, format, bad
		}
		var reason string
		var rec []byte
		if tooLong {
			reason = "record too long"
		} else {
			rec, reason = parseRecord(line)
		}
		if reason == "" && opener != nil {
			// The CRC holds, so this is no write torn by a crash: a
			// record that does not authenticate is refused even last.
			if rec, err = opener(rec, n+1); err != nil {
				return n, good, format, fmt.Errorf("journal %s: record %d (byte offset %d): %w", name, n+1, offset, err)
			}
		}
		if reason == "" && !json.Valid(rec) {
			reason = "invalid JSON"
		}
		if reason != "" {
			bad = &state.JournalError{Path: name, Offset: offset, Record: n + 1, Reason: reason}
		} else {
			if fn != nil {
				if err := fn(json.RawMessage(rec)); err != nil {
					return n, good, format, fmt.Errorf("journal %s: record %d: %w", name, n+1, err)
				}
			}
			n++
			good = offset + int64(len(line)) + 1
		}
		offset += int64(len(line)) + 1
	}
}

// journalHeaderOpener checks the header line of the journal name and
// returns its format version and, when it is encrypted, the function
// that decrypts its records (nil otherwise). A journal encrypted with
// another key, or while none is configured, is refused; so is, when its
// state is strict (StateBinding), a journal in another form than bound
// records.
func journalHeaderOpener(name string, line []byte, keys *seal.Keys, kind string, bind *Binding) (int, func(data []byte, pos int) ([]byte, error), error) {
	if !bytes.HasPrefix(line, []byte(journalMagic+" ")) {
		return 0, nil, fmt.Errorf("%s is not an agentctl journal (it does not start with %q)", name, journalMagic)
	}
	fields := strings.Fields(string(line[len(journalMagic)+1:]))
	v, perr := 0, error(nil)
	if len(fields) > 0 {
		v, perr = strconv.Atoi(fields[0])
	}
	if len(fields) == 0 || perr != nil || v < 1 {
		return 0, nil, &state.JournalError{Path: name, Reason: "bad header " + strconv.Quote(string(line))}
	}
	if v > JournalFormatVersion {
		return v, nil, &state.NewerFormatError{File: name, What: "journal", Format: v}
	}
	if v != JournalFormatVersion && keys.Encrypting() && bind != nil {
		sb, err := bind.State()
		if err != nil {
			return v, nil, fmt.Errorf("journal %s: %w", name, err)
		}
		if sb.Strict {
			return v, nil, unboundJournalError(name, kind, v)
		}
	}
	if v == plainJournalVersion {
		return v, nil, nil
	}
	if len(fields) != 2 {
		return v, nil, &state.JournalError{Path: name, Reason: "bad header " + strconv.Quote(string(line))}
	}
	key := keys.Key()
	if key == nil {
		return v, nil, seal.NoKeyError("journal "+name, fields[1])
	}
	if fields[1] != key.Check() {
		return v, nil, seal.WrongKeyError("journal "+name, fields[1], key.Check())
	}
	if v == legacyJournalVersion {
		return v, func(data []byte, _ int) ([]byte, error) {
			env, err := seal.DecodeText(data)
			if err == nil {
				data, err = key.Open("the encrypted record", kind, seal.Place{}, env)
			}
			if err != nil || seal.Bound(env) {
				return nil, fmt.Errorf("%w; %s", seal.ErrDamaged, restoreHint(kind))
			}
			return data, nil
		}, nil
	}
	lineage, err := bind.lineage(name)
	if err != nil {
		return v, nil, err
	}
	return v, func(data []byte, pos int) ([]byte, error) {
		env, err := seal.DecodeText(data)
		if err == nil && !seal.Bound(env) {
			err = seal.ErrDamaged
		}
		if err == nil {
			data, err = key.Open("the encrypted record", kind, seal.Place{Lineage: lineage, Name: bind.Name, Position: uint64(pos)}, env)
		}
		if err != nil {
			return nil, fmt.Errorf("%w, or it was moved here from another position, journal or state (each encrypted record is bound to its state's lineage, its journal and its position in it); %s", seal.ErrDamaged, restoreHint(kind))
		}
		return data, nil
	}, nil
}

// restoreHint says what to do about a journal of kind that was altered.
func restoreHint(kind string) string {
	if kind == KindStateLog {
		return "put back the state log as it was, or remove it to use the state file as it is (the changes it records are then lost)"
	}
	return "put back the journal as it was, or start its run over (apply -replace)"
}

// unboundJournalError refuses the journal name of kind, in format v
// (plaintext, or encrypted without places), read for a state whose
// journals are all encrypted with their places.
func unboundJournalError(name, kind string, v int) error {
	form := "is not encrypted"
	if v == legacyJournalVersion {
		form = "is encrypted the way agentctl did before each record was bound to its place"
	}
	return fmt.Errorf("journal %s %s, but the state it belongs to is encrypted, and every journal it refers to was encrypted with its records bound to their places when it was: this file was put there since; %s", name, form, restoreHint(kind))
}

// readLine reads one line, without its newline. complete is false when
// EOF came first (line then holds what was read, possibly nothing). A
// line longer than max is consumed but not returned: tooLong is set.
func readLine(br *bufio.Reader, max int) (line []byte, complete, tooLong bool, err error) {
	var total int
	for {
		chunk, err := br.ReadSlice('\n')
		total += len(chunk)
		if !tooLong {
			if total > max+1 {
				tooLong = true
				line = nil
			} else {
				line = append(line, chunk...)
			}
		}
		switch {
		case err == nil:
			if !tooLong {
				line = line[:len(line)-1]
			}
			return line, true, tooLong, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return line, false, tooLong, nil
		default:
			return nil, false, false, err
		}
	}
}

// parseRecord checks one record line and returns its data (the JSON,
// or the base64 of its envelope), or the reason it is invalid.
func parseRecord(line []byte) ([]byte, string) {
	if len(line) < 10 || line[8] != ' ' {
		return nil, "malformed record"
	}
	sum, err := strconv.ParseUint(string(line[:8]), 16, 32)
	if err != nil {
		return nil, "malformed checksum"
	}
	data := line[9:]
	if crc32.Checksum(data, castagnoli()) != uint32(sum) {
		return nil, "checksum mismatch"
	}
	return data, ""
}
