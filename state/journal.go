package state

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"strings"
)

const (
	// MaxJournalRecord is the largest record a journal holds.
	MaxJournalRecord = 64 << 20
	journalsDir      = "journals"
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
