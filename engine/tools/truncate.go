package tools

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// bytesPerToken is the rough token size used to turn a token budget into a
// byte budget, as the Agents SDK does.
const bytesPerToken = 4

// approxTokens is the SDK's token estimate: bytes / 4, rounded up.
func approxTokens(nbytes int) int {
	if nbytes <= 0 {
		return 0
	}
	return (nbytes + bytesPerToken - 1) / bytesPerToken
}

// truncateTokens shortens text to about maxTokens tokens the way the SDK's
// exec_command does: when text is longer than maxTokens*4 bytes it keeps a
// head and a tail, puts "…N tokens truncated…" between them, prefixes
// "Total output lines: L", and returns the original token count. It returns
// text unchanged and 0 when no cut is needed (or maxTokens <= 0).
func truncateTokens(text string, maxTokens int) (string, int) {
	if maxTokens <= 0 {
		return text, 0
	}
	maxBytes := maxTokens * bytesPerToken
	if len(text) <= maxBytes {
		return text, 0
	}
	original := approxTokens(len(text))
	prefix := fmt.Sprintf("Total output lines: %d\n\n", countLines(text))
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
	head, tail := splitHeadTail(text, left, right)
	removed := len(text) - len(head) - len(tail)
	return prefix + head + tokenMarker(approxTokens(removed)) + tail, original
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
// with U+FFFD.
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
