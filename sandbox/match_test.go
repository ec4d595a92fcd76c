package sandbox

import "testing"

func TestMatcher(t *testing.T) {
	m, err := CompileExclude([]string{"node_modules", "*.tmp", "/build", "cache/", "docs/**/*.png", "**/gen", "!keep.tmp", "# comment", ""})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		p     string
		dir   bool
		match bool
	}{
		{"node_modules", true, true},
		{"a/b/node_modules", true, true},
		{"x.tmp", false, true},
		{"a/x.tmp", false, true},
		{"keep.tmp", false, false},
		{"build", true, true},
		{"src/build", true, false},
		{"cache", true, true},
		{"cache", false, false},
		{"a/cache", true, true},
		{"docs/img.png", false, true},
		{"docs/a/b/img.png", false, true},
		{"img.png", false, false},
		{"gen", true, true},
		{"x/y/gen", false, true},
		{"main.go", false, false},
	}
	for _, tt := range tests {
		if got := m.Match(tt.p, tt.dir); got != tt.match {
			t.Errorf("Match(%q, dir=%v) = %v, want %v", tt.p, tt.dir, got, tt.match)
		}
	}
	if _, err := CompileExclude([]string{"[z-"}); err == nil {
		t.Error("malformed pattern accepted")
	}
	var nilM *Matcher
	if nilM.Match("a", false) {
		t.Error("nil matcher matched")
	}
}
