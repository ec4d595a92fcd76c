package sandbox

import (
	"bytes"
	"errors"
	"io"
)

// ErrOutputLost reports that the channel carrying a command's output
// ended before the output did: the command ran (its exit status is
// known) but what it printed last never arrived. Providers whose exec
// streams cross a container runtime that can close them early (the
// Kubernetes provider: containerd's CRI exec, the API server's stream
// translation) detect it with an EndMarker and return the partial result
// with this error.
var ErrOutputLost = errors.New("the exec stream ended before the command's output did")

// EndMarker passes a stream on to W less the first occurrence of a
// marker the command's wrapper prints once the command has exited, and
// remembers whether the marker arrived. A stream that ends without it
// lost its tail in transit. Output written after the marker (background
// processes that outlived the command) is passed on too.
type EndMarker struct {
	w      io.Writer
	marker []byte
	held   []byte // a tail of what was written that may begin the marker
	buf    []byte
	seen   bool
}

// NewEndMarker returns an EndMarker writing to w that looks for marker
// (which must not be empty).
func NewEndMarker(w io.Writer, marker string) *EndMarker {
	return &EndMarker{w: w, marker: []byte(marker)}
}

// Seen reports whether the marker arrived.
func (m *EndMarker) Seen() bool { return m.seen }

// Write passes p on, holding back a tail that may begin the marker.
func (m *EndMarker) Write(p []byte) (int, error) {
	if m.seen {
		if _, err := m.w.Write(p); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	m.buf = append(append(m.buf[:0], m.held...), p...)
	var out, keep []byte
	if i := bytes.Index(m.buf, m.marker); i >= 0 {
		m.seen = true
		out = append(m.buf[:i:i], m.buf[i+len(m.marker):]...)
	} else {
		k := partialMarker(m.buf, m.marker)
		out, keep = m.buf[:len(m.buf)-k], m.buf[len(m.buf)-k:]
	}
	m.held = append(m.held[:0], keep...)
	if len(out) > 0 {
		if _, err := m.w.Write(out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Flush passes on what was held back: at the end of a stream that never
// carried the marker, that is output too.
func (m *EndMarker) Flush() error {
	if len(m.held) == 0 {
		return nil
	}
	_, err := m.w.Write(m.held)
	m.held = m.held[:0]
	return err
}

// partialMarker is the length of the longest tail of b that is a proper
// prefix of marker.
func partialMarker(b, marker []byte) int {
	for k := min(len(marker)-1, len(b)); k > 0; k-- {
		if bytes.HasSuffix(b, marker[:k]) {
			return k
		}
	}
	return 0
}
