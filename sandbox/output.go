package sandbox

import (
	"sync"
	"time"
)

// DefaultOutputLimit is the number of bytes of each exec stream kept when
// ExecRequest.OutputLimit is zero.
const DefaultOutputLimit = 1 << 20

// HeadTail is an io.Writer that keeps the first and last limit/2 bytes of
// everything written to it and counts the rest, the way the Agents SDK's
// exec_command keeps head and tail of long output. It is safe for
// concurrent use.
type HeadTail struct {
	mu    sync.Mutex
	limit int
	head  []byte
	tail  []byte // ring buffer once full
	start int    // index of the oldest byte in tail when full
	total int64
}

// NewHeadTail returns a HeadTail keeping at most limit bytes (<= 0:
// DefaultOutputLimit).
func NewHeadTail(limit int) *HeadTail {
	if limit <= 0 {
		limit = DefaultOutputLimit
	}
	return &HeadTail{limit: limit}
}

// Write never fails.
func (h *HeadTail) Write(p []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(p)
	h.total += int64(n)
	headCap := h.limit - h.limit/2
	if room := headCap - len(h.head); room > 0 {
		k := min(room, len(p))
		h.head = append(h.head, p[:k]...)
		p = p[k:]
	}
	tailCap := h.limit / 2
	if tailCap == 0 || len(p) == 0 {
		return n, nil
	}
	if len(p) >= tailCap {
		h.tail = append(h.tail[:0], p[len(p)-tailCap:]...)
		h.start = 0
		return n, nil
	}
	for len(p) > 0 {
		if len(h.tail) < tailCap {
			k := min(tailCap-len(h.tail), len(p))
			h.tail = append(h.tail, p[:k]...)
			p = p[k:]
			continue
		}
		k := copy(h.tail[h.start:], p)
		p = p[k:]
		h.start = (h.start + k) % tailCap
	}
	return n, nil
}

// Total is the number of bytes written.
func (h *HeadTail) Total() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total
}

// Truncated reports whether bytes were dropped.
func (h *HeadTail) Truncated() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.total > int64(len(h.head)+len(h.tail))
}

// Bytes returns the kept bytes: head, then (when bytes were dropped) a
// marker line noting how many, then tail.
func (h *HeadTail) Bytes() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]byte, 0, len(h.head)+len(h.tail)+64)
	out = append(out, h.head...)
	dropped := h.total - int64(len(h.head)+len(h.tail))
	if dropped > 0 {
		out = append(out, truncationMarker(dropped, h.total)...)
	}
	out = append(out, h.tail[h.start:]...)
	out = append(out, h.tail[:h.start]...)
	return out
}

// CapturedResult is the ExecResult of a command whose stdout and stderr
// were captured by two HeadTails.
func CapturedResult(stdout, stderr *HeadTail, code int, wall time.Duration, timedOut bool) ExecResult {
	return ExecResult{
		ExitCode:       code,
		Stdout:         stdout.Bytes(),
		Stderr:         stderr.Bytes(),
		Wall:           wall,
		Truncated:      stdout.Truncated() || stderr.Truncated(),
		OriginalStdout: stdout.Total(),
		OriginalStderr: stderr.Total(),
		TimedOut:       timedOut,
	}
}
