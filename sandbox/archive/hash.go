package archive

import (
	"hash"
)

// hashChunk is the size of the buffers asyncHash hands to its goroutine;
// hashBuffers is how many it has, so at most hashChunk*hashBuffers bytes
// wait to be hashed.
const (
	hashChunk   = 256 << 10
	hashBuffers = 8
)

// asyncHash is a writer that hashes what is written to it on a goroutine
// of its own, so that hashing a snapshot (SHA-256, about as costly as
// writing it to the page cache) overlaps the archiving and the writes to
// disk instead of adding to them. What it hashes is a copy of exactly the
// bytes written, in order. Sum waits for the hashing to finish; close
// stops the goroutine without it.
type asyncHash struct {
	h    hash.Hash
	cur  []byte
	full chan []byte
	free chan []byte
	done chan struct{}
}

func newAsyncHash(h hash.Hash) *asyncHash {
	a := &asyncHash{h: h, full: make(chan []byte, hashBuffers), free: make(chan []byte, hashBuffers), done: make(chan struct{})}
	for range hashBuffers {
		a.free <- make([]byte, 0, hashChunk)
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
func (a *asyncHash) Write(p []byte) (int, error) {
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
func (a *asyncHash) Sum() []byte {
	if a.cur != nil && len(a.cur) > 0 {
		a.full <- a.cur
		a.cur = nil
	}
	a.close()
	return a.h.Sum(nil)
}

// close ends the goroutine (after it hashed what it was given); it may be
// called more than once.
func (a *asyncHash) close() {
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
