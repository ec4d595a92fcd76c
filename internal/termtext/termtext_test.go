package termtext

import "testing"

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, ünïcode ✓", "plain text, ünïcode ✓"},
		{"two\nlines\tand a tab", "two\nlines\tand a tab"},
		{"\x1b]0;title\x07", `\x1b]0;title\x07`},
		{"\x1b[2J", `\x1b[2J`},
		{"\x1b]8;;https://evil.example/\x1b\\link\x1b]8;;\x1b\\", `\x1b]8;;https://evil.example/\x1b\link\x1b]8;;\x1b\`},
		{"\u202etxt.exe", `\u202etxt.exe`},
		{"\r\x7f\u0085\u009b", `\x0d\x7f\x85\x9b`},
		{"bad \xff byte", `bad \xff byte`},
		{"\U000f0000", `\U000f0000`},
		{"\u200b", `\u200b`},
	} {
		if got := Printable(tc.in); got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestLine(t *testing.T) {
	if got, want := Line("a\nb\tc\x1b"), `a\nb\tc\x1b`; got != want {
		t.Errorf("Line = %q, want %q", got, want)
	}
}
