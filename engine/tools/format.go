package tools

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentctl/agentctl/sandbox"
)

// BytesPerToken is the approximation the Agents SDK uses to turn a token
// budget into bytes (and a byte count into tokens, rounding up).
const BytesPerToken = 4

// ApproxTokens is the approximate token count of n bytes: n / 4, rounded
// up.
func ApproxTokens(n int) int {
	if n <= 0 {
		return 0
	}
	return (n + BytesPerToken - 1) / BytesPerToken
}

// TruncateTokens shortens s to about maxTokens tokens the way the Agents
// SDK's exec_command does: when s is longer than maxTokens*4 bytes it keeps
// a head and a tail (never splitting a UTF-8 sequence), puts
// "…N tokens truncated…" between them, prefixes "Total output lines: L"
// (lines counted as Python's str.splitlines does), and returns the
// original token count. The prefix and marker count against the budget,
// so the result is never longer than maxTokens*4 bytes. It returns s
// unchanged and 0 when no cut is needed (or maxTokens <= 0).
func TruncateTokens(s string, maxTokens int) (string, int) {
	if maxTokens <= 0 {
		return s, 0
	}
	maxBytes := maxTokens * BytesPerToken
	if len(s) <= maxBytes {
		return s, 0
	}
	original := ApproxTokens(len(s))
	prefix := fmt.Sprintf("Total output lines: %d\n\n", countLines(s))
	marker := tokenMarker(original)
	if len(prefix)+len(marker) > maxBytes {
		prefix = ""
	}
	budget := maxBytes - len(prefix) - len(marker)
	if budget < 0 {
		return truncateUTF8(marker, maxBytes), original
	}
	left := budget / 2
	right := budget - left
	head, tail := splitHeadTail(s, left, right)
	removed := len(s) - len(head) - len(tail)
	return prefix + head + tokenMarker(ApproxTokens(removed)) + tail, original
}

func tokenMarker(n int) string { return fmt.Sprintf("…%d tokens truncated…", n) }

// splitHeadTail returns the longest prefix of s within headBytes and the
// longest suffix within tailBytes, both cut on rune boundaries and never
// overlapping.
func splitHeadTail(s string, headBytes, tailBytes int) (string, string) {
	end := 0
	for end < len(s) {
		_, size := utf8.DecodeRuneInString(s[end:])
		if end+size > headBytes {
			break
		}
		end += size
	}
	start := len(s)
	for start > end {
		_, size := utf8.DecodeLastRuneInString(s[:start])
		if len(s)-(start-size) > tailBytes {
			break
		}
		start -= size
	}
	return s[:end], s[start:]
}

func truncateUTF8(s string, maxBytes int) string {
	if len(s) <= maxBytes {
		return s
	}
	for maxBytes > 0 && !utf8.RuneStart(s[maxBytes]) {
		maxBytes--
	}
	return s[:maxBytes]
}

// countLines counts lines the way Python's str.splitlines does.
func countLines(s string) int {
	n := 0
	i := 0
	for i < len(s) {
		j := i
		for j < len(s) {
			r, size := utf8.DecodeRuneInString(s[j:])
			if isLineBreak(r) {
				if r == '\r' && j+1 < len(s) && s[j+1] == '\n' {
					size = 2
				}
				j += size
				break
			}
			j += size
		}
		n++
		i = j
	}
	return n
}

func isLineBreak(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

// decodeLossy turns bytes into valid UTF-8, replacing each invalid byte
// with U+FFFD (as Python's errors="replace" does, roughly).
func decodeLossy(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b))
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			sb.WriteRune(utf8.RuneError)
		} else {
			sb.Write(b[:size])
		}
		b = b[size:]
	}
	return sb.String()
}

// ExecOutputText joins a result's streams the way the Agents SDK does:
// stdout, then stderr (on a new line when stdout does not end with one);
// invalid UTF-8 is replaced.
func ExecOutputText(res sandbox.ExecResult) string {
	o, e := decodeLossy(res.Stdout), decodeLossy(res.Stderr)
	if o != "" && e != "" {
		if !strings.HasSuffix(o, "\n") {
			return o + "\n" + e
		}
		return o + e
	}
	return o + e
}

// TimeoutNotice is the line exec output starts with when a command was
// killed after timeout, as the Agents SDK words it.
func TimeoutNotice(timeout time.Duration) string {
	return fmt.Sprintf("Command timed out after %.3f seconds.", timeout.Seconds())
}

// OutputLostNotice tells the model that the command ran but the end of
// its output was lost on the way out of the sandbox (sandbox.ErrOutputLost).
const OutputLostNotice = "The command ran, but the sandbox's exec stream ended before its output did: the output below is missing its end. Re-run it with the output redirected to a file and read the file if the end matters."

// outputLost reports whether err only says the output's end was lost, in
// which case the result is kept, with OutputLostNotice.
func outputLost(err error) bool { return errors.Is(err, sandbox.ErrOutputLost) }

// FormatExecOutput renders an exec result as the text the exec_command
// tool returns to the model, in the Agents SDK's layout:
//
//	Chunk ID: 3f9a0c
//	Wall time: 0.0123 seconds
//	Process exited with code 0      (absent when the command timed out)
//	Original token count: 5210      (only when the output was cut)
//	Output:
//	...
//
// The chunk id is random, as in the SDK. The output (ExecOutputText) is
// head+tail truncated to about maxOutputTokens tokens (TruncateTokens;
// <= 0: no limit). When the provider already cut a stream
// (ExecResult.Truncated) the original count comes from the stream sizes.
// notices are lines put before the output, in order (for a timeout,
// TimeoutNotice).
func FormatExecOutput(res sandbox.ExecResult, maxOutputTokens int, notices ...string) string {
	f := formatChunk{output: ExecOutputText(res), wall: res.Wall, maxTokens: maxOutputTokens, notices: notices}
	if res.Truncated {
		f.original = ApproxTokens(int(res.OriginalStdout + res.OriginalStderr))
	}
	if !res.TimedOut {
		code := res.ExitCode
		f.exitCode = &code
	}
	return f.String()
}

func chunkID() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// exitCode is res's exit status, nil when the command did not finish
// (timed out).
func exitCode(res sandbox.ExecResult) *int {
	if res.TimedOut {
		return nil
	}
	c := res.ExitCode
	return &c
}
