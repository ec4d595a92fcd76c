package statefile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/state"
)

type step struct {
	N    int    `json:"n"`
	Kind string `json:"kind"`
	Text string `json:"text,omitempty"`
}

func readSteps(t *testing.T, path string) []step {
	t.Helper()
	var got []step
	n, err := ReadJournal(path, func(raw json.RawMessage) error {
		var s step
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		got = append(got, s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(got) {
		t.Fatalf("ReadJournal returned n=%d for %d records", n, len(got))
	}
	return got
}

func writeSteps(t *testing.T, path string, from, to int) {
	t.Helper()
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := from; i <= to; i++ {
		if err := j.Append(step{N: i, Kind: "model", Text: "line1\nline2 \"quoted\""}); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestJournalAppendReopenRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), state.JournalName(`run.review["pricing"]`))
	writeSteps(t, path, 1, 3)
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if j.Len() != 3 {
		t.Fatalf("Len after reopen = %d", j.Len())
	}
	j.Append(step{N: 4, Kind: "tool"})
	j.Close()
	got := readSteps(t, path)
	if len(got) != 4 || got[3].N != 4 || got[0].Text != "line1\nline2 \"quoted\"" {
		t.Fatalf("steps = %+v", got)
	}
	// The file is the documented format: header, then "<crc> <json>" lines.
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if lines[0] != "AGENTCTL-JOURNAL 1" || len(lines) != 5 || !strings.HasPrefix(lines[4][9:], `{"n":4,`) {
		t.Fatalf("journal file:\n%s", data)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v", fi.Mode().Perm())
	}
	if err := j.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatal("Remove left the journal")
	}
}

func TestJournalTornTailIgnoredAndTruncated(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "j.jsonl")
	writeSteps(t, path, 1, 5)
	full, _ := os.ReadFile(path)
	last := bytes.LastIndexByte(full[:len(full)-1], '\n') + 1

	// Every prefix of the last record (a crash mid-write), and the last
	// record with a damaged byte (a torn sector), reads as 4 steps.
	var variants [][]byte
	for cut := last; cut < len(full); cut++ {
		variants = append(variants, full[:cut])
	}
	damaged := bytes.Clone(full)
	damaged[len(damaged)-5] ^= 0x20
	variants = append(variants, damaged)
	zeros := append(bytes.Clone(full[:last+7]), make([]byte, 300)...)
	variants = append(variants, zeros)

	for i, v := range variants {
		os.WriteFile(path, v, 0o600)
		if got := readSteps(t, path); len(got) != 4 || got[3].N != 4 {
			t.Fatalf("variant %d: steps %+v", i, got)
		}
		// Reopening for append drops the torn record; the next record
		// follows the last good one.
		j, err := OpenJournal(path)
		if err != nil {
			t.Fatalf("variant %d: %v", i, err)
		}
		if j.Len() != 4 {
			t.Fatalf("variant %d: Len %d", i, j.Len())
		}
		j.Append(step{N: 5, Kind: "again"})
		j.Close()
		got := readSteps(t, path)
		if len(got) != 5 || got[4].Kind != "again" {
			t.Fatalf("variant %d: after re-append %+v", i, got)
		}
	}
}

func TestJournalTornHeader(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	for _, content := range []string{"", "AGENT", "AGENTCTL-JOURNAL 1"} {
		os.WriteFile(path, []byte(content), 0o600)
		if n, err := ReadJournal(path, nil); n != 0 || err != nil {
			t.Fatalf("%q: n=%d err=%v", content, n, err)
		}
		j, err := OpenJournal(path)
		if err != nil {
			t.Fatalf("%q: %v", content, err)
		}
		j.Append(step{N: 1})
		j.Close()
		if got := readSteps(t, path); len(got) != 1 {
			t.Fatalf("%q: %+v", content, got)
		}
	}
}

func TestJournalCorruptMiddleIsError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	writeSteps(t, path, 1, 5)
	data, _ := os.ReadFile(path)
	// Damage record 3.
	lines := bytes.SplitAfter(data, []byte("\n"))
	off := len(lines[0]) + len(lines[1]) + len(lines[2])
	data[off+15] ^= 0x01
	os.WriteFile(path, data, 0o600)
	var seen int
	n, err := ReadJournal(path, func(json.RawMessage) error { seen++; return nil })
	var je *state.JournalError
	if !errors.As(err, &je) || je.Record != 3 || je.Offset != int64(off) {
		t.Fatalf("n=%d err=%v", n, err)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Fatalf("message: %v", err)
	}
	if n != 2 || seen != 2 {
		t.Fatalf("records before the corruption: n=%d seen=%d", n, seen)
	}
	if _, err := OpenJournal(path); !errors.As(err, &je) {
		t.Fatalf("OpenJournal of a corrupt journal: %v", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(after, data) {
		t.Fatal("OpenJournal modified a corrupt journal")
	}
}

func TestJournalRefusesOtherFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	for content, want := range map[string]string{
		"{\"format_version\":1}\n": "not an agentctl journal",
		"AGENTCTL-JOURNAL 9\n":     "newer agentctl (format 9)",
		"AGENTCTL-JOURNAL x\n":     "bad header",
		strings.Repeat("x", 200):   "not an agentctl journal",
		"hello world, no newline.": "not an agentctl journal",
	} {
		os.WriteFile(path, []byte(content), 0o600)
		if _, err := ReadJournal(path, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%.20q: %v, want %q", content, err, want)
		}
		if _, err := OpenJournal(path); err == nil {
			t.Errorf("%.20q: OpenJournal succeeded", content)
		}
		if got, _ := os.ReadFile(path); string(got) != content {
			t.Errorf("%.20q: file modified", content)
		}
	}
	if _, err := ReadJournal(filepath.Join(t.TempDir(), "missing"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing journal: %v", err)
	}
}

func TestJournalCallbackErrorStops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	writeSteps(t, path, 1, 3)
	boom := errors.New("boom")
	n, err := ReadJournal(path, func(json.RawMessage) error { return boom })
	if !errors.Is(err, boom) || n != 0 {
		t.Fatalf("n=%d err=%v", n, err)
	}
}

func TestJournalAppendErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	j, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(func() {}); err == nil {
		t.Fatal("appending an unencodable value succeeded")
	}
	j.Close()
	if err := j.Append(step{}); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("append after close: %v", err)
	}
	if n, err := ReadJournal(path, nil); n != 0 || err != nil {
		t.Fatalf("n=%d err=%v", n, err)
	}
}

func FuzzReadJournal(f *testing.F) {
	var buf bytes.Buffer
	buf.WriteString(journalHeader)
	for i := range 3 {
		data, _ := json.Marshal(step{N: i, Kind: "model", Text: "hi"})
		buf.Write(encodeRecord(nil, data))
	}
	full := buf.Bytes()
	f.Add(full)
	f.Add(full[:len(full)-3])
	f.Add([]byte(journalHeader))
	f.Add([]byte("AGENTCTL-JOURNAL 2\n"))
	f.Add([]byte("AGENTCTL-JOURNAL 1\n00000000 {}\n"))
	f.Add([]byte("AGENTCTL-JOURNAL 1\nzzzzzzzz {}\n" + "0000 x"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var recs []json.RawMessage
		n, good, _, err := scanJournal("j", bytes.NewReader(data), nil, KindJournal, nil, func(raw json.RawMessage) error {
			if !json.Valid(raw) {
				return fmt.Errorf("invalid record passed on: %q", raw)
			}
			recs = append(recs, raw)
			return nil
		})
		if n != len(recs) {
			t.Fatalf("n=%d, %d records passed on", n, len(recs))
		}
		if good < 0 || good > int64(len(data)) {
			t.Fatalf("valid prefix %d outside 0..%d", good, len(data))
		}
		if err != nil {
			if strings.Contains(err.Error(), "invalid record passed on") {
				t.Fatal(err)
			}
			return
		}
		// The valid prefix reads as the same records ...
		prefix := data[:good]
		n2, good2, _, err := scanJournal("j", bytes.NewReader(prefix), nil, KindJournal, nil, nil)
		if err != nil || n2 != n || good2 != good {
			t.Fatalf("prefix: n=%d/%d good=%d/%d err=%v", n2, n, good2, good, err)
		}
		// ... and appending to it (as OpenJournal does after truncating)
		// adds exactly one record.
		next := bytes.Clone(prefix)
		if good == 0 {
			next = []byte(journalHeader)
		}
		next = encodeRecord(next, []byte(`{"appended":true}`))
		var lastRec json.RawMessage
		n3, _, _, err := scanJournal("j", bytes.NewReader(next), nil, KindJournal, nil, func(raw json.RawMessage) error { lastRec = raw; return nil })
		if err != nil || n3 != n+1 || string(lastRec) != `{"appended":true}` {
			t.Fatalf("after append: n=%d (want %d) last=%s err=%v", n3, n+1, lastRec, err)
		}
	})
}

func TestEncryptedJournalTornTail(t *testing.T) {
	dir := t.TempDir()
	keys := testKeys(t, false)
	path := filepath.Join(dir, "j.jsonl")
	j, err := OpenSealedJournal(path, keys, KindJournal, testBinding)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := j.Append(map[string]any{"step": i, "text": canary}); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	data := readFile(t, path)
	if !strings.HasPrefix(string(data), "AGENTCTL-JOURNAL 3 "+keys.Key().Check()+"\n") || bytes.Contains(data, []byte(canary)) {
		t.Fatalf("journal:\n%s", data)
	}
	// A crash tore the last record.
	if err := os.WriteFile(path, data[:len(data)-7], 0o600); err != nil {
		t.Fatal(err)
	}
	n, err := ReadSealedJournal(path, keys, KindJournal, testBinding, func(json.RawMessage) error { return nil })
	if err != nil || n != 2 {
		t.Fatalf("read %d records, %v", n, err)
	}
	j, err = OpenSealedJournal(path, keys, KindJournal, testBinding)
	if err != nil || j.Len() != 2 {
		t.Fatalf("reopen: %v", err)
	}
	if err := j.Append(map[string]any{"step": 9}); err != nil {
		t.Fatal(err)
	}
	j.Close()
	if n, err := ReadSealedJournal(path, keys, KindJournal, testBinding, func(json.RawMessage) error { return nil }); err != nil || n != 3 {
		t.Fatalf("after append: %d records, %v", n, err)
	}
	// A damaged record followed by others is corruption, not a tear.
	data = readFile(t, path)
	lines := bytes.SplitAfter(data, []byte("\n"))
	bad := bytes.Clone(lines[1])
	bad[20] ^= 1
	os.WriteFile(path, bytes.Join([][]byte{lines[0], bad, lines[2], lines[3]}, nil), 0o600)
	var je *state.JournalError
	if _, err := ReadSealedJournal(path, keys, KindJournal, testBinding, func(json.RawMessage) error { return nil }); !errors.As(err, &je) {
		t.Errorf("corrupt record: %v", err)
	}
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
