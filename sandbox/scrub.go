package sandbox

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	ahocorasick "github.com/petar-dambovaliev/aho-corasick"
)

// Redacted is what a sensitive value is replaced with.
const Redacted = "(sensitive)"

// dfaMaxPatternBytes bounds the total pattern length for which the
// matcher is built as a DFA (about 4 MB); past it, as an NFA.
const dfaMaxPatternBytes = 32 << 10

// MinSensitiveLen is the length under which a sensitive value is not
// scrubbed: masking "a" or "42" would mangle everything.
const MinSensitiveLen = 3

// Scrubber replaces every occurrence of a set of sensitive values and of
// their common encodings by Redacted, the way CI systems mask secrets in
// logs. It is built once per run over all the values and matches them all
// in one pass (Aho-Corasick), so its cost is linear in the text scrubbed.
// The forms matched, ASCII case-insensitively, are: the value itself (so
// its upper- and lower-case forms too), hex, base64 in the standard and
// URL alphabets at each of the three offsets a value can start at inside
// a longer encoded text, URL query and path escaping, and JSON string
// escaping (once, and twice for JSON held in a JSON string). The zero value and nil scrub nothing.
type Scrubber struct {
	ac     *ahocorasick.AhoCorasick
	maxLen int
	// lower are the patterns, ASCII lower-cased, for the fragments left
	// at a cut (MaskCutEnd, MaskCutStart).
	lower []string
	// redacted is the pattern index of Redacted, -1 when it is a form of
	// a value.
	redacted int
}

// NewScrubber returns a scrubber for values; empty values and values
// shorter than MinSensitiveLen bytes are ignored.
func NewScrubber(values []string) *Scrubber {
	seen := map[string]bool{}
	var pats []string
	add := func(p string) {
		if len(p) < MinSensitiveLen {
			return
		}
		k := asciiLower(p) // matching is ASCII case-insensitive
		if !seen[k] {
			seen[k] = true
			pats = append(pats, p)
		}
	}
	for _, v := range values {
		if len(v) < MinSensitiveLen {
			continue
		}
		for _, p := range Encodings(v) {
			add(p)
		}
	}
	if len(pats) == 0 {
		return &Scrubber{}
	}
	sort.Strings(pats) // a deterministic automaton
	s := &Scrubber{}
	total := 0
	for _, p := range pats {
		s.maxLen = max(s.maxLen, len(p))
		total += len(p)
		s.lower = append(s.lower, asciiLower(p))
	}
	// Redacted itself is matched too, so that a value that is part of it
	// ("sit") is not found again inside text already scrubbed: scrubbing
	// twice changes nothing (unless a value holds a parenthesis and so can
	// straddle the edge of a Redacted).
	s.redacted = -1
	if !seen[asciiLower(Redacted)] {
		s.redacted = len(pats)
		pats = append(pats, Redacted)
	}
	b := ahocorasick.NewAhoCorasickBuilder(ahocorasick.Opts{
		AsciiCaseInsensitive: true,
		MatchKind:            ahocorasick.StandardMatch,
		// A DFA matches about twice as fast but takes some 140 bytes
		// per pattern byte to build: used up to dfaMaxPatternBytes.
		DFA: total <= dfaMaxPatternBytes,
	})
	ac := b.Build(pats)
	s.ac = &ac
	return s
}

// asciiLower lower-cases the ASCII letters of s only.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Encodings returns the forms of v a Scrubber matches: v, its upper- and
// lower-case forms, hex, the stable inner part of its base64 encodings at
// offsets 0, 1 and 2 in both alphabets, its URL query and path escapes
// and its JSON string escapes, once and twice (with and without HTML
// escaping).
func Encodings(v string) []string {
	forms := []string{v, strings.ToUpper(v), strings.ToLower(v),
		hex.EncodeToString([]byte(v)), strings.ToUpper(hex.EncodeToString([]byte(v))),
		url.QueryEscape(v), url.PathEscape(v)}
	for _, enc := range []*base64.Encoding{base64.RawStdEncoding, base64.RawURLEncoding} {
		for off := range 3 {
			forms = append(forms, base64Inner(enc, v, off))
		}
	}
	// JSON escaping, once and twice (a JSON document inside a JSON
	// string: tool call arguments, logged events).
	for _, html := range []bool{true, false} {
		j := jsonEscape(v, html)
		forms = append(forms, j, jsonEscape(j, html))
	}
	return forms
}

// base64Inner is the part of the base64 encoding of v that does not
// depend on the bytes around it when v starts off bytes (0, 1 or 2) into
// a 3-byte group: the characters that also carry bits of the bytes before
// or after v are dropped.
func base64Inner(enc *base64.Encoding, v string, off int) string {
	in := make([]byte, off+len(v))
	copy(in[off:], v)
	out := enc.EncodeToString(in)
	if len(in)%3 != 0 {
		out = out[:len(out)-1] // the last character carries bits of what follows
	}
	drop := [3]int{0, 2, 3}[off] // the first characters carry bits of what precedes
	if drop >= len(out) {
		return ""
	}
	return out[drop:]
}

// jsonEscape is v as it appears inside a JSON string.
func jsonEscape(v string, html bool) string {
	var sb strings.Builder
	e := json.NewEncoder(&sb)
	e.SetEscapeHTML(html)
	if err := e.Encode(v); err != nil {
		return ""
	}
	s := strings.TrimSuffix(sb.String(), "\n")
	return s[1 : len(s)-1]
}

// spans returns the merged byte ranges of b that match.
func (s *Scrubber) spans(b []byte) [][2]int {
	var ms, red [][2]int
	it := s.ac.IterOverlappingByte(b)
	for m := it.Next(); m != nil; m = it.Next() {
		if m.Pattern() == s.redacted {
			red = append(red, [2]int{m.Start(), m.End()})
		} else {
			ms = append(ms, [2]int{m.Start(), m.End()})
		}
	}
	var out [][2]int
	for _, m := range ms {
		st, en := m[0], m[1]
		// Redactions never overlap one another, so they are sorted by
		// start and by end alike: skip a match inside one.
		if i := sort.Search(len(red), func(i int) bool { return red[i][1] >= en }); i < len(red) && red[i][0] <= st {
			continue
		}
		// Matches come in order of their end; merge overlapping ranges.
		for len(out) > 0 && st <= out[len(out)-1][1] {
			last := out[len(out)-1]
			out = out[:len(out)-1]
			st, en = min(st, last[0]), max(en, last[1])
		}
		out = append(out, [2]int{st, en})
	}
	return out
}

// Active reports whether s scrubs anything.
func (s *Scrubber) Active() bool { return s != nil && s.ac != nil }

// Contains reports whether b holds a sensitive value or one of its
// encodings.
func (s *Scrubber) Contains(b []byte) bool {
	if !s.Active() || len(b) == 0 {
		return false
	}
	return len(s.spans(b)) > 0
}

// String scrubs v.
func (s *Scrubber) String(v string) string {
	if !s.Active() || v == "" {
		return v
	}
	sp := s.spans([]byte(v))
	if len(sp) == 0 {
		return v
	}
	var sb strings.Builder
	sb.Grow(len(v))
	prev := 0
	for _, r := range sp {
		sb.WriteString(v[prev:r[0]])
		sb.WriteString(Redacted)
		prev = r[1]
	}
	sb.WriteString(v[prev:])
	return sb.String()
}

// Bytes scrubs b.
func (s *Scrubber) Bytes(b []byte) []byte {
	if !s.Active() || b == nil {
		return b
	}
	sp := s.spans(b)
	if len(sp) == 0 {
		return b
	}
	out := make([]byte, 0, len(b))
	prev := 0
	for _, r := range sp {
		out = append(out, b[prev:r[0]]...)
		out = append(out, Redacted...)
		prev = r[1]
	}
	return append(out, b[prev:]...)
}

// Stream scrubs text that arrives in pieces (streamed model text, a
// session's output), where a value may be split across pieces: it holds
// back only the tail that could still be the start of a match, so text
// that cannot be is passed on at once.
type Stream struct {
	s   *Scrubber
	buf string
}

// NewStream returns a Stream over s.
func (s *Scrubber) NewStream() *Stream { return &Stream{s: s} }

// Write adds piece and returns the scrubbed text that is now safe to
// pass on (possibly empty).
func (st *Stream) Write(piece string) string {
	if !st.s.Active() {
		return piece
	}
	st.buf += piece
	cut := len(st.buf) - st.s.pendingPrefix(st.buf)
	if cut <= 0 {
		return ""
	}
	for cut > 0 && cut < len(st.buf) && !utf8.RuneStart(st.buf[cut]) {
		cut--
	}
	// A match that crosses the cut is wholly in the buffer already (no
	// pattern is longer than maxLen): cut after it.
	for _, r := range st.s.spans([]byte(st.buf)) {
		if r[0] < cut && cut < r[1] {
			cut = r[1]
		}
	}
	out := st.s.String(st.buf[:cut])
	st.buf = st.buf[cut:]
	return out
}

// Flush returns the scrubbed rest of the text.
func (st *Stream) Flush() string {
	out := st.s.String(st.buf)
	st.buf = ""
	return out
}

// ContainsReader reports whether what r yields holds a sensitive value or
// one of its encodings, reading it in chunks that overlap by the longest
// pattern so a value split across chunks is still found.
func (s *Scrubber) ContainsReader(r io.Reader) (bool, error) {
	if !s.Active() {
		return false, nil
	}
	keep := s.maxLen - 1
	buf := make([]byte, keep+64<<10)
	have := 0
	for {
		n, err := r.Read(buf[have:])
		if n > 0 {
			if s.Contains(buf[:have+n]) {
				return true, nil
			}
			have += n
			if have > keep {
				copy(buf, buf[have-keep:have])
				have = keep
			}
		}
		if errors.Is(err, io.EOF) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
}

// MaskCutEnd masks the end of text that was cut (truncated) in the middle
// of a sensitive value or encoding: a suffix of at least MinSensitiveLen
// bytes that begins a pattern is replaced by Redacted. text must already
// be scrubbed. It may mask an innocent suffix that happens to begin a
// pattern; it never leaves a fragment.
func (s *Scrubber) MaskCutEnd(text string) string {
	if !s.Active() || len(text) < MinSensitiveLen {
		return text
	}
	k := s.pendingPrefix(text)
	if k < MinSensitiveLen {
		return text
	}
	return text[:len(text)-k] + Redacted
}

// pendingPrefix is the length of the longest suffix of text that begins
// a pattern (and may be completed by what follows).
func (s *Scrubber) pendingPrefix(text string) int {
	tail := asciiLower(text[max(0, len(text)-(s.maxLen-1)):])
	k := 0
	for _, p := range s.lower {
		k = max(k, overlap(tail, p))
	}
	return k
}

// MaskCutStart is MaskCutEnd for the start of text that follows a cut: a
// prefix that ends a pattern is replaced.
func (s *Scrubber) MaskCutStart(text string) string {
	if !s.Active() || len(text) < MinSensitiveLen {
		return text
	}
	head := reverse(asciiLower(text[:min(len(text), s.maxLen-1)]))
	k := 0
	for _, p := range s.lower {
		k = max(k, overlap(head, reverse(p)))
	}
	if k < MinSensitiveLen {
		return text
	}
	return Redacted + text[k:]
}

// overlap is the length of the longest suffix of a that is a proper
// prefix of p (Knuth-Morris-Pratt: linear in len(a)+len(p)).
func overlap(a, p string) int {
	if len(p) < 2 {
		return 0
	}
	fail := make([]int, len(p))
	for i, k := 1, 0; i < len(p); i++ {
		for k > 0 && p[i] != p[k] {
			k = fail[k-1]
		}
		if p[i] == p[k] {
			k++
		}
		fail[i] = k
	}
	q := 0
	for i := 0; i < len(a); i++ {
		for q > 0 && (q == len(p) || a[i] != p[q]) {
			q = fail[q-1]
		}
		if a[i] == p[q] {
			q++
		}
	}
	if q == len(p) { // a whole match: not a fragment (already scrubbed)
		q = fail[q-1]
	}
	return q
}

func reverse(s string) string {
	b := []byte(s)
	slices.Reverse(b)
	return string(b)
}
