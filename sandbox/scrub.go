package sandbox

import (
	"bytes"
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
// escaping (once, and twice for JSON held in a JSON string). They are
// also found where tools lay them out over lines: base64 or hex wrapped
// at any width, and the bytes of hex, octal and character dumps (xxd,
// hexdump, od; see layout.go). The zero value and nil scrub nothing.
type Scrubber struct {
	ac     *ahocorasick.AhoCorasick
	maxLen int
	// prefixes are the patterns, ASCII lower-cased, to find the
	// fragments left at the end of a text (a stream's, a cut's).
	prefixes []kmp
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
		s.prefixes = append(s.prefixes, newKMP(asciiLower(p)))
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

// spans returns the merged byte ranges of b to replace by Redacted.
func (s *Scrubber) spans(b []byte) [][2]int { return s.scan(b, false).spans }

// scanResult is what matching a text finds.
type scanResult struct {
	// spans are the merged ranges to replace by Redacted: the matches in
	// the text and, mapped back to it, those in its layout views.
	spans [][2]int
	// extents are the merged ranges from the first to the last byte of
	// each match (a match in a layout is replaced line by line).
	extents [][2]int
	// hold is where the text that may yet become part of a match begins
	// when the text may go on (a stream); held is the start of an
	// unfinished last line that may be part of a dump (len(text) if
	// none): the matches that reach into it are not final yet.
	hold, held int
}

// scan matches b and, with open, finds what of it must be held back
// until more of the text comes.
func (s *Scrubber) scan(b []byte, open bool) scanResult {
	sp := s.matches(b)
	ext := sp
	mode := closedText
	if open {
		mode = openEnd
	}
	lay := layoutViews(b, mode)
	if len(lay.views) > 0 {
		ext = slices.Clone(sp)
		for i := range lay.views {
			v := &lay.views[i]
			for _, m := range s.matches(v.data) {
				n := len(sp)
				if sp = v.source(sp, b, m[0], m[1]); len(sp) > n {
					ext = append(ext, [2]int{sp[n][0], sp[len(sp)-1][1]})
				}
			}
		}
		sp, ext = mergeSpans(sp), mergeSpans(ext)
	}
	r := scanResult{spans: sp, extents: ext, hold: len(b), held: lay.held}
	if !open {
		return r
	}
	r.hold = min(len(b)-s.pendingPrefix(b), lay.held)
	for i := range lay.tails {
		t := &lay.tails[i]
		if len(t.pieces) == 1 && t.pieces[0].kind == copied && t.pieces[0].end == len(b) {
			continue // a suffix of b: its pending prefix is b's
		}
		if k := s.pendingPrefix(t.data); k > 0 {
			r.hold = min(r.hold, t.sourceStart(b, len(t.data)-k))
		}
	}
	return r
}

// mergeSpans sorts sp and merges the ranges that overlap or touch.
func mergeSpans(sp [][2]int) [][2]int {
	slices.SortFunc(sp, func(x, y [2]int) int { return x[0] - y[0] })
	out := sp[:0]
	for _, r := range sp {
		if n := len(out); n > 0 && r[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// matches returns the merged byte ranges of b that a pattern matches,
// but for those inside a Redacted already there.
func (s *Scrubber) matches(b []byte) [][2]int {
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
	b := []byte(v)
	sp := s.spans(b)
	if len(sp) == 0 {
		return v
	}
	return string(redact(b, sp))
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
	return redact(b, sp)
}

// redact returns a copy of b with the ranges sp (sorted, apart) replaced
// by Redacted.
func redact(b []byte, sp [][2]int) []byte {
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
// back only the tail that could still be part of a match (the start of a
// pattern, of a wrapped encoding or of a dump's line), so text that
// cannot be is passed on at once. It keeps the line the held text starts
// in, already passed on, to read the layout of what follows.
type Stream struct {
	s *Scrubber
	// buf is the end of the text passed on (sent bytes), then the text
	// held back.
	buf  []byte
	sent int
	// marked says the text passed on ended in a Redacted.
	marked bool
}

// contextCap bounds the text passed on that a Stream keeps.
const contextCap = 4 << 10

// NewStream returns a Stream over s.
func (s *Scrubber) NewStream() *Stream { return &Stream{s: s} }

// Write adds piece and returns the scrubbed text that is now safe to
// pass on (possibly empty).
func (st *Stream) Write(piece string) string {
	if !st.s.Active() {
		return piece
	}
	st.buf = append(st.buf, piece...)
	r := st.s.scan(st.buf, true)
	cut := max(st.sent, r.hold)
	for cut > st.sent && cut < len(st.buf) && !utf8.RuneStart(st.buf[cut]) {
		cut--
	}
	for _, e := range r.extents {
		if e[0] < cut && cut < e[1] {
			// A match across the cut is whole in the buffer: pass it
			// on, unless it reaches into a line not finished that may
			// be a dump's, whose ASCII column is not known yet.
			cut = e[1]
			if e[1] > r.held {
				cut = max(st.sent, e[0])
			}
			break
		}
	}
	return st.pass(r.spans, cut)
}

// Flush returns the scrubbed rest of the text.
func (st *Stream) Flush() string {
	if !st.s.Active() {
		return ""
	}
	out := st.pass(st.s.scan(st.buf, false).spans, len(st.buf))
	st.buf, st.sent, st.marked = nil, 0, false
	return out
}

// pass returns buf[sent:cut] with the spans in it replaced, and keeps
// the rest, after the line cut is in (as far back as contextCap).
func (st *Stream) pass(spans [][2]int, cut int) string {
	var sb strings.Builder
	prev, marked := st.sent, st.marked
	for _, sp := range spans {
		if sp[1] <= st.sent {
			continue
		}
		if sp[0] >= cut {
			break
		}
		sb.Write(st.buf[prev:max(sp[0], st.sent)])
		// A span that began in the text passed on goes on from its
		// Redacted.
		if sp[0] >= st.sent || !st.marked {
			sb.WriteString(Redacted)
		}
		prev = min(sp[1], cut)
		marked = prev == cut
	}
	if prev < cut {
		sb.Write(st.buf[prev:cut])
		marked = false
	}
	keep := max(bytes.LastIndexByte(st.buf[:cut], '\n')+1, cut-contextCap, 0)
	st.buf = st.buf[:copy(st.buf, st.buf[keep:])]
	st.sent, st.marked = cut-keep, marked
	return sb.String()
}

// ContainsReader reports whether what r yields holds a sensitive value or
// one of its encodings, reading it in chunks and keeping of each what
// could still be part of a match, so a value split across chunks is
// still found.
func (s *Scrubber) ContainsReader(r io.Reader) (bool, error) {
	if !s.Active() {
		return false, nil
	}
	chunk := make([]byte, 64<<10)
	var buf []byte
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			buf = append(buf, chunk[:n]...)
			res := s.scan(buf, true)
			if len(res.spans) > 0 {
				return true, nil
			}
			keep := max(bytes.LastIndexByte(buf[:res.hold], '\n')+1, res.hold-contextCap, 0)
			buf = buf[:copy(buf, buf[keep:])]
		}
		if errors.Is(err, io.EOF) {
			return s.Contains(buf), nil
		}
		if err != nil {
			return false, err
		}
	}
}

// MaskCutEnd masks the end of text that was cut (truncated) in the middle
// of a sensitive value or encoding: a suffix of at least MinSensitiveLen
// bytes that begins a pattern is replaced by Redacted, and so is, in a
// wrapped encoding or a dump the text ends in, the part of its lines that
// begins one (with the line cut, when it may be a dump's). text must
// already be scrubbed. It may mask an innocent suffix that happens to
// begin a pattern; what it leaves of a value is shorter than
// MinSensitiveLen bytes, but for the token of a dump the cut splits.
func (s *Scrubber) MaskCutEnd(text string) string {
	if !s.Active() || len(text) < MinSensitiveLen {
		return text
	}
	b := []byte(text)
	mask := s.cutEndMask(b)
	if len(mask) == 0 {
		return text
	}
	return string(redact(b, mask))
}

// cutEndMask returns the ranges MaskCutEnd replaces in b.
func (s *Scrubber) cutEndMask(b []byte) [][2]int {
	var mask [][2]int
	if k := s.pendingPrefix(b); k >= MinSensitiveLen {
		mask = append(mask, [2]int{len(b) - k, len(b)})
	}
	lay := layoutViews(b, openEnd)
	dumped := false
	for i := range lay.tails {
		t := &lay.tails[i]
		if k := s.pendingPrefix(t.data); k >= MinSensitiveLen {
			mask = t.source(mask, b, len(t.data)-k, len(t.data))
			dumped = dumped || t.pieces[0].kind != copied
		}
	}
	if lay.held < len(b) && !dumped {
		// The line cut, read as a dump's on its own, with and without
		// its last token (which the cut may have split).
		for _, l := range [][]byte{b[lay.held:], wholeFields(b[lay.held:])} {
			for _, t := range layoutViews(l, closedText).tails {
				last := t.pieces[len(t.pieces)-1]
				dumped = dumped || s.pendingPrefix(t.data) >= MinSensitiveLen || s.pendingPrefix(t.data[:last.at]) >= MinSensitiveLen
			}
		}
	}
	if lay.held < len(b) && dumped {
		mask = append(mask, [2]int{lay.held, len(b)})
	}
	return mergeSpans(mask)
}

// pendingPrefix is the length of the longest suffix of text that begins
// a pattern (and may be completed by what follows).
func (s *Scrubber) pendingPrefix(text []byte) int {
	tail := text[max(0, len(text)-(s.maxLen-1)):]
	k := 0
	for _, p := range s.prefixes {
		k = max(k, p.overlap(tail))
	}
	return k
}

// MaskCutStart is MaskCutEnd for the start of text that follows a cut: a
// prefix that ends a pattern is replaced, and so is, in a wrapped
// encoding or a dump the text starts in, the part of its lines that ends
// one (with the first line, cut, before a dump's).
func (s *Scrubber) MaskCutStart(text string) string {
	if !s.Active() || len(text) < MinSensitiveLen {
		return text
	}
	b := []byte(text)
	mask := s.cutStartMask(b)
	if len(mask) == 0 {
		return text
	}
	return string(redact(b, mask))
}

// cutStartMask returns the ranges MaskCutStart replaces in b.
func (s *Scrubber) cutStartMask(b []byte) [][2]int {
	var mask [][2]int
	if k := s.pendingSuffix(b); k >= MinSensitiveLen {
		mask = append(mask, [2]int{0, k})
	}
	lay := layoutViews(b, openStart)
	for i := range lay.heads {
		h := &lay.heads[i]
		n := len(mask)
		// The first line may be too short to read as part of a wrapped
		// encoding without the cut: match the head as a whole too.
		for _, m := range s.matches(h.data) {
			mask = h.source(mask, b, m[0], m[1])
		}
		k := s.pendingSuffix(h.data)
		if k >= MinSensitiveLen {
			mask = h.source(mask, b, 0, k)
		}
		dump := slices.ContainsFunc(h.pieces, func(p piece) bool { return p.kind != copied })
		if dump && (k >= MinSensitiveLen || len(mask) > n && mask[n][0] < lay.cutLine[1]) {
			// The line cut goes whole: its ASCII column is not read.
			mask = append(mask, lay.cutLine)
		}
	}
	return mergeSpans(mask)
}

// pendingSuffix is the length of the longest prefix of text that ends a
// pattern.
func (s *Scrubber) pendingSuffix(text []byte) int {
	head := slices.Clone(text[:min(len(text), s.maxLen-1)])
	slices.Reverse(head)
	k := 0
	for _, p := range s.prefixes {
		k = max(k, newKMP(reverse(p.p)).overlap(head))
	}
	return k
}

// kmp is a pattern with its Knuth-Morris-Pratt failure table.
type kmp struct {
	p    string
	fail []int32
}

func newKMP(p string) kmp {
	fail := make([]int32, len(p))
	for i, k := 1, int32(0); i < len(p); i++ {
		for k > 0 && p[i] != p[k] {
			k = fail[k-1]
		}
		if p[i] == p[k] {
			k++
		}
		fail[i] = k
	}
	return kmp{p: p, fail: fail}
}

// overlap is the length of the longest suffix of a, ASCII lower-cased,
// that is a proper prefix of the pattern (linear in len(a)).
func (k kmp) overlap(a []byte) int {
	p, fail := k.p, k.fail
	if len(p) < 2 {
		return 0
	}
	q := int32(0)
	for _, c := range a {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		for q > 0 && (int(q) == len(p) || c != p[q]) {
			q = fail[q-1]
		}
		if c == p[q] {
			q++
		}
	}
	if int(q) == len(p) { // a whole match: not a fragment (already scrubbed)
		q = fail[q-1]
	}
	return int(q)
}

func reverse(s string) string {
	b := []byte(s)
	slices.Reverse(b)
	return string(b)
}
