package sandbox

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// BytesPerToken is the approximation the Agents SDK uses to turn a token
// budget into bytes (and a byte count into tokens, rounding up).
const BytesPerToken = 4

// ApproxTokens is the approximate token count of n bytes.
func ApproxTokens(n int) int {
	if n <= 0 {
		return 0
	}
	return (n + BytesPerToken - 1) / BytesPerToken
}

// TruncateTokens cuts s to about maxTokens tokens, keeping the head and
// the tail (half the byte budget each, never splitting a UTF-8 sequence)
// with a "…N tokens truncated…" marker between them, as the Agents SDK's
// exec_command does. When s is cut, the result starts with a
// "Total output lines: N" line and the second result is the approximate
// token count of the whole of s; otherwise it is s and 0. maxTokens <= 0
// means no limit.
func TruncateTokens(s string, maxTokens int) (string, int) {
	if maxTokens <= 0 || len(s) <= maxTokens*BytesPerToken {
		return s, 0
	}
	budget := maxTokens * BytesPerToken
	left := budget / 2
	right := budget - left
	// Head: whole runes ending at or before left bytes.
	h := left
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	// Tail: whole runes starting at or after len(s)-right.
	t := len(s) - right
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	if t < h {
		t = h
	}
	lines := strings.Count(s, "\n")
	if !strings.HasSuffix(s, "\n") {
		lines++
	}
	marker := fmt.Sprintf("…%d tokens truncated…", ApproxTokens(len(s)-budget))
	out := fmt.Sprintf("Total output lines: %d\n\n%s%s%s", lines, s[:h], marker, s[t:])
	return out, ApproxTokens(len(s))
}

// ExecOutputText joins a result's streams the way the Agents SDK does:
// stdout, then stderr on a new line; invalid UTF-8 is replaced.
func ExecOutputText(res ExecResult) string {
	out := strings.ToValidUTF8(string(res.Stdout), "\uFFFD")
	errs := strings.ToValidUTF8(string(res.Stderr), "\uFFFD")
	switch {
	case out != "" && errs != "":
		if strings.HasSuffix(out, "\n") {
			return out + errs
		}
		return out + "\n" + errs
	case out != "":
		return out
	}
	return errs
}

// FormatExecOutput renders an exec result as the text the exec_command
// tool returns to the model, in the Agents SDK's layout:
//
//	Wall time: 0.0123 seconds
//	Process exited with code 0
//	Original token count: 5210      (only when the output was cut)
//	Output:
//	...
//
// The output is head+tail truncated to about maxOutputTokens tokens (4
// bytes each; <= 0: no limit). A timed-out command reports the timeout
// instead of an exit code. When the provider already cut a stream
// (ExecResult.Truncated) the marker it left in the text says how large
// the stream was. The SDK's random "Chunk ID" line is left out so the
// same result always renders the same text.
func FormatExecOutput(res ExecResult, maxOutputTokens int) string {
	text := ExecOutputText(res)
	text, original := TruncateTokens(text, maxOutputTokens)
	if original == 0 && res.Truncated {
		original = ApproxTokens(int(res.OriginalStdout + res.OriginalStderr))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Wall time: %.4f seconds\n", res.Wall.Seconds())
	if res.TimedOut {
		fmt.Fprintf(&b, "Command timed out after %.3f seconds; the process tree was killed.\n", res.Wall.Round(time.Millisecond).Seconds())
	} else {
		fmt.Fprintf(&b, "Process exited with code %d\n", res.ExitCode)
	}
	if original > 0 {
		fmt.Fprintf(&b, "Original token count: %d\n", original)
	}
	b.WriteString("Output:\n")
	b.WriteString(text)
	return b.String()
}
