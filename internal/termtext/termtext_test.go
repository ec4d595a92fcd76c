package termtext

import (
	"encoding/json"
	"testing"
)

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
		// A PTY's CR LF line ends are line ends; a lone CR is not.
		{"tty\r\nline 2\r\n", "tty\nline 2\n"},
		{"over\rwrite\r", `over\x0dwrite\x0d`},
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

func TestJSON(t *testing.T) {
	in := map[string]string{"text": "\x1b]0;t\x07 \u202e \u009b \x7f \U000f0000 ü\n\t"}
	b, err := json.MarshalIndent(in, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	got := JSON(b)
	if want := "{\n\t\"text\": \"\\u001b]0;t\\u0007 \\u202e \\u009b \\u007f \\udb80\\udc00 ü\\n\\t\"\n}"; string(got) != want {
		t.Errorf("JSON = %s, want %s", got, want)
	}
	var back map[string]string
	if err := json.Unmarshal(got, &back); err != nil || back["text"] != in["text"] {
		t.Errorf("round trip = %q, %v; want %q", back["text"], err, in["text"])
	}
	if clean := []byte(`{"a": "b"}`); &JSON(clean)[0] != &clean[0] {
		t.Error("clean JSON was copied")
	}
}
