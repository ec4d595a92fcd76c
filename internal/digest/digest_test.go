package digest

import (
	"strings"
	"testing"
)

func TestFormatAndParse(t *testing.T) {
	for _, alg := range []Algorithm{BLAKE3, SHA256} {
		h := alg.New()
		h.Write([]byte("abc"))
		d := alg.Format(h.Sum(nil))
		got, sum, err := Parse(d)
		if err != nil || got != alg || len(sum) != 64 || !strings.HasPrefix(d, string(alg)+":") || Named(d) != d {
			t.Errorf("%s: %q parsed as %q %q %v, named %q", alg, d, got, sum, err, Named(d))
		}
	}
	// Known values: BLAKE3 and SHA-256 of "abc".
	h := BLAKE3.New()
	h.Write([]byte("abc"))
	if d := BLAKE3.Format(h.Sum(nil)); d != "blake3:6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85" {
		t.Errorf("BLAKE3(abc) = %s", d)
	}
	// The empty Algorithm is BLAKE3; a bare hex digest is a SHA-256.
	if Algorithm("").Name() != BLAKE3 {
		t.Error("the empty algorithm is not BLAKE3")
	}
	bare := "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
	if alg, sum, err := Parse(bare); alg != SHA256 || sum != bare || err != nil || Named(bare) != "sha256:"+bare {
		t.Errorf("bare hex: %q %q %v, named %q", alg, sum, err, Named(bare))
	}
	if Named("md5:x") != "md5:x" {
		t.Errorf("a digest that does not parse is named %q", Named("md5:x"))
	}
	for in, want := range map[string]string{
		"md5:" + bare:               `unknown algorithm "md5"`,
		"blake3:abc":                "want 64 hex digits",
		"blake3:" + bare[:63] + "g": "not hex",
		"":                          "want 64 hex digits",
	} {
		if _, _, err := Parse(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want %q", in, err, want)
		}
	}
}
