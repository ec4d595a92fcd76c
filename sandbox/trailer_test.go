package sandbox

import (
	"bytes"
	"strings"
	"testing"
)

// The end marker is removed wherever the writes split it, the output
// around it arrives intact, and a stream that never carried it is passed
// on whole and reported as lost.
func TestEndMarker(t *testing.T) {
	const marker = "agentctl-exec-end-0123"
	cases := []struct{ name, stream, want string }{
		{"at the end", "hello\nworld" + marker, "hello\nworld"},
		{"with output after it", "out" + marker + "late", "outlate"},
		{"after a false start", "agentctl-exec-agentctl-exec-end-01" + marker, "agentctl-exec-agentctl-exec-end-01"},
		{"only the marker", marker, ""},
	}
	for _, c := range cases {
		for size := 1; size <= len(c.stream); size++ {
			var out bytes.Buffer
			m := NewEndMarker(&out, marker)
			for i := 0; i < len(c.stream); i += size {
				if n, err := m.Write([]byte(c.stream[i:min(i+size, len(c.stream))])); err != nil || n != min(size, len(c.stream)-i) {
					t.Fatalf("%s: write returned %d, %v", c.name, n, err)
				}
			}
			if err := m.Flush(); err != nil {
				t.Fatal(err)
			}
			if !m.Seen() || out.String() != c.want {
				t.Fatalf("%s, written %d bytes at a time: seen=%v output %q, want %q", c.name, size, m.Seen(), out.String(), c.want)
			}
		}
	}
	// A stream cut anywhere before the marker's last byte: everything
	// that arrived is output, and the loss is reported.
	full := "some output" + marker
	for cut := 0; cut < len(full); cut++ {
		var out bytes.Buffer
		m := NewEndMarker(&out, marker)
		_, _ = m.Write([]byte(full[:cut]))
		_ = m.Flush()
		if m.Seen() || out.String() != full[:cut] {
			t.Fatalf("stream cut after %d bytes: seen=%v output %q", cut, m.Seen(), out.String())
		}
	}
	// 64 MiB through it: streamed, with nothing but the marker held back.
	var n countingWriter
	m := NewEndMarker(&n, marker)
	chunk := []byte(strings.Repeat("x", 32<<10))
	for range 2048 {
		_, _ = m.Write(chunk)
	}
	_, _ = m.Write([]byte(marker))
	if !m.Seen() || n != 64<<20 {
		t.Fatalf("64 MiB: seen=%v, %d bytes passed on", m.Seen(), n)
	}
}

type countingWriter int64

func (c *countingWriter) Write(p []byte) (int, error) {
	*c += countingWriter(len(p))
	return len(p), nil
}
