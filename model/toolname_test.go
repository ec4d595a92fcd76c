package model

import "testing"

func TestSafeToolName(t *testing.T) {
	for in, want := range map[string]string{
		"search":             "search",
		"greet (structured)": "greet_structured",
		"elicit (url)":       "elicit_url",
		"kb.read/entity":     "kb_read_entity",
		"___":                "tool",
		"héllo wörld":        "h_llo_w_rld",
		"a-b_c":              "a-b_c",
		"x!":                 "x",
	} {
		if got := SafeToolName(in); got != want {
			t.Errorf("SafeToolName(%q) = %q, want %q", in, got, want)
		}
	}
	long := ""
	for range 70 {
		long += "a"
	}
	if got := SafeToolName(long); len(got) != 64 {
		t.Errorf("SafeToolName of 70 letters has %d bytes, want 64", len(got))
	}
}
