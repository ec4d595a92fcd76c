package sandbox

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestHeadTailKeepsHeadAndTail(t *testing.T) {
	cases := []struct {
		name   string
		limit  int
		writes []string
		want   string
		trunc  bool
	}{
		{"fits", 10, []string{"hello"}, "hello", false},
		{"exactly the limit", 10, []string{"0123456789"}, "0123456789", false},
		{"one big write", 10, []string{"abcdefghijklmnopqrstuvwxyz"}, "abcde" + truncationMarker(16, 26) + "vwxyz", true},
		{"many small writes", 6, strings.Split("abcdefghij", ""), "abc" + truncationMarker(4, 10) + "hij", true},
		{"tail wraps around", 4, []string{"ab", "cd", "ef", "gh", "ij"}, "ab" + truncationMarker(6, 10) + "ij", true},
		{"empty", 8, nil, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHeadTail(tc.limit)
			for _, w := range tc.writes {
				n, err := h.Write([]byte(w))
				if err != nil || n != len(w) {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if got := string(h.Bytes()); got != tc.want {
				t.Fatalf("Bytes = %q, want %q", got, tc.want)
			}
			if h.Truncated() != tc.trunc {
				t.Fatalf("Truncated = %v", h.Truncated())
			}
			total := 0
			for _, w := range tc.writes {
				total += len(w)
			}
			if h.Total() != int64(total) {
				t.Fatalf("Total = %d, want %d", h.Total(), total)
			}
		})
	}
}

func TestHeadTailNotesOriginalSize(t *testing.T) {
	h := NewHeadTail(100)
	for i := 0; i < 1000; i++ {
		fmt.Fprintf(h, "line %04d\n", i)
	}
	out := h.Bytes()
	if !bytes.HasPrefix(out, []byte("line 0000\n")) || !bytes.HasSuffix(out, []byte("line 0999\n")) {
		t.Fatalf("head or tail lost: %q", out)
	}
	if !bytes.Contains(out, []byte("output was 10000 bytes")) {
		t.Fatalf("original size not noted: %q", out)
	}
}

func TestScrubberMasksSensitiveValues(t *testing.T) {
	s := NewScrubber([]string{"s3cr3t-token", "s3cr3t", "", "ab"})
	cases := map[string]string{
		"token=s3cr3t-token end":  "token=(sensitive) end",
		"just s3cr3t here":        "just (sensitive) here",
		"ab is too short to mask": "ab is too short to mask",
		"twice s3cr3t s3cr3t":     "twice (sensitive) (sensitive)",
		"nothing":                 "nothing",
	}
	for in, want := range cases {
		if got := s.String(in); got != want {
			t.Errorf("String(%q) = %q, want %q", in, got, want)
		}
		if got := string(s.Bytes([]byte(in))); got != want {
			t.Errorf("Bytes(%q) = %q, want %q", in, got, want)
		}
	}
	var none *Scrubber
	if none.String("s3cr3t") != "s3cr3t" || NewScrubber(nil).String("x") != "x" {
		t.Fatal("an empty scrubber changed its input")
	}
}
