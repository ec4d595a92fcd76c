package registry

import "testing"

func TestLookupEnv(t *testing.T) {
	environ := []string{"HOME=/home/a", "EMPTY=", "NOEQUALS", "KEY=first", "KEY=last", "URL=http://h/?a=b"}
	for _, c := range []struct {
		key, want string
		set       bool
	}{
		{"HOME", "/home/a", true},
		{"KEY", "last", true}, // appended entries override, as for os/exec
		{"EMPTY", "", true},
		{"URL", "http://h/?a=b", true}, // only the first = separates
		{"NOEQUALS", "", false},
		{"MISSING", "", false},
		{"HOM", "", false},
	} {
		v, ok := LookupEnv(environ, c.key)
		if v != c.want || ok != c.set {
			t.Errorf("LookupEnv(%q) = %q, %v; want %q, %v", c.key, v, ok, c.want, c.set)
		}
		if got := Getenv(environ, c.key); got != c.want {
			t.Errorf("Getenv(%q) = %q, want %q", c.key, got, c.want)
		}
	}
	if v, ok := LookupEnv(nil, "HOME"); v != "" || ok {
		t.Errorf("LookupEnv(nil) = %q, %v", v, ok)
	}
}
