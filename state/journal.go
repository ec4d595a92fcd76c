package state

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/agentctl/agentctl/internal/seal"
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
// Version 2 is the encrypted journal: its header is followed by the key
// check, and each record's JSON is sealed (seal.Key.Seal) and written in
// base64, the CRC covering the base64 text (docs/state.md, "Encryption").
const JournalFormatVersion = 2

// plainJournalVersion is the version of an unencrypted journal.
const plainJournalVersion = 1

// Kinds of sealed journal records (the additional data of their
// envelopes): a journal's record cannot pass for a state change.
const (
	kindJournal  = "journal"
	kindStateLog = "state-log"
	kindState    = "state"
)

const (
	journalMagic = "AGENTCTL-JOURNAL"
	// MaxJournalRecord is the largest record a journal holds.
	MaxJournalRecord = 64 << 20
	journalsDir      = "journals"
)

var (
	journalHeader = journalMagic + " " + strconv.Itoa(plainJournalVersion) + "\n"
	// castagnoli is built on first use: computing the table costs about
	// 0.3 ms, which every command would pay at start-up.
	castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })
)

// JournalName returns the path of a run's journal relative to the state
// directory (forward slashes, as stored in Run.Journal). The file name is
// the address with unsafe characters replaced, plus a hash of the exact
// address, so distinct addresses never share a journal, even on
// case-insensitive file systems. It is the name records made before
// journals were scoped to their state's lineage (ScopedJournalName) may
// lack in Run.Journal.
func JournalName(runAddress string) string {
	return path.Join(journalsDir, SafeName(runAddress)+".jsonl")
}

// JournalFile is the path of r's journal relative to the state
// directory: the one its record names, or JournalName(r.Address) for a
// record written before Run.Journal was kept.
func (r *Run) JournalFile() string {
	if r.Journal != "" {
		return r.Journal
	}
	return JournalName(r.Address)
}

// ScopedJournalName is the path, relative to the state directory, of a
// new journal for address (a run, a chat turn) in the state of lineage.
func ScopedJournalName(lineage, address string) string {
	return path.Join(journalsDir, ScopedName(lineage, address)+".jsonl")
}

// ScopedName is SafeName(address) followed by '.' and the first 12 hex
// digits of lineage: the name of a file in the state directory that
// belongs to one state. State files given with -state share their state
// directory (its journals and snapshots), and a file named by its address
// alone would be another state's too: its run would replace the journal,
// and its snapshot clean-up remove the snapshots, this state still
// points to. An empty lineage gives SafeName(address).
func ScopedName(lineage, address string) string {
	return SafeName(address) + lineageTag(lineage)
}

// ScopedTo reports whether the file name (a journal's, a snapshot's, an
// MCP server log's) was made by ScopedName for lineage: whether it is
// that state's. It is false for an empty lineage.
func ScopedTo(name, lineage string) bool {
	tag := lineageTag(lineage)
	return tag != "" && (strings.Contains(name, tag+".") || strings.Contains(name, tag+"@"))
}

// lineageTag is what ScopedName appends for lineage: '.' and its first
// 12 hex digits ("" for an empty lineage).
func lineageTag(lineage string) string {
	id := strings.ReplaceAll(lineage, "-", "")
	if id == "" {
		return ""
	}
	return "." + id[:min(12, len(id))]
}

// SafeName turns an address into a file name: the address with characters
// other than letters, digits, '.' and '-' replaced by '_' (at most 80 of
// them), a '-', and 12 hex digits of the SHA-256 of the exact address.
// Distinct addresses get distinct names, even on case-insensitive file
// systems. The engine may use it for snapshot files too.
func SafeName(address string) string {
	var b strings.Builder
	under := false
	for _, r := range address {
		if r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-') {
			b.WriteRune(r)
			under = false
		} else if !under {
			b.WriteByte('_')
			under = true
		}
		if b.Len() >= 80 {
			break
		}
	}
	name := strings.Trim(b.String(), "_.")
	if name == "" {
		name = "run"
	}
	sum := sha256.Sum256([]byte(address))
	return name + "-" + hex.EncodeToString(sum[:6])
}

// JournalPath returns the absolute path of a run's journal.
func (d *Dir) JournalPath(runAddress string) string {
	return d.Abs(JournalName(runAddress))
}

// Journal is an append-only file of checkpointed steps of one run.
type Journal struct {
	path string
	// keys seal the records when the journal is encrypted (sealed);
	// kind is their envelopes' kind.
	keys   *seal.Keys
	kind   string
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

// pendingRecord is one encoded record waiting for its group commit.
type pendingRecord struct {
	line []byte
	done chan error
}

// JournalError reports a journal that cannot be read.
type JournalError struct {
	Path   string
	Offset int64
	Record int // 1-based record number, 0 for the header
	Reason string
}

func (e *JournalError) Error() string {
	where := "header"
	if e.Record > 0 {
		where = fmt.Sprintf("record %d", e.Record)
	}
	return fmt.Sprintf("journal %s: %s at byte offset %d is corrupt (%s) and is followed by further records, so this is not an interrupted write; the run cannot be resumed from it: re-run it with -replace",
		e.Path, where, e.Offset, e.Reason)
}

// OpenJournal opens (creating it if needed) a journal for appending. A
// torn last record left by a crash is truncated away; a corrupt record
// before the end is an error.
func OpenJournal(path string) (*Journal, error) {
	return openJournal(path, nil, kindJournal)
}

// journalHeaderFor is the header of a journal written with keys.
func journalHeaderFor(keys *seal.Keys) string {
	if !keys.Encrypting() {
		return journalHeader
	}
	return journalMagic + " " + strconv.Itoa(JournalFormatVersion) + " " + keys.Key().Check() + "\n"
}

// openJournal is OpenJournal for a journal whose records are sealed
// with keys (nil: unencrypted) as kind. A journal written with another
// setting (unencrypted before the key was configured, or encrypted when
// decrypt is set) is first rewritten with this one.
func openJournal(path string, keys *seal.Keys, kind string) (*Journal, error) {
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
	n, good, sealed, err := scanJournal(path, f, keys, kind, nil)
	if err != nil {
		return fail(err)
	}
	if good > 0 && sealed != keys.Encrypting() {
		f.Close()
		if err := rewriteJournal(path, keys, kind); err != nil {
			return nil, err
		}
		return openJournal(path, keys, kind)
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
		sealed = keys.Encrypting()
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
		if err := syncDir(filepath.Dir(path)); err != nil {
			return fail(err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		return fail(fmt.Errorf("opening journal %s: %w", path, err))
	}
	j := &Journal{path: path, keys: keys, kind: kind, sealed: sealed, f: f, size: good, n: n, sync: (*os.File).Sync}
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
	if len(data) > MaxJournalRecord {
		return fmt.Errorf("journal %s: record of %d bytes exceeds the limit of %d bytes", j.path, len(data), MaxJournalRecord)
	}
	if j.sealed {
		env, err := j.keys.Seal(j.kind, data)
		if err != nil {
			return fmt.Errorf("journal %s: %w", j.path, err)
		}
		data = seal.EncodeText(env)
	}
	p := &pendingRecord{line: encodeRecord(make([]byte, 0, len(data)+10), data), done: make(chan error, 1)}
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
	var buf []byte
	for _, p := range batch {
		buf = append(buf, p.line...)
	}
	f, size := j.f, j.size
	j.mu.Unlock()
	_, werr := f.Write(buf)
	var serr error
	if werr == nil {
		serr = j.sync(f)
	}
	j.mu.Lock()
	switch {
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
	return removeDurable(path)
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
	return readJournal(path, nil, kindJournal, fn)
}

// readJournal is ReadJournal for a journal that may be encrypted with
// keys.
func readJournal(path string, keys *seal.Keys, kind string, fn func(raw json.RawMessage) error) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("reading journal: %w", err)
	}
	defer f.Close()
	n, _, _, err := scanJournal(path, f, keys, kind, fn)
	return n, err
}

// rewriteJournal rewrites the journal at path with keys: its records
// sealed when keys encrypt, in plaintext otherwise. The new file
// replaces the old one atomically (a temporary file, fsynced and
// renamed); a torn last record is dropped.
func rewriteJournal(path string, keys *seal.Keys, kind string) (err error) {
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
	if _, _, _, err := scanJournal(path, src, keys, kind, func(raw json.RawMessage) error {
		data := []byte(raw)
		if keys.Encrypting() {
			env, err := keys.Seal(kind, data)
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
	return syncDir(filepath.Dir(path))
}

// scanJournal reads a journal, calling fn (if not nil) for each valid
// record, decrypted with keys when the journal is encrypted (sealed).
// It returns the number of records and the length of the valid prefix
// (0 when even the header is missing or torn).
func scanJournal(name string, r io.Reader, keys *seal.Keys, kind string, fn func(json.RawMessage) error) (n int, good int64, sealed bool, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	line, complete, tooLong, err := readLine(br, 64)
	if err != nil {
		return 0, 0, false, fmt.Errorf("reading journal %s: %w", name, err)
	}
	if !complete {
		if !tooLong && (strings.HasPrefix(journalHeader, string(line)) || strings.HasPrefix(string(line), journalMagic+" 2")) {
			return 0, 0, false, nil // empty, or a header torn by a crash at creation
		}
		return 0, 0, false, &JournalError{Path: name, Reason: "not an agentctl journal"}
	}
	if tooLong || !bytes.HasPrefix(line, []byte(journalMagic+" ")) {
		return 0, 0, false, fmt.Errorf("%s is not an agentctl journal (it does not start with %q)", name, journalMagic)
	}
	fields := strings.Fields(string(line[len(journalMagic)+1:]))
	v, perr := 0, error(nil)
	if len(fields) > 0 {
		v, perr = strconv.Atoi(fields[0])
	}
	if len(fields) == 0 || perr != nil || v < 1 {
		return 0, 0, false, &JournalError{Path: name, Reason: "bad header " + strconv.Quote(string(line))}
	}
	if v > JournalFormatVersion {
		return 0, 0, false, &NewerFormatError{File: name, What: "journal", Format: v}
	}
	var key *seal.Key
	if v == JournalFormatVersion {
		if len(fields) != 2 {
			return 0, 0, false, &JournalError{Path: name, Reason: "bad header " + strconv.Quote(string(line))}
		}
		key = keys.Key()
		if key == nil {
			return 0, 0, false, seal.NoKeyError("journal "+name, fields[1])
		}
		if fields[1] != key.Check() {
			return 0, 0, false, seal.WrongKeyError("journal "+name, fields[1], key.Check())
		}
		sealed = true
	}
	good = int64(len(line)) + 1
	offset := good
	maxLine := MaxJournalRecord + 10
	if sealed {
		// base64 of the envelope: 4/3 of the record and its overhead.
		maxLine = (MaxJournalRecord+64)/3*4 + 20
	}
	var bad *JournalError
	for {
		line, complete, tooLong, err := readLine(br, maxLine)
		if err != nil {
			return n, good, sealed, fmt.Errorf("reading journal %s: %w", name, err)
		}
		if !complete {
			// EOF: an incomplete line is a torn tail.
			return n, good, sealed, nil
		}
		if bad != nil {
			return n, good, sealed, bad
		}
		var reason string
		var rec []byte
		if tooLong {
			reason = "record too long"
		} else {
			rec, reason = parseRecord(line, key, name, kind)
		}
		if reason != "" {
			bad = &JournalError{Path: name, Offset: offset, Record: n + 1, Reason: reason}
		} else {
			if fn != nil {
				if err := fn(json.RawMessage(rec)); err != nil {
					return n, good, sealed, fmt.Errorf("journal %s: record %d: %w", name, n+1, err)
				}
			}
			n++
			good = offset + int64(len(line)) + 1
		}
		offset += int64(len(line)) + 1
	}
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

// parseRecord checks one record line and returns its JSON (decrypted
// with key when it is not nil), or the reason it is invalid.
func parseRecord(line []byte, key *seal.Key, name, kind string) ([]byte, string) {
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
	if key != nil {
		env, err := seal.DecodeText(data)
		if err == nil {
			data, err = key.Open(name, kind, env)
		}
		if err != nil {
			return nil, "the encrypted record does not authenticate"
		}
	}
	if !json.Valid(data) {
		return nil, "invalid JSON"
	}
	return data, ""
}
