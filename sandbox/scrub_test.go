package sandbox

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
)

// encodedForms is every way a test writes value into surrounding text:
// each must be scrubbed.
func encodedForms(v string) map[string]string {
	j, _ := json.Marshal(v)
	return map[string]string{
		"literal":    v,
		"upper":      strings.ToUpper(v),
		"lower":      strings.ToLower(v),
		"hex":        hex.EncodeToString([]byte(v)),
		"HEX":        strings.ToUpper(hex.EncodeToString([]byte(v))),
		"query":      url.QueryEscape(v),
		"path":       url.PathEscape(v),
		"json":       string(j),
		"base64":     base64.StdEncoding.EncodeToString([]byte(v)),
		"base64+1":   base64.StdEncoding.EncodeToString([]byte("x" + v)),
		"base64+2":   base64.StdEncoding.EncodeToString([]byte("xy" + v + "z")),
		"base64url":  base64.URLEncoding.EncodeToString([]byte("?" + v + "~~")),
		"base64url2": base64.RawURLEncoding.EncodeToString([]byte("??" + v)),
	}
}

func TestScrubberMasksEncodings(t *testing.T) {
	const secret = `Tok/en+"va<l>ue"?&=ü`
	s := NewScrubber([]string{secret})
	for name, form := range encodedForms(secret) {
		text := "before " + form + " after"
		got := s.String(text)
		if strings.Contains(got, form) || !strings.Contains(got, Redacted) {
			t.Errorf("%s: %q scrubbed to %q", name, text, got)
		}
		if !strings.HasPrefix(got, "before ") || !strings.HasSuffix(got, " after") {
			t.Errorf("%s: surrounding text changed: %q", name, got)
		}
		if !s.Contains([]byte(text)) {
			t.Errorf("%s: Contains(%q) = false", name, text)
		}
	}
	if s.Contains([]byte("nothing to see")) {
		t.Error("Contains matched clean text")
	}
}

func TestScrubberMergesOverlappingMatches(t *testing.T) {
	s := NewScrubber([]string{"abcdef", "defghi"})
	if got := s.String("xx abcdefghi yy"); got != "xx (sensitive) yy" {
		t.Fatalf("got %q", got)
	}
}

func TestStreamScrubsValuesSplitAcrossPieces(t *testing.T) {
	const secret = "hunter2-secret"
	s := NewScrubber([]string{secret})
	text := "the key is " + secret + " and its hex " + hex.EncodeToString([]byte(secret)) + " done ünïcode"
	for size := 1; size < 9; size++ {
		st := s.NewStream()
		var out strings.Builder
		for i := 0; i < len(text); i += size {
			out.WriteString(st.Write(text[i:min(i+size, len(text))]))
		}
		out.WriteString(st.Flush())
		if want := s.String(text); out.String() != want {
			t.Fatalf("pieces of %d: %q, want %q", size, out.String(), want)
		}
	}
}

// FuzzScrubber checks that no encoded form of a value survives scrubbing,
// whatever text surrounds it.
func FuzzScrubber(f *testing.F) {
	f.Add("s3cr3t-token", "prefix ", " suffix")
	f.Add("abc", "", "")
	f.Add(`q"u\o/te<&>`, "{\"k\":\"", "\"}")
	f.Add("ünïcödé", "ab", "cd")
	f.Fuzz(func(t *testing.T, secret, before, after string) {
		if len(secret) < MinSensitiveLen {
			return
		}
		s := NewScrubber([]string{secret})
		for name, form := range encodedForms(secret) {
			got := s.String(before + form + after)
			// A value with a parenthesis can form a new match with the
			// marker's own, so only others are idempotent.
			if twice := s.String(got); twice != got && !strings.ContainsAny(secret, "()") {
				t.Fatalf("scrubbing %q twice: %q, then %q", before+form+after, got, twice)
			}
			// The marker may contain the value ("sit"): look around it.
			pieces := strings.Split(asciiLower(got), asciiLower(Redacted))
			for _, piece := range pieces {
				if strings.Contains(piece, asciiLower(form)) {
					t.Fatalf("%s form %q of %q survives in %q", name, form, secret, got)
				}
			}
			// The stable part of every encoding is what the scrubber
			// matches: none of it may survive either.
			for _, p := range Encodings(secret) {
				for _, piece := range pieces {
					if len(p) >= MinSensitiveLen && strings.Contains(piece, asciiLower(p)) {
						t.Fatalf("%s: pattern %q of %q survives in %q", name, p, secret, got)
					}
				}
			}
		}
	})
}

func TestContainsReaderAcrossReads(t *testing.T) {
	s := NewScrubber([]string{"hunter22-token"})
	for _, text := range []string{
		strings.Repeat("x", 200<<10) + "hunter22-token" + "tail",
		strings.Repeat("y", 64<<10+3) + hex.EncodeToString([]byte("hunter22-token")),
	} {
		for name, r := range map[string]io.Reader{
			"one byte": iotest.OneByteReader(strings.NewReader(text)),
			"half":     iotest.HalfReader(strings.NewReader(text)),
			"whole":    strings.NewReader(text),
		} {
			if ok, err := s.ContainsReader(r); !ok || err != nil {
				t.Errorf("%s: ContainsReader = %v, %v", name, ok, err)
			}
		}
	}
	if ok, _ := s.ContainsReader(strings.NewReader(strings.Repeat("z", 300<<10))); ok {
		t.Error("clean text matched")
	}
}

// BenchmarkScrubber scrubs 1 MiB of output holding a few values, with
// ten sensitive values configured: the cost is one pass over the text.
func BenchmarkScrubber(b *testing.B) {
	var vals []string
	for i := range 10 {
		vals = append(vals, strings.Repeat(string(rune('a'+i)), 8)+"-secret-token")
	}
	s := NewScrubber(vals)
	line := "ordinary build output line with some words and numbers 12345\n"
	text := []byte(strings.Repeat(line, (1<<20)/len(line)) + vals[3] + "\n" + hex.EncodeToString([]byte(vals[7])))
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		s.Bytes(text)
	}
}

// TestScrubberLongValues covers the NFA the matcher falls back to when
// the values are too long for a DFA.
func TestScrubberLongValues(t *testing.T) {
	secret := strings.Repeat(`Long/Secret+"Value"&`, 150)
	short := "an-ordinary-token"
	s := NewScrubber([]string{secret, short})
	total := 0
	for _, p := range Encodings(secret) {
		total += len(p)
	}
	if total <= dfaMaxPatternBytes {
		t.Fatalf("patterns of %d bytes: too short to test the NFA", total)
	}
	for name, form := range encodedForms(secret) {
		got := s.String("<" + form + "> " + short)
		if strings.Contains(got, form) || strings.Contains(got, short) || len(got) > 40 {
			t.Errorf("%s: got %.80q", name, got)
		}
	}
}

func TestMaskCut(t *testing.T) {
	const secret = "hunter22-token-value"
	s := NewScrubber([]string{secret})
	if got := s.MaskCutEnd("output: hunter22-to"); got != "output: (sensitive)" {
		t.Errorf("MaskCutEnd = %q", got)
	}
	if got := s.MaskCutStart("ken-value and more"); got != "(sensitive) and more" {
		t.Errorf("MaskCutStart = %q", got)
	}
	hx := hex.EncodeToString([]byte(secret))
	if got := s.MaskCutEnd("x " + hx[:11]); got != "x (sensitive)" {
		t.Errorf("MaskCutEnd(hex) = %q", got)
	}
	for _, clean := range []string{"output: done", "hu", "ordinary text"} {
		if got := s.MaskCutEnd(clean); got != clean {
			t.Errorf("MaskCutEnd(%q) = %q", clean, got)
		}
		if got := s.MaskCutStart(clean); got != clean {
			t.Errorf("MaskCutStart(%q) = %q", clean, got)
		}
	}
}

func TestScrubbingTwiceChangesNothing(t *testing.T) {
	for _, v := range []string{"sit", "SENS", "ive)", "(sensitive)", "plain-secret"} {
		s := NewScrubber([]string{v})
		once := s.String("a " + v + " b " + strings.ToUpper(v))
		if twice := s.String(once); twice != once {
			t.Errorf("%q: once %q, twice %q", v, once, twice)
		}
		if v != Redacted && s.Contains([]byte(Redacted)) {
			t.Errorf("%q: Contains(%q)", v, Redacted)
		}
	}
}

// BenchmarkScrubberShort scrubs the short texts most calls get (a tool
// call's arguments, a line of a journal), ten values configured.
func BenchmarkScrubberShort(b *testing.B) {
	var vals []string
	for i := range 10 {
		vals = append(vals, strings.Repeat(string(rune('a'+i)), 8)+"-secret-token")
	}
	s := NewScrubber(vals)
	text := `{"cmd":"go test ./... 2>&1 | tail -20","workdir":"/work/src/app"}` + "\nok  \tgithub.com/x/y\t0.42s\n"
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		s.String(text)
	}
}

// BenchmarkScrubberLayouts scrubs 1 MiB of layouts the scrubber reads
// across lines (base64 wrapped at 76 columns, an xxd dump), one of them
// holding a value: the worst case, every line part of a view.
func BenchmarkScrubberLayouts(b *testing.B) {
	secret := "abcdefgh-secret-token"
	s := NewScrubber([]string{secret})
	data := make([]byte, 256<<10)
	for i := range data {
		data[i] = byte(i*7 + i/251)
	}
	copy(data[100<<10:], secret)
	enc := base64.StdEncoding.EncodeToString(data)
	var text strings.Builder
	for i := 0; i < len(enc); i += 76 {
		text.WriteString(enc[i:min(i+76, len(enc))] + "\n")
	}
	for off := 0; off < 64<<10; off += 16 {
		fmt.Fprintf(&text, "%08x: %x  ................\n", off, data[off:off+16])
	}
	in := []byte(text.String())
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		s.Bytes(in)
	}
}

// BenchmarkStream passes 64 KiB of streamed text through a Stream in
// pieces of 16 bytes, as a model's streamed text comes.
func BenchmarkStream(b *testing.B) {
	s := NewScrubber([]string{"hunter2-secret-token"})
	text := strings.Repeat("The answer is forty-two, and here is why it matters.\n", (64<<10)/54)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		st := s.NewStream()
		for i := 0; i < len(text); i += 16 {
			st.Write(text[i:min(i+16, len(text))])
		}
		st.Flush()
	}
}
