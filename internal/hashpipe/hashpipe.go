// Package hashpipe hashes what is written to it on a goroutine of its
// own, so hashing a large stream (SHA-256 of a snapshot or of a tree's
// content) overlaps the work that produces the stream instead of adding
// to it.
package hashpipe

import (
	"hash"
)

// chunk is the size of the buffers a Writer hands to its goroutine;
// buffers is how many it has, so at most chunk*buffers bytes
// wait to be hashed.
const (
	chunk   = 256 << 10
	buffers = 8
)

// Writer hashes what is written to it on a goroutine of its own. What it
// hashes is a copy of exactly the bytes written, in order. Sum waits for
// the hashing to finish; Close stops the goroutine without a sum, and
// must be called (or Sum) once the Writer is no longer used.
type Writer struct {
	h    hash.Hash
	cur  []byte
	full chan []byte
	free chan []byte
	done chan struct{}
}

// New starts hashing with h.
func New(h hash.Hash) *Writer {
	a := &Writer{h: h, full: make(chan []byte, buffers), free: make(chan []byte, buffers), done: make(chan struct{})}
	for range buffers {
		a.free <- make([]byte, 0, chunk)
	}
	full, free, done := a.full, a.free, a.done
	go func() {
		defer close(done)
		for b := range full {
			h.Write(b)
			free <- b[:0]
		}
	}()
	return a
}

// Write copies p to be hashed; it never fails.
func (a *Writer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		if a.cur == nil {
			a.cur = <-a.free
		}
		k := copy(a.cur[len(a.cur):cap(a.cur)], p)
		a.cur = a.cur[:len(a.cur)+k]
		p = p[k:]
		if len(a.cur) == cap(a.cur) {
			a.full <- a.cur
			a.cur = nil
		}
	}
	return n, nil
}

// Sum hashes what is still buffered and returns the hash of everything
// written. The writer cannot be used afterwards.
func (a *Writer) Sum() []byte {
	if len(a.cur) > 0 {
		a.full <- a.cur
		a.cur = nil
	}
	a.Close()
	return a.h.Sum(nil)
}

// Close ends the goroutine (after it hashed what it was given); it may be
// called more than once.
func (a *Writer) Close() {
	select {
	case <-a.done:
		return
	default:
	}
	if a.full != nil {
		close(a.full)
		a.full = nil
	}
	<-a.done
}
