package userns

import (
	"strings"
	"testing"
)

func TestParseRange(t *testing.T) {
	const file = `# a comment
alice:100000:65536

1001:300000:1000
bob:x:1
`
	for _, tc := range []struct {
		name string
		id   int
		want Range
		err  string
	}{
		{"alice", 1000, Range{100000, 65536}, ""},
		{"carol", 1001, Range{300000, 1000}, ""}, // by uid
		{"dave", 1002, Range{}, "/etc/subuid has no range for user dave (uid 1002)"},
		{"bob", 1003, Range{}, `/etc/subuid:5: "bob:x:1" is not NAME:START:COUNT`},
	} {
		got, err := parseRange(strings.NewReader(file), "/etc/subuid", tc.name, tc.id)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}
