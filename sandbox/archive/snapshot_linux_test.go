package archive

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// TestSnapshotWriteback: a snapshot file written through the writer that
// starts its disk writes chunk by chunk holds exactly what was written,
// across several chunks and writes that straddle their boundaries.
func TestSnapshotWriteback(t *testing.T) {
	dir := t.TempDir()
	tmp, err := createSnapshotTemp(dir, "s.tar")
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.discard()
	want := make([]byte, 2*writebackChunk+writebackChunk/2+12345)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range want {
		want[i] = byte(r.Uint32())
	}
	w := tmp.writer()
	for rest := want; len(rest) > 0; {
		n := min(len(rest), 1+r.IntN(3<<20))
		if _, err := w.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if wb, ok := w.(*writeback); !ok || wb.queued != 2*writebackChunk {
		t.Fatalf("writer %T queued %+v; want the first two chunks' writes started", w, w)
	}
	dst := filepath.Join(dir, "s.tar")
	if err := tmp.commit(dst); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the snapshot file differs from what was written (%d bytes, want %d)", len(got), len(want))
	}
}

// TestSnapshotWritebackRanges: the disk writes of a snapshot's chunks
// start only up to the first range the worker has not filled yet (their
// data would come after the writes), and go on once it is filled; the
// file holds what was written and filled, in place.
func TestSnapshotWritebackRanges(t *testing.T) {
	dir := t.TempDir()
	tmp, err := createSnapshotTemp(dir, "s.tar")
	if err != nil {
		t.Fatal(err)
	}
	defer tmp.discard()
	wb := tmp.writeback()
	header := bytes.Repeat([]byte("h"), 100)
	content := bytes.Repeat([]byte("c"), 3*writebackChunk)
	wb.Write(header)
	start := wb.reserve(int64(len(content)))
	wb.Write(header)
	if start != 100 || wb.written() != 100 || wb.queued != 0 {
		t.Fatalf("range at %d; written %d, queued %d; want the range at 100, nothing queued past it", start, wb.written(), wb.queued)
	}
	if _, err := tmp.f.WriteAt(content, start); err != nil {
		t.Fatal(err)
	}
	wb.filled(start + int64(len(content)))
	wb.Write(header)
	if wb.written() != wb.off || wb.queued != 3*writebackChunk {
		t.Fatalf("written %d of %d, queued %d; want all written, three chunks queued", wb.written(), wb.off, wb.queued)
	}
	dst := filepath.Join(dir, "s.tar")
	if err := tmp.commit(dst); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(dst)
	want := append(append(append(append([]byte{}, header...), content...), header...), header...)
	if !bytes.Equal(got, want) {
		t.Fatalf("the snapshot holds %d bytes, not the %d written and filled", len(got), len(want))
	}
}
