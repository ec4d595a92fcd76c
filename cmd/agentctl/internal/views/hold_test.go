package views

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// TestHoldKeepsOrder: two streams written through a Hold while a prompt
// is open come out after it is released, each in its order; nested
// prompts release at the last.
func TestHoldKeepsOrder(t *testing.T) {
	var h Hold
	var out, errOut bytes.Buffer
	o, e := h.Writer(&out), h.Writer(&errOut)
	fmt.Fprint(o, "before\n")
	outer := h.Start()
	inner := h.Start()
	fmt.Fprint(o, "one\n")
	fmt.Fprint(e, "warning\n")
	inner()
	inner() // once per Start
	fmt.Fprint(o, "two\n")
	if out.String() != "before\n" || errOut.Len() != 0 {
		t.Fatalf("written while held: %q %q", out.String(), errOut.String())
	}
	outer()
	if out.String() != "before\none\ntwo\n" || errOut.String() != "warning\n" {
		t.Errorf("after release: %q %q", out.String(), errOut.String())
	}
}

// TestHoldLimit: past holdLimit, what was kept and what follows is
// written at once, in order: nothing is lost and memory stays bounded.
func TestHoldLimit(t *testing.T) {
	var h Hold
	var out bytes.Buffer
	w := h.Writer(&out)
	release := h.Start()
	line := strings.Repeat("x", 1023) + "\n"
	n := holdLimit/len(line) + 2
	for i := range n {
		fmt.Fprint(w, line)
		if i == n-3 && out.Len() != 0 {
			t.Fatalf("written before the limit: %d bytes", out.Len())
		}
	}
	if out.Len() != n*len(line) {
		t.Fatalf("past the limit: %d bytes written, want %d", out.Len(), n*len(line))
	}
	release()
	if out.Len() != n*len(line) {
		t.Errorf("after release: %d bytes, want %d", out.Len(), n*len(line))
	}
}
