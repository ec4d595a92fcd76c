// Package termtext makes text from files, tools, models and sandboxes
// safe to print on a terminal: control characters, invalid UTF-8 and
// Unicode format characters are written as visible escapes (\x1b,
// \u202e) instead of being obeyed, so such text cannot set the window
// title, clear the screen, forge hyperlinks (OSC 8) or reorder what the
// user reads (bidirectional overrides).
//
// It is shared by the configuration's diagnostics (config/diagfmt) and
// the command line's views, which is why it sits below both.
package termtext

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Printable returns s with every control character (but tab and newline),
// invalid UTF-8 byte and Unicode format, surrogate or private-use rune
// written as a visible escape (\x1b, \u202e). Text that needs no escaping
// is returned as is.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if !printableRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\r' && strings.HasPrefix(s[i+1:], "\n"):
			// CR LF (a terminal's line ending, as a PTY writes it) is a
			// line end; a lone CR, which overwrites the line, is escaped.
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case printableRune(r):
			b.WriteString(s[i : i+n])
		case r < 0x100:
			fmt.Fprintf(&b, "\\x%02x", r)
		case r > 0xffff:
			fmt.Fprintf(&b, "\\U%08x", r)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
		i += n
	}
	return b.String()
}

// Line is Printable for text shown on one line: newlines and tabs are
// escaped too (\n, \t), so the text cannot start a line that looks like
// agentctl's own output.
func Line(s string) string {
	s = Printable(s)
	if !strings.ContainsAny(s, "\n\t") {
		return s
	}
	return strings.NewReplacer("\n", `\n`, "\t", `\t`).Replace(s)
}

func printableRune(r rune) bool {
	if r == '\t' || r == '\n' {
		return true
	}
	if r == utf8.RuneError {
		return false
	}
	return !unicode.IsControl(r) && !unicode.In(r, unicode.Cf, unicode.Co, unicode.Cs)
}

// JSON returns the JSON text b with every character that Printable would
// escape written as a JSON escape instead (\u001b, \u202e, a surrogate
// pair above U+FFFF): the document decodes to exactly the same values,
// and printing it cannot drive a terminal. encoding/json already escapes
// C0 control characters but writes DEL, C1 controls and format
// characters as they are. Outside strings valid JSON holds only ASCII
// punctuation, digits, letters and white space, which are kept; an
// invalid UTF-8 byte (invalid JSON in any case) becomes \ufffd.
func JSON(b []byte) []byte {
	clean := true
	for _, r := range string(b) {
		if r != '\r' && !printableRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		switch {
		case r == '\r' || (printableRune(r) && !(r == utf8.RuneError && n == 1)):
			out = append(out, b[i:i+n]...)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += n
	}
	return out
}
