package hosted

import (
	"context"
	"errors"
	"io/fs"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
)

func TestReadLimited(t *testing.T) {
	if b, err := ReadLimited(strings.NewReader("abc"), "f", 3); err != nil || string(b) != "abc" {
		t.Errorf("ReadLimited at the limit = %q, %v", b, err)
	}
	if _, err := ReadLimited(strings.NewReader("abcd"), "f", 3); err == nil || !strings.Contains(err.Error(), `read "f": file is larger than 3 bytes`) {
		t.Errorf("ReadLimited over the limit: %v", err)
	}
}

func TestResolveRefusesBeforeRunning(t *testing.T) {
	ran := false
	run := func(context.Context, string, string) (string, int, string, error) {
		ran = true
		return "", 0, "", nil
	}
	for _, rel := range []string{"../x", "a\nb"} {
		if _, err := Resolve(context.Background(), run, "/work", "read", rel, true); !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("Resolve(%q) = %v, want ErrPathEscape", rel, err)
		}
	}
	if ran {
		t.Errorf("the resolver script ran for a path refused on the host")
	}
	fail := func(context.Context, string, string) (string, int, string, error) { return "", 2, "sh: boom", nil }
	if _, err := Resolve(context.Background(), fail, "/work", "stat", "x", false); err == nil || err.Error() != `stat "x": sh: boom` {
		t.Errorf("a failing resolver gives %v", err)
	}
}

func TestChecks(t *testing.T) {
	missing := sandbox.ResolvedPath{Abs: "/work/x", Kind: 'N'}
	dir := sandbox.ResolvedPath{Abs: "/work/d", Kind: 'D'}
	if err := CheckRead(missing, "x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CheckRead(missing) = %v", err)
	}
	if err := CheckRead(dir, "d"); err == nil || err.Error() != `read "d": is a directory` {
		t.Errorf("CheckRead(dir) = %v", err)
	}
	if err := CheckRemove(sandbox.ResolvedPath{Abs: "/work", Kind: 'D'}, "/work", "."); err == nil {
		t.Errorf("CheckRemove allowed the workspace root")
	}
	if err := CheckList(sandbox.ResolvedPath{Kind: 'F'}, "f"); err == nil || err.Error() != `list "f": not a directory` {
		t.Errorf("CheckList(file) = %v", err)
	}
	if err := CheckMkdir(sandbox.ResolvedPath{Kind: 'F'}, "f"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("CheckMkdir(file) = %v", err)
	}
}

func TestCheckSession(t *testing.T) {
	if err := CheckSession(sandbox.SessionState{Provider: "docker", ID: "x"}, "e2b", "sandbox"); err == nil || err.Error() != `session state belongs to provider "docker"` {
		t.Errorf("another provider's state: %v", err)
	}
	if err := CheckSession(sandbox.SessionState{Provider: "runloop"}, "runloop", "devbox"); !errors.Is(err, sandbox.ErrNotFound) || !strings.Contains(err.Error(), "no devbox id") {
		t.Errorf("state without an id: %v", err)
	}
	if err := CheckSession(sandbox.SessionState{ID: "x"}, "e2b", "sandbox"); err != nil {
		t.Errorf("state of no named provider: %v", err)
	}
}
