// Package hashpipe hashes what is written to it on a goroutine of its
// own, so hashing a large stream (SHA-256 of a snapshot or of a tree's
// content) overlaps the work that produces the stream instead of adding
// to it.
package hashpipe

import (
	"errors"
	"fmt"
	"hash"
	"io"
)

// chunk is the size of the buffers a Writer hands to its goroutine;
// buffers is how many it has, so at most chunk*buffers bytes wait to be
// hashed. A batch is handed over when its buffer is full or when it holds
// batchFiles files: one wake-up of the goroutine per batch.
const (
	chunk      = 256 << 10
	buffers    = 8
	batchFiles = 64
)

// Writer hashes what is written to it on a goroutine of its own. What it
// hashes is a copy of exactly the bytes written, in order, and the
// contents of the files given to WriteFile at their place in the stream.
// Sum waits for the hashing to finish; Close stops the goroutine without
// a sum, and must be called (or Sum) once the Writer is no longer used.
type Writer struct {
	h    hash.Hash
	cur  *batch
	full chan *batch
	free chan *batch
	done chan struct{}
	err  error // the goroutine's, readable once done is closed
}

// batch is a buffer of written bytes and, in stream order, the pieces to
// hash: a range of the buffer, or a file.
type batch struct {
	buf   []byte
	items []item
	files int
}

type item struct {
	start, end int // of buf, when f is nil
	f          File
	size       int64
	check      func() error
}

// File is a file WriteFile hashes: read at offsets, closed once hashed.
type File interface {
	io.ReaderAt
	io.Closer
	Name() string
}

// New starts hashing with h.
func New(h hash.Hash) *Writer {
	a := &Writer{h: h, full: make(chan *batch, buffers), free: make(chan *batch, buffers), done: make(chan struct{})}
	for range buffers {
		a.free <- &batch{buf: make([]byte, 0, chunk)}
	}
	go a.run(a.full)
	return a
}

// run hashes the batches of full (a.full, which Close clears).
func (a *Writer) run(full <-chan *batch) {
	defer close(a.done)
	var rbuf []byte
	for b := range full {
		for _, it := range b.items {
			if it.f == nil {
				a.h.Write(b.buf[it.start:it.end])
				continue
			}
			if a.err == nil {
				if rbuf == nil {
					rbuf = make([]byte, chunk)
				}
				a.err = a.hashFile(it, rbuf)
			}
			it.f.Close()
		}
		b.buf, b.items, b.files = b.buf[:0], b.items[:0], 0
		a.free <- b
	}
}

func (a *Writer) hashFile(it item, buf []byte) error {
	k, err := io.CopyBuffer(a.h, io.NewSectionReader(it.f, 0, it.size), buf)
	if err != nil {
		return fmt.Errorf("hashing %s: %w", it.f.Name(), err)
	}
	if k != it.size {
		return fmt.Errorf("hashing %s: %w: %d of %d bytes", it.f.Name(), ErrChanged, k, it.size)
	}
	if it.check != nil {
		if err := it.check(); err != nil {
			return fmt.Errorf("hashing %s: %w", it.f.Name(), err)
		}
	}
	return nil
}

// ErrChanged is the error of a file given to WriteFile that was shorter
// than its size when it was read; a check may return it too.
var ErrChanged = errors.New("the file changed while it was copied")

func (a *Writer) batch() *batch {
	if a.cur == nil {
		a.cur = <-a.free
	}
	return a.cur
}

// Write copies p to be hashed; it never fails.
func (a *Writer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		var full bool
		if p, full = a.buffer(p); full {
			a.flush()
		}
	}
	return n, nil
}

// buffer copies what fits of p into the current batch's buffer, as a
// range to hash, and returns the rest of p and whether the buffer is
// full.
func (a *Writer) buffer(p []byte) (rest []byte, full bool) {
	b := a.batch()
	start := len(b.buf)
	k := copy(b.buf[start:cap(b.buf)], p)
	b.buf = b.buf[:start+k]
	if last := len(b.items) - 1; last >= 0 && b.items[last].f == nil && b.items[last].end == start {
		b.items[last].end += k
	} else {
		b.items = append(b.items, item{start: start, end: start + k})
	}
	return p[k:], len(b.buf) == cap(b.buf)
}

func (a *Writer) flush() {
	if a.cur != nil && len(a.cur.items) > 0 {
		a.full <- a.cur
		a.cur = nil
	}
}

// WriteFile hashes the first size bytes of f at this point of the
// stream, reading them on the hashing goroutine, and then closes f (the
// Writer owns it from now on). check, when set, runs there after the
// read (to tell whether the file changed meanwhile); a read error, a
// file shorter than size (ErrChanged) or check's error is Err's, and
// makes the sum worthless.
func (a *Writer) WriteFile(f File, size int64, check func() error) {
	b := a.batch()
	b.items = append(b.items, item{f: f, size: size, check: check})
	if b.files++; b.files == batchFiles {
		a.flush()
	}
}

// Sum hashes what is still buffered and returns the hash of everything
// written. The writer cannot be used afterwards. Check Err when files
// were given to WriteFile.
func (a *Writer) Sum() []byte {
	a.flush()
	a.Close()
	return a.h.Sum(nil)
}

// Err is the error of a file given to WriteFile, once Sum or Close
// returned.
func (a *Writer) Err() error {
	select {
	case <-a.done:
		return a.err
	default:
		return errors.New("hashpipe: Err called before Sum or Close")
	}
}

// Close ends the goroutine (after it hashed what it was given); it may be
// called more than once. Files given to WriteFile and not yet handed over
// are closed unread.
func (a *Writer) Close() {
	select {
	case <-a.done:
		return
	default:
	}
	if a.cur != nil {
		for _, it := range a.cur.items {
			if it.f != nil {
				it.f.Close()
			}
		}
		a.cur = nil
	}
	if a.full != nil {
		close(a.full)
		a.full = nil
	}
	<-a.done
}

// Tee returns a buffered writer in front of w whose bytes the pipe
// hashes: each one is copied once, into the pipe's buffer, which is
// written to w when it is full (or on Flush) and then handed to the
// hashing goroutine as it is, where Write would copy it a second time.
// While a Tee is in use, everything written to the pipe must go through
// it, except WriteFile right after a Flush (a file whose content the
// caller put in w itself, hashed at that point of the stream); Flush it
// before Sum.
func (a *Writer) Tee(w io.Writer) *Tee {
	return &Tee{a: a, w: w}
}

// Tee is a Writer's buffered writer (see Writer.Tee).
type Tee struct {
	a   *Writer
	w   io.Writer
	err error
}

// Write buffers p; it fails with w's error once a write to w failed.
func (t *Tee) Write(p []byte) (int, error) {
	if t.err != nil {
		return 0, t.err
	}
	n := len(p)
	for len(p) > 0 {
		var full bool
		if p, full = t.a.buffer(p); full {
			if err := t.Flush(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// Flush writes what is buffered to w and hands it to the hashing.
func (t *Tee) Flush() error {
	if t.err != nil {
		return t.err
	}
	b := t.a.cur
	if b == nil {
		return nil
	}
	if _, err := t.w.Write(b.buf); err != nil {
		t.err = err
		return err
	}
	t.a.flush()
	return nil
}

// TeeReader returns a reader of r whose bytes the pipe hashes: r is read
// into the pipe's buffers, which Read serves and then hands to the
// hashing goroutine as they are (one copy, where io.TeeReader and a
// buffered reader would make two). Every byte read from r is hashed, in
// order, once served; read to the end (io.EOF) before Sum. What was
// written to the pipe before is hashed first; while it is in use,
// nothing else may be written to the pipe.
func (a *Writer) TeeReader(r io.Reader) *TeeReader {
	a.flush()
	return &TeeReader{a: a, r: r}
}

// TeeReader is a Writer's reader (see Writer.TeeReader).
type TeeReader struct {
	a *Writer
	r io.Reader
	// off is how much of the pipe's current buffer Read served.
	off int
	err error
}

// Read serves the bytes of r, reading a buffer's worth at a time.
func (t *TeeReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	b, err := t.next()
	if len(b) == 0 {
		return 0, err
	}
	k := copy(p, b)
	t.off += k
	return k, nil
}

// WriteN writes the next n bytes of r to w straight from the pipe's
// buffers, as if they were read with Read (they are hashed the same way),
// without a copy into a buffer of the caller's. It returns how many it
// wrote: fewer than n only with an error, io.ErrUnexpectedEOF when r
// ends first.
func (t *TeeReader) WriteN(w io.Writer, n int64) (int64, error) {
	var done int64
	for done < n {
		b, err := t.next()
		if len(b) == 0 {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return done, err
		}
		k, err := w.Write(b[:min(int64(len(b)), n-done)])
		t.off += k
		done += int64(k)
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// next is the part of the current buffer not served yet; when it is all
// served, the buffer goes to be hashed and the next one is read. It is
// empty only at the end of r or on r's error.
func (t *TeeReader) next() ([]byte, error) {
	b := t.a.cur
	if b == nil || t.off == len(b.buf) {
		if t.err != nil {
			return nil, t.err
		}
		// The buffer served is hashed; the next one is filled.
		t.a.flush()
		b = t.a.batch()
		n, err := io.ReadFull(t.r, b.buf[:cap(b.buf)])
		b.buf = b.buf[:n]
		if n > 0 {
			b.items = append(b.items, item{start: 0, end: n})
		}
		t.off = 0
		switch err {
		case nil:
		case io.ErrUnexpectedEOF:
			t.err = io.EOF
		default:
			t.err = err
		}
		if n == 0 {
			return nil, t.err
		}
	}
	return b.buf[t.off:], nil
}
