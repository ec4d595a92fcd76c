package hashpipe

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// TestWriter: the hash of writes of every size (a byte, a tar block,
// more than the buffers hold at once) is the hash of their concatenation;
// closing without Sum ends the goroutine.
func TestWriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, data := range testStreams(rng) {
		total := len(data)
		a := New(sha256.New())
		for p := data; len(p) > 0; {
			n := min(len(p), pieceSize(rng))
			if k, err := a.Write(p[:n]); k != n || err != nil {
				t.Fatalf("Write = %d, %v", k, err)
			}
			p = p[n:]
		}
		want := sha256.Sum256(data)
		if got := a.Sum(); !bytes.Equal(got, want[:]) {
			t.Errorf("%d bytes: hash %x, want %x", total, got, want)
		}
		a.Close()
	}
	a := New(sha256.New())
	a.Write(make([]byte, 3*chunk+1))
	a.Close()
	a.Close()
}

// TestWriteFile: files given to WriteFile are hashed in their place in
// the stream and closed, however many (batches of them, and bytes between
// them); a file shorter than its size, or a failing check, is Err's
// error; Close without Sum closes the files it did not hash.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, data []byte) *os.File {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), chunk/4+3) // more than one read
	a := New(sha256.New())
	a.Write([]byte("head"))
	f1 := file("one", big)
	a.WriteFile(f1, int64(len(big)), nil)
	a.Write([]byte("middle"))
	checked := false
	a.WriteFile(file("two", []byte("tail file, only part of it hashed")), 9, func() error { checked = true; return nil })
	a.Write([]byte("end"))
	got := a.Sum()
	want := sha256.Sum256(slices.Concat([]byte("head"), big, []byte("middle"), []byte("tail file"), []byte("end")))
	if !bytes.Equal(got, want[:]) || a.Err() != nil {
		t.Fatalf("hash %x, %v; want %x", got, a.Err(), want)
	}
	if !checked {
		t.Error("the check did not run")
	}
	if err := f1.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("a hashed file was not closed: Close = %v", err)
	}

	// Many files, with bytes between them: several batches.
	a = New(sha256.New())
	var stream []byte
	for i := range 3*batchFiles + 5 {
		sep := []byte(fmt.Sprintf("<%d>", i))
		a.Write(sep)
		body := bytes.Repeat([]byte{byte(i)}, i*37)
		a.WriteFile(file(fmt.Sprintf("f%d", i), body), int64(len(body)), nil)
		stream = append(append(stream, sep...), body...)
	}
	want = sha256.Sum256(stream)
	if got := a.Sum(); !bytes.Equal(got, want[:]) || a.Err() != nil {
		t.Fatalf("many files: hash %x, %v; want %x", got, a.Err(), want)
	}

	a = New(sha256.New())
	unread := file("unread", []byte("abc"))
	a.WriteFile(unread, 3, nil)
	a.Close()
	if err := unread.Close(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Close did not close a file it was given: %v", err)
	}

	a = New(sha256.New())
	a.WriteFile(file("short", []byte("abc")), 10, nil)
	a.Sum()
	if err := a.Err(); !errors.Is(err, ErrChanged) {
		t.Errorf("a file shorter than its size: Err = %v, want ErrChanged", err)
	}
	a = New(sha256.New())
	boom := errors.New("modified meanwhile")
	a.WriteFile(file("checked", []byte("abc")), 3, func() error { return boom })
	a.Write([]byte("x"))
	a.Sum()
	if err := a.Err(); !errors.Is(err, boom) {
		t.Errorf("a failing check: Err = %v, want %v", err, boom)
	}
}

// TestTee: what a Tee is given reaches its writer whole and in order, in
// buffers of at most chunk bytes (flushed when full and on Flush), and the
// sum is the hash of those bytes; a write error stops it.
func TestTee(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, data := range testStreams(rng) {
		total := len(data)
		a := New(sha256.New())
		var got bytes.Buffer
		w := &recordWriter{w: &got}
		tee := a.Tee(w)
		for p := data; len(p) > 0; {
			n := min(len(p), pieceSize(rng))
			if k, err := tee.Write(p[:n]); k != n || err != nil {
				t.Fatalf("Write = %d, %v", k, err)
			}
			p = p[n:]
			if rng.IntN(8) == 0 {
				if err := tee.Flush(); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := tee.Flush(); err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256(data)
		if sum := a.Sum(); !bytes.Equal(sum, want[:]) || !bytes.Equal(got.Bytes(), data) {
			t.Fatalf("%d bytes: the writer got %d bytes, equal %v; sum equal %v", total, got.Len(), bytes.Equal(got.Bytes(), data), bytes.Equal(sum, want[:]))
		}
		if w.largest > chunk {
			t.Errorf("a write of %d bytes, more than a buffer", w.largest)
		}
	}

	a := New(sha256.New())
	defer a.Close()
	tee := a.Tee(failWriter{})
	if _, err := tee.Write(make([]byte, chunk+1)); err == nil {
		t.Fatal("Write through a failing writer succeeded")
	}
	if _, err := tee.Write([]byte("x")); err == nil || tee.Flush() == nil {
		t.Fatal("the Tee went on after its writer failed")
	}
}

type recordWriter struct {
	w       io.Writer
	largest int
}

func (r *recordWriter) Write(p []byte) (int, error) {
	r.largest = max(r.largest, len(p))
	return r.w.Write(p)
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestTeeReader: a TeeReader serves the bytes of its reader in order,
// whatever sizes the reader returns and the caller asks for, and once it
// is read to the end the sum is their hash; a read error comes after the
// bytes read before it.
func TestTeeReader(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, data := range testStreams(rng) {
		total := len(data)
		for name, r := range map[string]io.Reader{
			"whole":    bytes.NewReader(data),
			"halves":   iotest.HalfReader(bytes.NewReader(data)),
			"one byte": iotest.OneByteReader(bytes.NewReader(data)),
		} {
			if name == "one byte" && total > chunk {
				continue
			}
			a := New(sha256.New())
			tr := a.TeeReader(r)
			var got []byte
			buf := make([]byte, 3*chunk)
			for {
				n, err := tr.Read(buf[:pieceSize(rng)])
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			want := sha256.Sum256(data)
			if sum := a.Sum(); !bytes.Equal(got, data) || !bytes.Equal(sum, want[:]) {
				t.Fatalf("%s, %d bytes: served %d bytes, equal %v; sum equal %v", name, total, len(got), bytes.Equal(got, data), bytes.Equal(sum, want[:]))
			}
		}
	}

	a := New(sha256.New())
	defer a.Close()
	boom := errors.New("read error")
	tr := a.TeeReader(io.MultiReader(strings.NewReader("head"), iotest.ErrReader(boom)))
	got, err := io.ReadAll(tr)
	if string(got) != "head" || !errors.Is(err, boom) {
		t.Fatalf("ReadAll = %q, %v; want the bytes before the error, then the error", got, err)
	}
}

// testStreams are streams of random bytes of the sizes that matter to a
// pipe: empty, a byte, less than a tar block, a buffer, more than all
// buffers at once.
func testStreams(rng *rand.Rand) [][]byte {
	var out [][]byte
	for _, total := range []int{0, 1, 511, chunk, chunk*buffers*2 + 7} {
		data := make([]byte, total)
		for i := range data {
			data[i] = byte(rng.IntN(256))
		}
		out = append(out, data)
	}
	return out
}

// pieceSize is the size of one write or read: a byte, a tar block, a
// page, more than a buffer, more than several.
func pieceSize(rng *rand.Rand) int {
	return []int{1, 512, 4096, chunk + 3, 3 * chunk}[rng.IntN(5)]
}

// TestTeeReaderWriteN: WriteN writes the stream's next bytes from the
// pipe's buffers, mixed with Reads in any sizes, and the sum is the
// stream's; past the end it says how many it wrote, with
// io.ErrUnexpectedEOF.
func TestTeeReaderWriteN(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, data := range testStreams(rng) {
		a := New(sha256.New())
		tr := a.TeeReader(iotest.HalfReader(bytes.NewReader(data)))
		var got bytes.Buffer
		buf := make([]byte, 3*chunk)
		for got.Len() < len(data) {
			n := min(pieceSize(rng), len(data)-got.Len())
			if rng.IntN(2) == 0 {
				if k, err := tr.WriteN(&got, int64(n)); k != int64(n) || err != nil {
					t.Fatalf("WriteN(%d) = %d, %v", n, k, err)
				}
				continue
			}
			k, err := tr.Read(buf[:n])
			if err != nil {
				t.Fatal(err)
			}
			got.Write(buf[:k])
		}
		if k, err := tr.WriteN(&got, 10); k != 0 || err != io.ErrUnexpectedEOF {
			t.Fatalf("WriteN past the end = %d, %v", k, err)
		}
		want := sha256.Sum256(data)
		if sum := a.Sum(); !bytes.Equal(got.Bytes(), data) || !bytes.Equal(sum, want[:]) {
			t.Fatalf("%d bytes: wrote %d, equal %v; sum equal %v", len(data), got.Len(), bytes.Equal(got.Bytes(), data), bytes.Equal(sum, want[:]))
		}
	}
}

// TestTeeReaderAfterWrites: a TeeReader made once bytes were written to
// the pipe (a reader that switches to it mid-stream) serves only its
// reader's bytes, and the sum is of the bytes written, then those read.
func TestTeeReaderAfterWrites(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, data := range testStreams(rng) {
		a := New(sha256.New())
		a.Write([]byte("written first"))
		got, err := io.ReadAll(a.TeeReader(bytes.NewReader(data)))
		if err != nil {
			t.Fatal(err)
		}
		want := sha256.Sum256(append([]byte("written first"), data...))
		if sum := a.Sum(); !bytes.Equal(got, data) || !bytes.Equal(sum, want[:]) {
			t.Fatalf("%d bytes: served %d, equal %v; sum equal %v", len(data), len(got), bytes.Equal(got, data), bytes.Equal(sum, want[:]))
		}
	}
}
