package sandbox

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func TestFormatExecOutput(t *testing.T) {
	got := FormatExecOutput(ExecResult{ExitCode: 0, Stdout: []byte("hello\n"), Stderr: []byte("warn\n"), Wall: 12300 * time.Microsecond}, 100)
	want := "Wall time: 0.0123 seconds\nProcess exited with code 0\nOutput:\nhello\nwarn\n"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
	got = FormatExecOutput(ExecResult{ExitCode: 1, Stdout: []byte("no newline"), Stderr: []byte("err")}, 0)
	if !strings.HasSuffix(got, "Output:\nno newline\nerr") || !strings.Contains(got, "code 1") {
		t.Errorf("got %q", got)
	}
	got = FormatExecOutput(ExecResult{TimedOut: true, ExitCode: -1, Wall: 2 * time.Second}, 0)
	if !strings.Contains(got, "timed out after 2.000 seconds") || strings.Contains(got, "exited") {
		t.Errorf("timeout: %q", got)
	}
}

func TestTruncateTokens(t *testing.T) {
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
	body := out[strings.Index(out, "\n\n")+2:]
	marker := body[strings.Index(body, "…"):]
	marker = marker[:strings.Index(marker[3:], "…")+6]
	if n := len(body) - len(marker); n > 200 || n < 190 {
		t.Errorf("kept %d bytes, want about 200", n)
	}
	if !strings.HasPrefix(s, body[:strings.Index(body, "…")]) || !strings.HasSuffix(s, body[strings.Index(body, marker)+len(marker):]) {
		t.Error("head or tail is not from the input")
	}
	if out, orig := TruncateTokens("short", 50); out != "short" || orig != 0 {
		t.Errorf("short: %q %d", out, orig)
	}
	full := FormatExecOutput(ExecResult{Stdout: []byte(s)}, 50)
	if !strings.Contains(full, "Original token count: ") {
		t.Errorf("no original count: %q", full[:200])
	}
}
