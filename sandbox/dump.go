package sandbox

import "strings"

// The dumps read, by the tools that write them:
//
//	xxd            00000000: 5333 6372 3374 2f54  S3cr3t/T   (-g, -c, -u, -e, -p)
//	hexdump -C, hd 00000000  53 33 63 72 33 74 2f 54  |S3cr3t/T|
//	hexdump        0000000 3353 7263                (little-endian words)
//	od             0000000 031523 071143            (octal words)
//	od -x, -t x1z  0000000 3353 7263, 000000 53 33 >S3<
//	od -b          0000000 123 063
//	od -c          0000000   S   3  \n 001
//	od -An -t x1    53 33 63 72                      (no offset column)
//
// A line is an optional offset column, data tokens of one width (the
// last may be shorter) and an optional ASCII column, recognised when it
// shows exactly the bytes decoded. Consecutive lines of one kind form a
// block, whose bytes are decoded in both byte orders when tokens hold
// more than one byte.

// dumpSig is what the lines of a dump block share.
type dumpSig struct {
	offset bool // an offset column comes first
	width  int  // digits (characters, for od -c) of a full data token
	radix  int  // 16, 8, or 'c' for a character dump (od -c)
}

// continues reports whether line l continues a block of kind s: the
// same kind, or one token shorter than s's (the last line of xxd).
func (s dumpSig) continues(l dumpLine) bool {
	return l.sig == s || l.sig.offset == s.offset && l.sig.radix == s.radix &&
		len(l.toks) == 1 && l.sig.width < s.width
}

// dumpLine is a parsed line of a dump.
type dumpLine struct {
	sig  dumpSig
	toks [][2]int // the data tokens (for od -c, the 4-column fields)
	// ascii is the start of the ASCII column, -1 if none; asciiLE says
	// it shows the little-endian decoding of the tokens.
	ascii   int
	asciiLE bool
}

// dumpParser parses the lines of dumps, reusing its buffers: the tokens
// of the lines it parses are kept in toks until restart.
type dumpParser struct {
	toks [][2]int
	dec  []byte
	ends []int
}

// restart moves the tokens of l, the first line of a block, to the
// start of p.toks, dropping those of the lines before it.
func (p *dumpParser) restart(l *dumpLine) {
	n := copy(p.toks, l.toks)
	p.toks = p.toks[:n]
	l.toks = p.toks[:n:n]
}

// parseDumpLine parses text[ls:le] as a line of a dump.
func parseDumpLine(text []byte, ls, le int) (dumpLine, bool) {
	var p dumpParser
	return p.line(text, ls, le)
}

// line parses text[ls:le] as a line of a dump.
func (p *dumpParser) line(text []byte, ls, le int) (dumpLine, bool) {
	if le-ls > maxDumpLine {
		return dumpLine{}, false
	}
	i := skipBlanks(text, ls, le)
	if i < le && text[i] == ':' && i == ls {
		i = skipBlanks(text, i+1, le) // cut just before the colon after its offset
	}
	if i == le || !isHex(text[i]) {
		return dumpLine{}, false
	}
	if dl, ok := p.hexLine(text, i, le); ok {
		return dl, true
	}
	return p.charLine(text, i, le)
}

// parseCutLine parses text[ls:le], the line a cut begins in, as a line
// of a dump: a line of one token may be the end of one.
func parseCutLine(text []byte, ls, le int) (dumpLine, bool) {
	if dl, ok := parseDumpLine(text, ls, le); ok {
		return dl, true
	}
	var p dumpParser
	p.tokens(text, skipBlanks(text, ls, le), le)
	toks := p.toks
	if len(toks) != 1 || le-ls > maxDumpLine {
		return dumpLine{}, false
	}
	sig := dumpSig{width: toks[0][1] - toks[0][0], radix: 16}
	switch {
	case (sig.width == 3 || sig.width == 6) && allOctal(text, toks):
		sig.radix = 8
	case sig.width%2 != 0 || sig.width > 32:
		return dumpLine{}, false
	}
	return dumpLine{sig: sig, toks: toks, ascii: -1}, true
}

// maybeDump reports whether an unfinished line may be, or become, a
// line of a dump.
func maybeDump(l []byte) bool {
	if len(l) > maxDumpLine {
		return false
	}
	if _, ok := parseDumpLine(l, 0, len(l)); ok {
		return true
	}
	if _, ok := parseDumpLine(wholeFields(l), 0, len(wholeFields(l))); ok {
		return true
	}
	for _, c := range l {
		if !isHex(c) && !isBlank(c) && c != ':' {
			return false
		}
	}
	return true
}

// wholeFields returns l, a line of od -c cut, without its last field if
// the cut split it.
func wholeFields(l []byte) []byte {
	i := skipBlanks(l, 0, len(l))
	j := scanHex(l, i, len(l))
	return l[:j+(len(l)-j)/4*4]
}

// tokens appends to p.toks the tokens of a line from its first at i:
// runs of hex digits separated by blanks, up to the first other text. It
// returns the index of the first, and whether it is followed by ':'
// (xxd's offset).
func (p *dumpParser) tokens(text []byte, i, le int) (from int, colon bool) {
	from = len(p.toks)
	for i < le {
		j := scanHex(text, i, le)
		if j == i {
			break
		}
		if len(p.toks) == from && j < le && text[j] == ':' {
			colon = true
			p.toks = append(p.toks, [2]int{i, j})
			j++
		} else if j < le && !isBlank(text[j]) {
			break
		} else {
			p.toks = append(p.toks, [2]int{i, j})
		}
		k := skipBlanks(text, j, le)
		if k == j {
			break
		}
		i = k
	}
	return from, colon
}

// hexLine parses a line of hex or octal tokens from its first token at
// i.
func (p *dumpParser) hexLine(text []byte, i, le int) (dumpLine, bool) {
	from, colon := p.tokens(text, i, le)
	dl, ok := p.hexData(text, p.toks[from:], colon, le)
	if !ok {
		p.toks = p.toks[:from]
		return dumpLine{}, false
	}
	end := from + len(dl.toks) // keep the data tokens, after the offset
	if dl.sig.offset {
		end++
	}
	p.toks = p.toks[:end]
	return dl, true
}

// hexData finds, in the tokens of a line, its data tokens and its ASCII
// column.
func (p *dumpParser) hexData(text []byte, toks [][2]int, colon bool, le int) (dumpLine, bool) {
	width := func(t [2]int) int { return t[1] - t[0] }
	offset := colon || len(toks) >= 2 && width(toks[0]) != width(toks[1])
	data := toks
	if offset {
		data = toks[1:]
	}
	if len(data) == 0 {
		return dumpLine{}, false
	}
	sig := dumpSig{offset: offset, width: width(data[0]), radix: 16}
	switch {
	case sig.width == 3 || sig.width == 6 && allOctal(text, data): // od -b, od
		sig.radix = 8
	case sig.width%2 != 0 || sig.width > 32:
		return dumpLine{}, false
	}
	n := 0
	for n < len(data) {
		w := width(data[n])
		if sig.radix == 8 {
			if w != sig.width || !octalToken(text[data[n][0]:data[n][1]]) {
				break
			}
		} else if w != sig.width {
			if w < sig.width && w%2 == 0 {
				n++ // xxd's last group may be short
			}
			break
		}
		n++
	}
	data = data[:n:n]
	if len(data) == 0 || !offset && len(data) < 2 {
		return dumpLine{}, false
	}
	dl := dumpLine{sig: sig, toks: data, ascii: -1}
	for _, little := range sig.orders() {
		p.dec, p.ends = decodeTokens(p.dec[:0], p.ends[:0], text, data, sig, little)
		for k := len(data); k >= 1; k-- {
			if a := asciiColumn(text, data[k-1][1], le, p.dec[:p.ends[k-1]]); a >= 0 {
				dl.toks, dl.ascii, dl.asciiLE = data[:k:k], a, little
				return dl, true
			}
		}
	}
	return dl, true
}

// allOctal reports whether toks, up to the first of another width, are
// all octal tokens.
func allOctal(text []byte, toks [][2]int) bool {
	for _, t := range toks {
		if t[1]-t[0] != toks[0][1]-toks[0][0] {
			break
		}
		if !octalToken(text[t[0]:t[1]]) {
			return false
		}
	}
	return true
}

// orders are the byte orders a token of this kind is decoded in: big
// endian (in the order of its digits), and little endian when a token
// holds more than one byte.
func (s dumpSig) orders() []bool {
	if s.radix == 16 && s.width > 2 || s.radix == 8 && s.width == 6 {
		return []bool{false, true}
	}
	return []bool{false}
}

// decodeTokens appends the bytes of toks to dec, and to ends the length
// of dec after each token.
func decodeTokens(dec []byte, ends []int, text []byte, toks [][2]int, sig dumpSig, little bool) ([]byte, []int) {
	for _, t := range toks {
		dec = decodeToken(dec, text[t[0]:t[1]], sig, little)
		ends = append(ends, len(dec))
	}
	return dec, ends
}

// decodeToken appends the bytes of the token d to dec.
func decodeToken(dec, d []byte, sig dumpSig, little bool) []byte {
	start := len(dec)
	switch sig.radix {
	case 16:
		for i := 0; i+1 < len(d); i += 2 {
			dec = append(dec, hexVal(d[i])<<4|hexVal(d[i+1]))
		}
	case 8:
		v := 0
		for _, c := range d {
			v = v<<3 | int(c-'0')
		}
		if sig.width == 3 {
			return append(dec, byte(v))
		}
		dec = append(dec, byte(v>>8), byte(v))
	default:
		c, _, _ := charField(d)
		return append(dec, c)
	}
	if little {
		for i, j := start, len(dec)-1; i < j; i, j = i+1, j-1 {
			dec[i], dec[j] = dec[j], dec[i]
		}
	}
	return dec
}

// asciiColumn is the start of the ASCII column showing dec at the end of
// the line text[:le] after its tokens (which end at tokEnd), -1 if there
// is none: the characters, '.' for bytes that are not printable ASCII,
// after blanks, possibly between '|' (hexdump -C) or '>' and '<' (od -t
// x1z).
func asciiColumn(text []byte, tokEnd, le int, dec []byte) int {
	if le > tokEnd && (text[le-1] == '|' || text[le-1] == '<') {
		opening := byte('|')
		if text[le-1] == '<' {
			opening = '>'
		}
		if a := asciiAt(text, tokEnd+1, le-1, dec); a > 0 && text[a-1] == opening && blanks(text[tokEnd:a-1]) {
			return a
		}
	}
	if a := asciiAt(text, tokEnd, le, dec); a > 0 && blanks(text[tokEnd:a]) {
		return a
	}
	return -1
}

// asciiAt is where the rendering of dec starts if text[:end] ends with
// it after at least one byte past from; -1 if not.
func asciiAt(text []byte, from, end int, dec []byte) int {
	start := end - len(dec)
	if start <= from {
		return -1
	}
	for i, c := range dec {
		if c < 0x20 || c > 0x7e {
			c = '.'
		}
		if text[start+i] != c {
			return -1
		}
	}
	return start
}

// charLine parses a line of od -c (and hexdump -c) from its offset
// at i: 4-column fields after it, each a character, a backslash escape
// or three octal digits.
func (p *dumpParser) charLine(text []byte, i, le int) (dumpLine, bool) {
	j := scanHex(text, i, le)
	if j-i < 4 || le-j < 4 || (le-j)%4 != 0 {
		return dumpLine{}, false
	}
	for f := j; f < le; f += 4 {
		if _, _, ok := charField(text[f : f+4]); !ok {
			return dumpLine{}, false
		}
	}
	from := len(p.toks)
	for f := j; f < le; f += 4 {
		p.toks = append(p.toks, [2]int{f, f + 4})
	}
	return dumpLine{sig: dumpSig{offset: true, width: 4, radix: 'c'}, toks: p.toks[from:len(p.toks):len(p.toks)], ascii: -1}, true
}

// charField decodes a 4-column field of od -c: its byte, where in the
// field the text showing it starts, and whether it is one.
func charField(f []byte) (byte, int, bool) {
	switch {
	case f[0] == ' ' && f[1] == ' ' && f[2] == ' ' && f[3] >= 0x20 && f[3] <= 0x7e:
		return f[3], 3, true
	case f[0] == ' ' && f[1] == ' ' && f[2] == '\\':
		if i := strings.IndexByte("0abtnvfr", f[3]); i >= 0 {
			return [...]byte{0, 7, 8, 9, 10, 11, 12, 13}[i], 2, true
		}
	case f[0] == ' ' && octalToken(f[1:]):
		return byte((f[1]-'0')<<6 | (f[2]-'0')<<3 | (f[3] - '0')), 1, true
	}
	return 0, 0, false
}

// octalToken reports whether d is the octal digits of a byte (3 digits)
// or of a 16-bit word (6).
func octalToken(d []byte) bool {
	for _, c := range d {
		if c < '0' || c > '7' {
			return false
		}
	}
	return len(d) == 3 && d[0] <= '3' || len(d) == 6 && d[0] <= '1'
}

// blockViews decodes a dump block into views, one per byte order.
func blockViews(text []byte, block []dumpLine) []view {
	sig := block[0].sig
	var vs []view
	var scratch []byte
	ntoks := 0
	for _, l := range block {
		ntoks += len(l.toks)
	}
	for _, little := range sig.orders() {
		v := view{data: make([]byte, 0, ntoks*max(1, sig.width/2)), pieces: make([]piece, 0, ntoks)}
		for _, l := range block {
			lineAt := len(v.data)
			for _, t := range l.toks {
				scratch = decodeToken(scratch[:0], text[t[0]:t[1]], sig, little)
				p := piece{start: t[0], end: t[1], kind: whole, ascii: -1}
				switch {
				case sig.radix == 'c':
					_, off, _ := charField(text[t[0]:t[1]])
					p.start += off
				case sig.radix == 16 && little:
					p.kind = hexLE
				case sig.radix == 16:
					p.kind = hexBE
				}
				if l.ascii >= 0 && l.asciiLE == little {
					p.ascii = l.ascii + len(v.data) - lineAt
				}
				v.add(p, scratch...)
			}
		}
		vs = append(vs, v)
	}
	return vs
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func scanHex(b []byte, i, end int) int {
	for i < end && isHex(b[i]) {
		i++
	}
	return i
}

func hexVal(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}
