package tools

import (
	"strings"
	"testing"
)

func TestCanonicalArguments(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{`{"cmd": "ls",  "login": false}`, `{"cmd":"ls","login":false}`, ""},
		{`{"b": 1, "a": {"y": 2.50, "x": [1, "&&"]}}`, `{"a":{"x":[1,"&&"],"y":2.50},"b":1}`, ""},
		{``, ``, ""},
		{`*** Begin Patch`, `*** Begin Patch`, ""},
		{`{"cmd":"ls","CMD":"touch x"}`, "", `keys "cmd" and "CMD" differ only in case`},
		{`{"cmd":"ls","cmd":"touch x"}`, "", `key "cmd" appears twice`},
		{`{"a":{"s":1,"ſ":2}}`, "", `differ only in case`},
		{`{"session_id":1,"chars":"x","CHARS":"y"}`, "", `differ only in case`},
		{`{"cmd":"ls"}{"cmd":"x"}`, "", "trailing data"},
		{`{"cmd":`, "", "invalid arguments"},
		{strings.Repeat("[", 70) + strings.Repeat("]", 70), "", "nested deeper than 64"},
	} {
		got, err := CanonicalArguments(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: err %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestDecodeArgsIsCaseSensitive(t *testing.T) {
	var a execArgs
	err := decodeArgs("exec_command", `{"Cmd":"touch x"}`, &a)
	if err == nil || !strings.Contains(err.Error(), `unknown field "Cmd"`) {
		t.Fatalf("err = %v, want the case-variant key refused", err)
	}
}

func TestSimpleWords(t *testing.T) {
	for cmd, want := range map[string]bool{
		"ls -a":                 true,
		"grep -rn foo src/a.go": true,
		"wc -l a,b --x=1 @f %":  true,
		"ls; rm x":              false,
		"ls && rm":              false,
		"ls | x":                false,
		"ls > f":                false,
		"ls $(x)":               false,
		"ls `x`":                false,
		"ls 'a'":                false,
		"ls *":                  false,
		"ls ~":                  false,
		"ls\trm":                false,
		"ls\nrm":                false,
		"A=1 ls":                false,
		"ls é":                  false,
		"   ":                   false,
	} {
		words, got := SimpleWords(cmd)
		if got != want || (got && strings.Join(words, " ") != strings.Join(strings.Fields(cmd), " ")) {
			t.Errorf("SimpleWords(%q) = %q, %v; want %v", cmd, words, got, want)
		}
	}
}

func TestExecDescribe(t *testing.T) {
	e := NewExecCommand(nil, ExecOptions{}, nil)
	for args, want := range map[string]string{
		`{"cmd":"ls"}`:                                   "/bin/sh -c ls",
		`{"cmd":"ls","shell":"/bin/bash"}`:               "/bin/bash -lc ls",
		`{"cmd":"ls","shell":"/bin/bash","login":false}`: "/bin/bash -c ls",
	} {
		inv, err := e.Describe(args)
		if err != nil || strings.Join(inv.Argv, " ") != want {
			t.Errorf("%s: argv %q, %v; want %q", args, inv.Argv, err, want)
		}
		if inv.Simple != (want == "/bin/sh -c ls") {
			t.Errorf("%s: simple = %v", args, inv.Simple)
		}
	}
	if _, err := e.Describe(`{"cmd":""}`); err == nil {
		t.Error("an empty cmd described without an error")
	}
}
