package tools

import (
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentctl/agentctl/sandbox"
)

var chunkHeaderRE = regexp.MustCompile(`^Chunk ID: [0-9a-f]{6}\n`)

// withoutChunkID checks the random first line and drops it.
func withoutChunkID(t *testing.T, s string) string {
	t.Helper()
	loc := chunkHeaderRE.FindStringIndex(s)
	if loc == nil {
		t.Fatalf("no Chunk ID line in %q", s)
	}
	return s[loc[1]:]
}

func TestFormatExecOutput(t *testing.T) {
	got := FormatExecOutput(sandbox.ExecResult{ExitCode: 0, Stdout: []byte("hello\n"), Stderr: []byte("warn\n"), Wall: 12300 * time.Microsecond}, 100)
	want := "Wall time: 0.0123 seconds\nProcess exited with code 0\nOutput:\nhello\nwarn\n"
	if got := withoutChunkID(t, got); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	got = FormatExecOutput(sandbox.ExecResult{ExitCode: 1, Stdout: []byte("no newline"), Stderr: []byte("err")}, 0)
	if !strings.HasSuffix(got, "Output:\nno newline\nerr") || !strings.Contains(got, "code 1") {
		t.Errorf("got %q", got)
	}
	// A timed-out command has no exit code line; the notices come first.
	got = FormatExecOutput(sandbox.ExecResult{TimedOut: true, ExitCode: -1, Stdout: []byte("started\n"), Wall: 2 * time.Second}, 0, "A TTY is not available.", TimeoutNotice(2*time.Second))
	want = "Wall time: 2.0000 seconds\nOutput:\nA TTY is not available.\nCommand timed out after 2.000 seconds.\nstarted\n"
	if got := withoutChunkID(t, got); got != want {
		t.Errorf("timeout: got %q\nwant %q", got, want)
	}
	got = FormatExecOutput(sandbox.ExecResult{TimedOut: true}, 0, TimeoutNotice(300*time.Millisecond))
	if !strings.HasSuffix(got, "Output:\nCommand timed out after 0.300 seconds.") {
		t.Errorf("timeout without output: %q", got)
	}
	// A stream the provider cut reports its original size.
	got = FormatExecOutput(sandbox.ExecResult{Stdout: []byte("head…tail"), Truncated: true, OriginalStdout: 4000, OriginalStderr: 1}, 0)
	if !strings.Contains(got, "\nOriginal token count: 1001\nOutput:\n") {
		t.Errorf("provider-truncated: %q", got)
	}
	// Invalid UTF-8 is replaced byte by byte.
	got = FormatExecOutput(sandbox.ExecResult{Stdout: []byte("a\xff\xfeb")}, 0)
	if !strings.HasSuffix(got, "Output:\na\uFFFD\uFFFDb") {
		t.Errorf("invalid UTF-8: %q", got)
	}
}

func TestTruncateTokens(t *testing.T) {
	if s, n := TruncateTokens("short", 10); s != "short" || n != 0 {
		t.Errorf("short text changed: %q %d", s, n)
	}
	text := strings.Repeat("abcdefghij", 10) // 100 bytes, 25 tokens
	got, n := TruncateTokens(text, 15)       // 60 bytes
	if n != 25 {
		t.Errorf("original tokens = %d, want 25", n)
	}
	// 60 bytes - 23 (prefix) - 25 (marker) = 12 bytes of content, split
	// 6/6; 88 bytes removed = 22 tokens.
	want := "Total output lines: 1\n\nabcdef…22 tokens truncated…efghij"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}

	var b strings.Builder
	for i := range 1000 {
		b.WriteString("line ")
		b.WriteString(strings.Repeat("é", i%7))
		b.WriteString("\n")
	}
	s := b.String()
	out, orig := TruncateTokens(s, 50)
	if orig != ApproxTokens(len(s)) {
		t.Errorf("original = %d, want %d", orig, ApproxTokens(len(s)))
	}
	if !strings.HasPrefix(out, "Total output lines: 1000\n\n") || !strings.Contains(out, "tokens truncated…") {
		t.Errorf("out = %q", out)
	}
	if !utf8.ValidString(out) {
		t.Error("cut inside a UTF-8 sequence")
	}
	if len(out) > 200 || len(out) < 195 {
		t.Errorf("result is %d bytes, want at most 50 tokens (200 bytes) and close to it", len(out))
	}
	body := out[strings.Index(out, "\n\n")+2:]
	marker := regexp.MustCompile(`…\d+ tokens truncated…`).FindString(body)
	head, tail, _ := strings.Cut(body, marker)
	if !strings.HasPrefix(s, head) || !strings.HasSuffix(s, tail) {
		t.Error("head or tail is not from the input")
	}
	// Multi-byte runes are never split, even with a tiny budget.
	for _, max := range []int{1, 5, 20} {
		got, _ = TruncateTokens(strings.Repeat("é", 100), max)
		if strings.ContainsRune(got, '\uFFFD') || !utf8.ValidString(got) || len(got) > max*BytesPerToken {
			t.Errorf("max %d: bad rune-safe truncation: %q", max, got)
		}
	}
	full := FormatExecOutput(sandbox.ExecResult{Stdout: []byte(s)}, 50)
	if !strings.Contains(full, "Original token count: ") {
		t.Errorf("no original count: %q", full[:200])
	}
}

func TestCountLines(t *testing.T) {
	// Python's str.splitlines: a final line break ends a line but does not
	// start a new one; \r\n is one break; Unicode breaks count.
	for s, want := range map[string]int{
		"":             0,
		"a":            1,
		"a\n":          1,
		"a\nb":         2,
		"a\r\nb\r\n":   2,
		"a\rb\x0bc":    3,
		"a\u2028b\x85": 2,
		"\n\n":         2,
	} {
		if got := countLines(s); got != want {
			t.Errorf("countLines(%q) = %d, want %d", s, got, want)
		}
	}
}
