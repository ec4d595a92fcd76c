package sandbox

import (
	"bytes"
	"slices"
)

// The matcher also runs over views of the text in which an encoding is
// laid out over several lines: a wrapped encoding (base64, hex) with its
// line breaks dropped, and the bytes a hex, octal or character dump
// shows. A view maps every one of its bytes back to the text it comes
// from, so that a match is replaced where it is in the text, line by
// line, leaving the layout around it (offsets, line breaks) alone.

const (
	// minWrap is the shortest run of encoding characters ending a line
	// that is joined to the next line: shorter ones are ordinary words.
	minWrap = 16
	// maxDumpLine bounds the length of a line read as part of a dump
	// (xxd -c 256, the widest, writes about 900 bytes).
	maxDumpLine = 1024
)

// pieceKind says how the bytes of a piece map to its text.
type pieceKind uint8

const (
	copied pieceKind = iota // data byte i is text byte start+i
	hexBE                   // data byte i is the hex digits at start+2i
	hexLE                   // data byte i is the hex digits at end-2i-2
	whole                   // every data byte is the whole of start..end
)

// A piece is a stretch of a view's data and the text it comes from.
type piece struct {
	at, n      int // data[at : at+n]
	start, end int // text[start:end]
	kind       pieceKind
	// ascii is the offset in the text of data[at]'s character in a
	// dump's ASCII column (data[at+i]'s is ascii+i); -1 if none.
	ascii int
}

// A view is text derived from a stretch of the scrubbed text, with the
// pieces that map it back.
type view struct {
	data   []byte
	pieces []piece
}

func (v *view) add(p piece, data ...byte) {
	p.at, p.n = len(v.data), len(data)
	v.data = append(v.data, data...)
	v.pieces = append(v.pieces, p)
}

// source appends to dst the ranges of text that data[a:b] comes from,
// merged where only blanks separate them: one range per line and
// column of a dump, per line of a wrapped encoding.
func (v *view) source(dst [][2]int, text []byte, a, b int) [][2]int {
	var rs [][2]int
	i, _ := slices.BinarySearchFunc(v.pieces, a, func(p piece, a int) int {
		if p.at+p.n <= a {
			return -1
		}
		return 1
	})
	for ; i < len(v.pieces) && v.pieces[i].at < b; i++ {
		p := v.pieces[i]
		j0, j1 := max(a, p.at)-p.at, min(b, p.at+p.n)-p.at
		switch p.kind {
		case copied:
			rs = append(rs, [2]int{p.start + j0, p.start + j1})
		case hexBE:
			rs = append(rs, [2]int{p.start + 2*j0, p.start + 2*j1})
		case hexLE:
			rs = append(rs, [2]int{p.end - 2*j1, p.end - 2*j0})
		default:
			rs = append(rs, [2]int{p.start, p.end})
		}
		if p.ascii >= 0 {
			rs = append(rs, [2]int{p.ascii + j0, p.ascii + j1})
		}
	}
	slices.SortFunc(rs, func(x, y [2]int) int { return x[0] - y[0] })
	base := len(dst)
	for _, r := range rs {
		if n := len(dst); n > base && (r[0] <= dst[n-1][1] || blanks(text[dst[n-1][1]:r[0]])) {
			dst[n-1][1] = max(dst[n-1][1], r[1])
			continue
		}
		dst = append(dst, r)
	}
	return dst
}

// sourceStart is where in the text the first byte of data[a:] comes from.
func (v *view) sourceStart(text []byte, a int) int {
	rs := v.source(nil, text, a, len(v.data))
	if len(rs) == 0 {
		return len(text)
	}
	return rs[0][0]
}

// openEnds says which ends of a text may be the middle of a layout.
type openEnds uint8

const (
	closedText openEnds = 0
	// openEnd: more may follow the text (a stream, text before a cut).
	openEnd openEnds = 1
	// openStart: the text may start in the middle of a line (after a
	// cut).
	openStart openEnds = 2
)

// layout is what layoutViews finds in a text.
type layout struct {
	views []view
	// tails are the views that reach the end of the text and, with
	// openEnd, may go on with what follows.
	tails []view
	// heads are, with openStart, the views that may have begun before
	// the start of the text: a wrapped run from its first line, a dump
	// block from its first or second line (the first, cut, may not read
	// as a dump's).
	heads []view
	// cutLine is, with openStart, the line a cut begins in (the first
	// that is not blank), without its line break.
	cutLine [2]int
	// held is the start of an unfinished last line that may be part of
	// a dump (a stream holds it back whole); len(text) if none.
	held int
}

// layoutViews returns the views of text: one for every run of a wrapped
// encoding over two lines or more, one or two (both byte orders) for
// every block of dump lines. With openEnd, the text's end may be
// followed by more of a wrapped run, and its last line, when unfinished,
// is left out of the dumps (held). With openStart, its first line may be
// the end of a longer one.
func layoutViews(text []byte, open openEnds) layout {
	sc := layoutScan{text: text, open: open&openEnd != 0, openStart: open&openStart != 0, lay: layout{held: len(text)}}
	for ls := 0; ls < len(text); sc.lineNo++ {
		le := ls + bytes.IndexByte(text[ls:], '\n')
		next := le + 1
		if le < ls { // the last line, unfinished
			le, next = len(text), len(text)
		}
		content := le
		if content > ls && text[content-1] == '\r' && (next > le || sc.open) {
			content--
		}
		sc.line(ls, content, next)
		ls = next
	}
	sc.endRun(true)
	sc.endBlock(true)
	if sc.cutOK { // a cut dump line, no block after it
		sc.lay.heads = append(sc.lay.heads, sc.cutHeads(nil, sc.cut.sig)...)
	}
	return sc.lay
}

// layoutScan builds a layout line by line.
type layoutScan struct {
	text      []byte
	open      bool // openEnd
	openStart bool
	lay       layout
	lineNo    int
	headLine  int // the first line that is not blank
	// cut is the headLine read as a dump's, if cutOK, with openStart.
	cut       dumpLine
	cutOK     bool
	run       *view  // the wrapped run being built
	runData   []byte // the data of the runs, run's from runAt
	runAt     int
	runHead   bool       // it starts at the start of the text
	block     []dumpLine // the dump block being built
	parser    dumpParser
	blockLine int // the number of its first line
}

// line takes the line text[ls:le] (without its line break), followed by
// the next one at next (len(text) if none).
func (sc *layoutScan) line(ls, le, next int) {
	last := next == len(sc.text)
	unfinished := last && (le == len(sc.text) || sc.text[len(sc.text)-1] != '\n')
	sc.wrapLine(ls, le, next, unfinished)
	if unfinished && sc.open && maybeDump(sc.text[ls:le]) {
		sc.lay.held = ls
		sc.endBlock(true)
		return
	}
	if sc.openStart && sc.lineNo == sc.headLine {
		// The line a cut begins in is read apart (cutHeads).
		sc.lay.cutLine = [2]int{ls, le}
		sc.cut, sc.cutOK = parseCutLine(sc.text, ls, le)
		return
	}
	dl, ok := sc.parser.line(sc.text, ls, le)
	if !ok || len(sc.block) > 0 && !sc.block[0].sig.continues(dl) {
		sc.endBlock(false)
	}
	if ok {
		if len(sc.block) == 0 {
			sc.blockLine = sc.lineNo
			sc.parser.restart(&dl)
		}
		sc.block = append(sc.block, dl)
	}
}

// wrapLine extends or ends the wrapped run with the line text[ls:le].
func (sc *layoutScan) wrapLine(ls, le, next int, unfinished bool) {
	t := sc.text
	cs := skipBlanks(t, ls, le)
	ce := max(cs, trimBlanks(t, ls, le))
	if cs == ce && unfinished && sc.open {
		return // only the indentation of a line so far
	}
	if cs == ce && sc.lineNo == sc.headLine {
		sc.headLine++ // a cut just before a line break
	}
	lead := cs
	for lead < ce && encChar(t[lead]) {
		lead++
	}
	whole := lead == ce
	if sc.run != nil {
		if lead > cs {
			sc.runAdd(cs, lead)
		}
		if !whole || lead == cs {
			sc.endRun(false)
		}
	}
	joins := sc.joins(ce, next, unfinished)
	if !joins {
		sc.endRun(false)
	}
	if sc.run != nil || ce == cs {
		return
	}
	trail := ce
	for trail > cs && encChar(t[trail-1]) {
		trail--
	}
	// With openStart, a first line all of encoding characters may be
	// the end of a longer one: it starts a run (a head) whatever its
	// length, even alone.
	head := sc.openStart && sc.lineNo == sc.headLine && trail == cs
	if !head && (!joins || ce-trail < minWrap && !(unfinished && sc.open)) {
		return
	}
	sc.run, sc.runHead, sc.runAt = &view{}, head, len(sc.runData)
	sc.runAdd(trail, ce)
	if !joins {
		sc.endRun(false)
	}
}

// runAdd adds text[start:end] to the wrapped run. The data of the runs
// of a text are kept in one buffer, so that a long one grows it without
// copying it again for each line.
func (sc *layoutScan) runAdd(start, end int) {
	r := sc.run
	r.pieces = append(r.pieces, piece{at: len(r.data), n: end - start, start: start, end: end, kind: copied, ascii: -1})
	sc.runData = append(sc.runData, sc.text[start:end]...)
	r.data = sc.runData[sc.runAt:len(sc.runData):len(sc.runData)]
}

// joins reports whether the line ending (before blanks) at ce may be
// joined to the next one, at next: it ends in an encoding character,
// and the next line starts with one (or may yet, in an open text).
func (sc *layoutScan) joins(ce, next int, unfinished bool) bool {
	t := sc.text
	if ce == 0 || !encChar(t[ce-1]) {
		return false
	}
	if unfinished {
		return sc.open
	}
	nx := skipBlanks(t, next, len(t))
	if nx == len(t) {
		return sc.open
	}
	return encChar(t[nx])
}

// endRun ends the wrapped run; at the end of the text, a run that may
// go on is a tail.
func (sc *layoutScan) endRun(atEnd bool) {
	r := sc.run
	sc.run = nil
	if r == nil {
		return
	}
	if len(r.pieces) > 1 {
		sc.lay.views = append(sc.lay.views, *r)
	}
	if atEnd && sc.open {
		sc.lay.tails = append(sc.lay.tails, *r)
	}
	if sc.runHead {
		sc.lay.heads = append(sc.lay.heads, *r)
	}
}

// endBlock ends the dump block; one that reaches the end of the text (or
// the line held back) is a tail.
func (sc *layoutScan) endBlock(atEnd bool) {
	if len(sc.block) == 0 {
		return
	}
	vs := blockViews(sc.text, sc.block)
	sc.lay.views = append(sc.lay.views, vs...)
	if atEnd {
		sc.lay.tails = append(sc.lay.tails, vs...)
	}
	if sc.openStart && sc.blockLine == sc.headLine+1 {
		sc.lay.heads = append(sc.lay.heads, sc.cutHeads(vs, sc.block[0].sig)...)
		sc.cutOK = false
	}
	sc.block = sc.block[:0]
}

// cutHeads returns the heads made of vs, the views (one per byte order
// of sig) of the dump block after the line a cut begins in, alone and
// after each reading of that line: the end of its ASCII column, and its
// data tokens, all or but the first (which the cut may have split).
func (sc *layoutScan) cutHeads(vs []view, sig dumpSig) []view {
	heads := slices.Clone(vs)
	frag := sc.cutFragment()
	for i := range sig.orders() {
		var next view
		var pre []view
		if i < len(vs) {
			next = vs[i]
			if frag.data != nil { // alone, it is the text itself
				pre = append(pre, frag)
			}
		}
		if l := sc.cut; sc.cutOK && l.sig.radix == sig.radix && (sig.radix == 16 || l.sig.width == sig.width) {
			l.sig = sig
			for _, toks := range [][][2]int{l.toks, l.toks[1:]} {
				if l.toks = toks; len(toks) > 0 {
					pre = append(pre, blockViews(sc.text, []dumpLine{l})[i])
				}
			}
		}
		for _, p := range pre {
			heads = append(heads, p.concat(next))
		}
	}
	return heads
}

// cutFragment is the view of the end of the line a cut begins in, read as the end
// of a dump's ASCII column: what follows its last two blanks, without
// the delimiters of hexdump -C and od -t x1z.
func (sc *layoutScan) cutFragment() view {
	t := sc.text
	ls := skipBlanks(t, sc.lay.cutLine[0], sc.lay.cutLine[1])
	le := trimBlanks(t, ls, sc.lay.cutLine[1])
	if i := bytes.LastIndex(t[ls:le], []byte("  ")); i >= 0 {
		ls = skipBlanks(t, ls+i, le)
	}
	if ls < le && (t[ls] == '|' || t[ls] == '>') {
		ls++
	}
	if le > ls && (t[le-1] == '|' || t[le-1] == '<') {
		le--
	}
	var f view
	if le > ls {
		f.add(piece{start: ls, end: le, kind: copied, ascii: -1}, t[ls:le]...)
	}
	return f
}

// concat returns the view of v's data followed by w's.
func (v view) concat(w view) view {
	var out view
	for _, p := range v.pieces {
		out.add(p, v.data[p.at:p.at+p.n]...)
	}
	for _, p := range w.pieces {
		out.add(p, w.data[p.at:p.at+p.n]...)
	}
	return out
}

// encChar reports whether c belongs to the base64 (standard or URL) or
// hex alphabet.
func encChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '+' || c == '/' || c == '=' || c == '-' || c == '_'
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }

func blanks(b []byte) bool {
	for _, c := range b {
		if !isBlank(c) {
			return false
		}
	}
	return true
}

func skipBlanks(b []byte, i, end int) int {
	for i < end && isBlank(b[i]) {
		i++
	}
	return i
}

func trimBlanks(b []byte, start, end int) int {
	for end > start && isBlank(b[end-1]) {
		end--
	}
	return end
}
