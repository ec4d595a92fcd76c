// Package ttytest drives a shell on a sandbox's terminal the same way for
// every provider's tests.
package ttytest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// Process is what a provider's StartProcess returns (sandbox.Process),
// restated so this package stays a leaf.
type Process interface {
	Stdin() io.WriteCloser
	Stdout() io.Reader
	Stderr() io.Reader
	Wait() (int, error)
	Kill() error
}

// output collects a process's terminal output.
type output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// DriveShell checks that p, a POSIX shell started on a terminal, has the
// terminal as its stdin, stdout and controlling terminal, answers lines
// sent across several writes, and exits with the code it is told.
func DriveShell(t *testing.T, p Process) {
	t.Helper()
	out := &output{}
	go io.Copy(out, p.Stdout())
	go io.Copy(io.Discard, p.Stderr())
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q in the terminal's output:\n%s", want, out.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	send := func(s string) {
		t.Helper()
		if _, err := io.WriteString(p.Stdin(), s); err != nil {
			t.Fatalf("writing %q: %v", s, err)
		}
	}
	send("if [ -t 0 ] && [ -t 1 ]; then echo TERM-$((20+1))-OK; fi\n")
	waitFor("TERM-21-OK")
	// The terminal is the shell's controlling terminal (tty_nr, field 7
	// of /proc/self/stat, is not 0).
	send("read -r _ _ _ _ _ _ ttynr _ < /proc/self/stat; [ \"$ttynr\" != 0 ] && echo CTTY-$((1+1))-OK\n")
	waitFor("CTTY-2-OK")
	send("x=$((6*7))\n")
	send("echo value-$x\n")
	waitFor("value-42")
	send("exit 3\n")
	done := make(chan struct{})
	var code int
	var err error
	go func() { code, err = p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		p.Kill()
		t.Fatalf("the shell did not exit; output:\n%s", out.String())
	}
	if err != nil || code != 3 {
		t.Fatalf("exit %d, %v; output:\n%s", code, err, out.String())
	}
}

// WriteStdin is write_stdin as a benchmark sees it: chars written to
// session 1 (empty polls), the tool's text back (whose output follows its
// "Output:" line).
type WriteStdin func(chars string) (string, error)

// BenchRoundTrip measures write_stdin round trips to `cat` running on a
// terminal as session 1: each iteration writes a line and polls (with
// yield_time_ms 0) until cat has written it back (the line shows twice:
// the terminal's echo, then cat's copy).
func BenchRoundTrip(b *testing.B, write WriteStdin) {
	b.Helper()
	i := 0
	for b.Loop() {
		i++
		line := fmt.Sprintf("rt-%d", i)
		text, err := write(line + "\n")
		if err != nil {
			b.Fatal(err)
		}
		out := outputOf(text)
		deadline := time.Now().Add(30 * time.Second)
		for strings.Count(out, line) < 2 {
			if time.Now().After(deadline) {
				b.Fatalf("%q did not come back: %q", line, out)
			}
			more, err := write("")
			if err != nil {
				b.Fatal(err)
			}
			out += outputOf(more)
		}
	}
}

// outputOf is the output part of a tool result.
func outputOf(text string) string {
	_, out, _ := strings.Cut(text, "Output:\n")
	return out
}

// Session1 is write_stdin on session 1 with yield_time_ms 0, over call
// (the tool's Call, its output as text).
func Session1(call func(ctx context.Context, args string) (string, error)) WriteStdin {
	return func(chars string) (string, error) {
		return call(context.Background(), fmt.Sprintf(`{"session_id": 1, "chars": %q, "yield_time_ms": 0}`, chars))
	}
}
