package sandbox

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/agentctl/agentctl/internal/testenv"
)

// layoutTools are the commands whose output spreads an encoding of their
// input over several lines. edge is how many characters derived from a
// value may stay at the edges of its encoding (base64 characters that
// also carry bits of the bytes around it); whole says a token holding a
// byte of the value and one of its neighbour is replaced whole (od's
// octal words), and that a cut splitting one leaves up to its width of
// digits that cannot be read.
var layoutTools = []struct {
	cmd   string
	edge  int
	whole bool
}{
	{cmd: "base64", edge: 2},                   // wrapped at 76
	{cmd: "base64 -w 64", edge: 2},             // PEM's width
	{cmd: "base64 -w0 | fold", edge: 2},        // wrapped at 80
	{cmd: "base64 | fold -w 64", edge: 2},      // 64, 12, 64, 12, ...
	{cmd: "base64 -w 17", edge: 2},             // an odd width
	{cmd: "base64 | sed 's/$/\\r/'", edge: 2},  // CRLF line ends
	{cmd: "base64 | sed 's/^/    /'", edge: 2}, // indented
	{cmd: "basenc --base64url", edge: 2},       // URL alphabet, wrapped at 76
	{cmd: "xxd -p"},                            // hex wrapped at 60
	{cmd: "xxd"},
	{cmd: "xxd -g1 -u"},
	{cmd: "xxd -e"}, // little-endian groups of 4 bytes
	{cmd: "xxd -c 24 -g 3"},
	{cmd: "hexdump -C"},
	{cmd: "hexdump"}, // little-endian 16-bit words
	{cmd: "hexdump -c"},
	{cmd: "od", whole: true}, // octal 16-bit words
	{cmd: "od -x"},
	{cmd: "od -b", whole: true}, // the first octal digit of a printable byte hardly varies
	{cmd: "od -c"},
	{cmd: "od -An -tx1"},
	{cmd: "od -Ax -tx1z"},
}

// printable returns n random printable ASCII bytes.
func printable(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(0x21 + r.IntN(0x7f-0x21))
	}
	return string(b)
}

// unlike returns a printable value as long as v that differs from it in
// both hex digits of every byte: every hex digit and base64 character
// of its encodings differs from v's.
func unlike(r *rand.Rand, v string) string {
	b := []byte(v)
	for i, c := range b {
		for {
			d := byte(0x21 + r.IntN(0x7f-0x21))
			if d>>4 != c>>4 && d&15 != c&15 {
				b[i] = d
				break
			}
		}
	}
	return string(b)
}

// layoutCase is a value written by a tool between other bytes.
type layoutCase struct{ before, secret, after string }

func layoutCases(r *rand.Rand) []layoutCase {
	var cs []layoutCase
	long := printable(r, 94)
	for _, before := range []int{0, 1, 2, 17, 40} {
		for _, after := range []int{0, 33} {
			cs = append(cs, layoutCase{printable(r, before), long, printable(r, after)})
		}
	}
	for _, n := range []int{8, 20} {
		short := printable(r, n)
		for _, before := range []int{0, 1, 2, 15} {
			cs = append(cs, layoutCase{printable(r, before), short, printable(r, 33)})
		}
	}
	return cs
}

// alternates is how many other values (unlike the value) each case is
// also run with, to find which characters of the output it determines.
const alternates = 3

// runTool runs cmd (sh -c) over each input, all at once, and returns
// the outputs; it stops the test when a tool is missing.
func runTool(t *testing.T, cmd string, inputs []string) [][]byte {
	t.Helper()
	for _, f := range strings.Fields(cmd) {
		if f == "base64" || f == "basenc" || f == "xxd" || f == "hexdump" || f == "od" || f == "fold" || f == "sed" {
			if _, err := exec.LookPath(f); err != nil {
				testenv.Missing(t, "%s is not installed", f)
			}
		}
	}
	dir := t.TempDir()
	for i, in := range inputs {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(i)), []byte(in), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	script := fmt.Sprintf(`i=0; while [ -e "$i" ]; do { %s; } < "$i" > "$i.out" || exit 1; i=$((i+1)); done`, cmd)
	c := exec.Command("sh", "-c", script)
	c.Dir = dir
	if out, err := c.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	outs := make([][]byte, len(inputs))
	for i := range inputs {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprint(i)+".out"))
		if err != nil {
			t.Fatal(err)
		}
		outs[i] = b
	}
	return outs
}

// derivedFrom marks the bytes of out that differ in any of alts: the
// output of the same command over the same bytes around another value.
func derivedFrom(t *testing.T, out []byte, alts [][]byte) []bool {
	t.Helper()
	d := make([]bool, len(out))
	for _, a := range alts {
		if len(a) != len(out) {
			t.Fatalf("outputs of %d and %d bytes: the layout depends on the value", len(out), len(a))
		}
		for i := range out {
			d[i] = d[i] || a[i] != out[i]
		}
	}
	return d
}

// checkScrubbed checks what s replaces in out, whose bytes derived marks
// as determined by the value: all of them (but edge at the edges of a
// base64 encoding), and nothing else but blanks (and, with whole, the
// rest of a token holding some).
func checkScrubbed(t *testing.T, s *Scrubber, out []byte, derived []bool, edge int, whole bool) {
	t.Helper()
	in := make([]bool, len(out))
	for _, sp := range s.spans(out) {
		for i := sp[0]; i < sp[1]; i++ {
			in[i] = true
		}
	}
	var missed []int
	for i, d := range derived {
		if d && !in[i] {
			missed = append(missed, i)
		}
	}
	if len(missed) > edge {
		t.Errorf("%d characters of the value's encoding survive (at %v):\n%s\nscrubbed:\n%s", len(missed), missed, out, s.String(string(out)))
	}
	for i, r := range in {
		if r && !derived[i] && !isBlank(out[i]) && !(whole && tokenDerived(out, derived, i)) {
			t.Errorf("unrelated byte %q at %d replaced:\n%s\nscrubbed:\n%s", out[i], i, out, s.String(string(out)))
			break
		}
	}
	// Every run of six derived characters or more is gone from the text
	// scrubbed.
	scrubbed := s.String(string(out))
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && derived[j] {
			j++
		}
		if j-i >= 6 && strings.Contains(scrubbed, string(out[i:j])) {
			t.Errorf("%q survives in:\n%s", out[i:j], scrubbed)
		}
		i = j + 1
	}
}

// tokenDerived reports whether the blank-separated token around out[i]
// holds a derived byte.
func tokenDerived(out []byte, derived []bool, i int) bool {
	lo, hi := i, i
	for lo > 0 && !isBlank(out[lo-1]) && out[lo-1] != '\n' {
		lo--
	}
	for hi < len(out) && !isBlank(out[hi]) && out[hi] != '\n' {
		hi++
	}
	for k := lo; k < hi; k++ {
		if derived[k] {
			return true
		}
	}
	return false
}

// TestScrubberToolLayouts runs values of 94, 20 and 8 random bytes,
// between other bytes, through the tools that wrap or dump their input
// (base64, fold, xxd, hexdump, od) and checks that every character of
// the output the value determines is scrubbed, and nothing else; also
// through a Stream in pieces, and ContainsReader one byte at a time.
func TestScrubberToolLayouts(t *testing.T) {
	r := rand.New(rand.NewChaCha8([32]byte{'l', 'a', 'y', 'o', 'u', 't'}))
	cases := layoutCases(r)
	var inputs []string
	for _, c := range cases {
		inputs = append(inputs, c.before+c.secret+c.after)
		for range alternates {
			inputs = append(inputs, c.before+unlike(r, c.secret)+c.after)
		}
	}
	for _, tool := range layoutTools {
		t.Run(tool.cmd, func(t *testing.T) {
			outs := runTool(t, tool.cmd, inputs)
			for i, c := range cases {
				out, alts := outs[i*(alternates+1)], outs[i*(alternates+1)+1:(i+1)*(alternates+1)]
				s := NewScrubber([]string{c.secret})
				checkScrubbed(t, s, out, derivedFrom(t, out, alts), tool.edge, tool.whole)
				want := s.String(string(out))
				for _, size := range []int{1, 5, 64} {
					if got := streamPieces(s, string(out), size); got != want {
						t.Errorf("case %d, pieces of %d: stream gave\n%s\nString gave\n%s", i, size, got, want)
					}
				}
				if ok, err := s.ContainsReader(iotest.OneByteReader(bytes.NewReader(out))); !ok || err != nil {
					t.Errorf("case %d: ContainsReader = %v, %v", i, ok, err)
				}
				if s.Contains(alts[0]) || s.String(string(alts[0])) != string(alts[0]) {
					t.Errorf("case %d: another value's output is scrubbed:\n%s", i, s.String(string(alts[0])))
				}
			}
		})
	}
}

// TestMaskCutLayouts cuts the output of the tools anywhere in a value
// (as an output's head and tail are kept around a truncation marker, and
// a preview is cut) and checks that what each side keeps of the value's
// characters is masked, but for a fragment shorter than MinSensitiveLen
// bytes.
func TestMaskCutLayouts(t *testing.T) {
	r := rand.New(rand.NewChaCha8([32]byte{'c', 'u', 't'}))
	c := layoutCase{printable(r, 20), printable(r, 94), printable(r, 20)}
	inputs := []string{c.before + c.secret + c.after}
	for range alternates {
		inputs = append(inputs, c.before+unlike(r, c.secret)+c.after)
	}
	s := NewScrubber([]string{c.secret})
	// What a fragment of two bytes shows: four hex digits, two ASCII
	// characters, a token the cut splits or base64 characters at the
	// edges.
	const fragment = 8
	for _, tool := range layoutTools {
		t.Run(tool.cmd, func(t *testing.T) {
			outs := runTool(t, tool.cmd, inputs)
			out, derived := outs[0], derivedFrom(t, outs[0], outs[1:])
			for p := range out {
				head, tail := out[:p], out[p:]
				if s.Contains(head) || s.Contains(tail) {
					continue // a whole match on one side: not a fragment
				}
				fragment := fragment
				if tool.whole {
					fragment += 6
				}
				if n := uncovered(derived[:p], s.cutEndMask(head)); n > fragment {
					t.Errorf("cut at %d: %d characters of the value before it survive MaskCutEnd:\n%s", p, n, s.MaskCutEnd(string(head)))
				}
				if n := uncovered(derived[p:], s.cutStartMask(tail)); n > fragment {
					t.Errorf("cut at %d: %d characters of the value after it survive MaskCutStart:\n%s", p, n, s.MaskCutStart(string(tail)))
				}
			}
		})
	}
}

// uncovered counts the derived positions outside mask.
func uncovered(derived []bool, mask [][2]int) int {
	n := 0
	for i, d := range derived {
		if d && !slices.ContainsFunc(mask, func(m [2]int) bool { return m[0] <= i && i < m[1] }) {
			n++
		}
	}
	return n
}

func streamPieces(s *Scrubber, text string, size int) string {
	st := s.NewStream()
	var out strings.Builder
	for i := 0; i < len(text); i += size {
		out.WriteString(st.Write(text[i:min(i+size, len(text))]))
	}
	out.WriteString(st.Flush())
	return out.String()
}

// wrap lays enc out in lines of width columns, each after indent and
// ending in eol.
func wrap(enc string, width int, indent, eol string) string {
	var sb strings.Builder
	for i := 0; i < len(enc); i += width {
		sb.WriteString(indent + enc[i:min(i+width, len(enc))] + eol)
	}
	return sb.String()
}

// TestScrubberWrappedEncodings covers base64 (both alphabets, the three
// offsets) and hex wrapped at any width from 16 columns, with LF or CRLF
// line ends, indented or not, after text on the first line.
func TestScrubberWrappedEncodings(t *testing.T) {
	r := rand.New(rand.NewChaCha8([32]byte{'w', 'r', 'a', 'p'}))
	secret := printable(r, 94)
	s := NewScrubber([]string{secret})
	encoders := map[string]func([]byte) string{
		"std": base64.StdEncoding.EncodeToString,
		"url": base64.URLEncoding.EncodeToString,
		"hex": hex.EncodeToString,
	}
	for name, enc := range encoders {
		for _, before := range []string{"", "x", "xy", "xyz0123456789"} {
			for _, width := range []int{16, 31, 60, 64, 76, 80, 100} {
				for _, eol := range []string{"\n", "\r\n"} {
					for _, indent := range []string{"", "  "} {
						layout := func(v string) string {
							return "secret: " + wrap(enc([]byte(before+v+"tail")), width, indent, eol) + "done" + eol
						}
						out := layout(secret)
						var alts [][]byte
						for range alternates {
							alts = append(alts, []byte(layout(unlike(r, secret))))
						}
						t.Run(fmt.Sprintf("%s/%d+%d/%q/%q", name, len(before), width, eol, indent), func(t *testing.T) {
							checkScrubbed(t, s, []byte(out), derivedFrom(t, []byte(out), alts), 2, false)
						})
					}
				}
			}
		}
	}
}

// TestScrubberLayoutsExactly shows what a scrubbed layout looks like:
// the value's part of each line is replaced, the rest of the layout
// (line breaks, offsets, the bytes around the value) kept.
func TestScrubberLayoutsExactly(t *testing.T) {
	const secret = "correct-horse-battery-staple"
	s := NewScrubber([]string{secret})
	for _, tc := range []struct{ name, in, want string }{{
		name: "base64 wrapped at 16",
		in:   "key:\n" + wrap(base64.StdEncoding.EncodeToString([]byte(secret)), 16, "", "\n") + "end\n",
		want: "key:\n(sensitive)\n(sensitive)\n(sensitive)Q==\nend\n",
	}, {
		name: "xxd",
		in: "00000000: 3e3e 636f 7272 6563 742d 686f 7273 652d  >>correct-horse-\n" +
			"00000010: 6261 7474 6572 792d 7374 6170 6c65 3c3c  battery-staple<<\n" +
			"00000020: 0a                                       .\n",
		want: "00000000: 3e3e (sensitive)  >>(sensitive)\n" +
			"00000010: (sensitive) 3c3c  (sensitive)<<\n" +
			"00000020: 0a                                       .\n",
	}, {
		name: "hexdump -C",
		in: "00000000  3e 3e 63 6f 72 72 65 63  74 2d 68 6f 72 73 65 2d  |>>correct-horse-|\n" +
			"00000010  62 61 74 74 65 72 79 2d  73 74 61 70 6c 65 3c 3c  |battery-staple<<|\n" +
			"00000020\n",
		want: "00000000  3e 3e (sensitive)  |>>(sensitive)|\n" +
			"00000010  (sensitive) 3c 3c  |(sensitive)<<|\n" +
			"00000020\n",
	}} {
		if got := s.String(tc.in); got != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}

// TestScrubberLeavesLookalikes checks that text that looks like a wrapped
// encoding or a dump, but of something else, is left as it is, and so
// are the lines of a dump around the value.
func TestScrubberLeavesLookalikes(t *testing.T) {
	r := rand.New(rand.NewChaCha8([32]byte{'l', 'o', 'o', 'k'}))
	secret := printable(r, 94)
	s := NewScrubber([]string{secret, "hunter2-token"})
	other := []byte(printable(r, 300))
	for name, text := range map[string]string{
		"base64":    wrap(base64.StdEncoding.EncodeToString(other), 76, "", "\n"),
		"hex":       wrap(hex.EncodeToString(other), 60, "", "\n"),
		"xxd":       "00000000: 5333 6372 3374 2f54 306b 2b65 6e22 7826  S3cr3t/T0k+en\"x&\n00000010: 793f                                     y?\n",
		"hexdump":   "00000000  68 75 6e 74 65 72 33 2d  74 6f 6b 65 6e 20 6e 6f  |hunter3-token no|\n",
		"od -c":     "0000000   h   u   n   t   e   r   2   -   t   o   k   e   x\n",
		"prose":     "The quick brown fox jumps over the lazy dog\nand then some more text follows here\n",
		"hashes":    "d41d8cd98f00b204e9800998ecf8427e  empty.txt\n0cc175b9c0f1b6a831c399e269772661  a.txt\n",
		"git log":   "8a5d48b sandbox: a change\nc42f790 cmd: another change\n",
		"long word": "supercalifragilisticexpialidocious\nantidisestablishmentarianism\n",
		"numbers":   "2024 10 11 12\n2025 13 14 15\n",
	} {
		if got := s.String(text); got != text {
			t.Errorf("%s: %q scrubbed to %q", name, text, got)
		}
	}
	// A dump of a file that holds the value keeps its other lines.
	data := append(append(append([]byte{}, other[:100]...), secret...), other[100:200]...)
	dump := xxdDump(data)
	lines := strings.SplitAfter(dump, "\n")
	got := strings.SplitAfter(s.String(dump), "\n")
	if len(got) != len(lines) {
		t.Fatalf("%d lines scrubbed to %d", len(lines), len(got))
	}
	for i, l := range lines {
		touched := i*16+16 > 100 && i*16 < 100+len(secret)
		if !touched && got[i] != l {
			t.Errorf("line %d changed: %q to %q", i, l, got[i])
		}
		if touched && got[i] == l {
			t.Errorf("line %d kept: %q", i, l)
		}
	}
}

// TestStreamHoldsLayouts checks a Stream against the cases where it
// must hold text back: an unfinished dump line, the end of a line of a
// wrapped encoding, the second of two values in one base64 text.
func TestStreamHoldsLayouts(t *testing.T) {
	a, b := "first-secret-value-0123456789", "second-secret-value-9876543210"
	s := NewScrubber([]string{a, b})
	data := []byte("x=" + a + "\ny=" + b + "\n")
	for name, text := range map[string]string{
		"base64 at 20": wrap(base64.StdEncoding.EncodeToString(data), 20, "", "\n"),
		"base64 at 76": wrap(base64.StdEncoding.EncodeToString(data), 76, "", "\r\n"),
		"xxd -p":       wrap(hex.EncodeToString(data), 60, "", "\n"),
		"xxd":          xxdDump(data),
	} {
		want := s.String(text)
		if strings.Count(want, Redacted) < 2 {
			t.Fatalf("%s: %q scrubbed to %q", name, text, want)
		}
		for size := 1; size <= 40; size++ {
			if got := streamPieces(s, text, size); got != want {
				t.Errorf("%s, pieces of %d:\n%s\nwant\n%s", name, size, got, want)
			}
		}
		r := rand.New(rand.NewPCG(1, uint64(len(text))))
		for range 50 {
			st := s.NewStream()
			var out strings.Builder
			for rest := text; rest != ""; {
				n := min(len(rest), 1+r.IntN(90))
				out.WriteString(st.Write(rest[:n]))
				rest = rest[n:]
			}
			out.WriteString(st.Flush())
			if out.String() != want {
				t.Errorf("%s, random pieces:\n%s\nwant\n%s", name, out.String(), want)
				break
			}
		}
	}
}

// TestContainsReaderLayoutAcrossChunks finds a dump of a value that
// spans ContainsReader's 64 KiB chunks.
func TestContainsReaderLayoutAcrossChunks(t *testing.T) {
	secret := "a-sensitive-value-0123456789-abcdefghij"
	s := NewScrubber([]string{secret})
	data := bytes.Repeat([]byte{0}, 48<<10)
	for at := 16<<10 - 40; at < 16<<10; at += 7 {
		dump := xxdDump(append(append([]byte{}, data[:at]...), secret...))
		if ok, err := s.ContainsReader(iotest.HalfReader(strings.NewReader(dump))); !ok || err != nil {
			t.Errorf("value at %d: ContainsReader = %v, %v", at, ok, err)
		}
	}
}

// xxdDump is data as xxd shows it.
func xxdDump(data []byte) string {
	var sb strings.Builder
	for off := 0; off < len(data); off += 16 {
		line := data[off:min(off+16, len(data))]
		var groups strings.Builder
		for i := 0; i < len(line); i += 2 {
			fmt.Fprintf(&groups, "%x ", line[i:min(i+2, len(line))])
		}
		ascii := bytes.Map(func(r rune) rune {
			if r < 0x20 || r > 0x7e {
				return '.'
			}
			return r
		}, line)
		fmt.Fprintf(&sb, "%08x: %-40s %s\n", off, groups.String(), ascii)
	}
	return sb.String()
}

// FuzzStreamLayouts checks that whatever the text and however it is cut
// into pieces, a Stream passes on nothing the matcher still finds (and
// that masking either end of a cut text does not fail).
func FuzzStreamLayouts(f *testing.F) {
	f.Add("the-secret-value", "00000000: 7468 652d 7365 6372 6574 2d76 616c 7565  the-secret-value\n", uint8(3))
	f.Add("the-secret-value", wrap(base64.StdEncoding.EncodeToString([]byte("xx the-secret-value yy")), 16, "", "\n"), uint8(5))
	f.Add("abcdef", "0000000   a   b   c\n0000003   d   e   f\n", uint8(1))
	f.Add("abcdef", "00000000  61 62 63 64 65 66  |abcdef|\n00000006\n", uint8(7))
	f.Add("abcdef", "0000000 061141 062143 063145\n0000006\n", uint8(2))
	f.Fuzz(func(t *testing.T, secret, text string, size uint8) {
		if len(secret) < MinSensitiveLen || size == 0 || strings.ContainsAny(secret, "()") {
			return
		}
		s := NewScrubber([]string{secret})
		if got := streamPieces(s, text, int(size)); s.Contains([]byte(got)) {
			t.Fatalf("streamed in pieces of %d, %q gives %q, which still holds a match", size, text, got)
		}
		s.MaskCutEnd(text[:len(text)/2])
		s.MaskCutStart(text[len(text)/2:])
	})
}
