package views

import (
	"bytes"
	"io"
	"sync"
)

// holdLimit is how much output a Hold keeps back at most: past it, what
// was kept and what follows is written at once (interleaved with the
// prompt, but nothing lost and memory bounded).
const holdLimit = 1 << 20

// Hold keeps the output of a command's views back while a prompt waits
// for its answer (the approval question of one run while other runs go
// on), so that the question and the answer stay together on the
// terminal; the lines kept are written, in order, once the prompt is
// answered. Its zero value holds nothing until Start. Safe for
// concurrent use.
type Hold struct {
	mu      sync.Mutex
	prompts int  // prompts open
	through bool // the limit was passed: write through until released
	size    int
	kept    []keptWrite
}

type keptWrite struct {
	w io.Writer
	p []byte
}

// Writer returns w through h: what is written goes to w at once, or is
// kept while a prompt is open.
func (h *Hold) Writer(w io.Writer) io.Writer { return &holdWriter{h: h, w: w} }

// Start holds the output of h's writers until release is called (once
// per Start; prompts may nest). The prompt itself writes to the stream
// directly, not through h.
func (h *Hold) Start() (release func()) {
	h.mu.Lock()
	h.prompts++
	h.mu.Unlock()
	var once sync.Once
	return func() { once.Do(h.release) }
}

func (h *Hold) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.prompts--; h.prompts == 0 {
		h.flush()
		h.through = false
	}
}

// flush writes what was kept, in order. h.mu is held.
func (h *Hold) flush() {
	for _, k := range h.kept {
		k.w.Write(k.p) // as a view's own write: errors on the terminal are not reported
	}
	h.kept, h.size = nil, 0
}

type holdWriter struct {
	h *Hold
	w io.Writer
}

func (hw *holdWriter) Write(p []byte) (int, error) {
	h := hw.h
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.prompts == 0 || h.through {
		return hw.w.Write(p)
	}
	if h.size+len(p) > holdLimit {
		h.flush()
		h.through = true
		return hw.w.Write(p)
	}
	h.kept = append(h.kept, keptWrite{w: hw.w, p: bytes.Clone(p)})
	h.size += len(p)
	return len(p), nil
}
