package sandboxtest

import (
	"archive/tar"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
)

// testErrors: a failed operation's error names what failed (the path,
// the archive member, the limit), so that the model and the user can
// tell what to fix.
func (s *suite) testErrors(t *testing.T) {
	sb, _ := s.create(t, sandbox.Spec{})
	c := ctx(t)
	if err := sb.WriteFile(c, "errs/file.txt", []byte(strings.Repeat("x", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(t, sb, "making a directory that is not empty", "mkdir -p errs/full && touch errs/full/f")
	names := func(op string, err error, wants ...string) {
		t.Helper()
		if err == nil {
			t.Errorf("%s succeeded; want an error naming %q", op, wants)
			return
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("the error of %s does not name %q: %q", op, w, err)
			}
		}
	}
	_, err := sb.ReadFile(c, "errs/missing.txt", 0)
	names("ReadFile of a missing file", err, "errs/missing.txt")
	_, err = sb.ReadFile(c, "errs/file.txt", 10)
	names("ReadFile over its limit", err, "errs/file.txt", "10")
	_, err = sb.Stat(c, "errs/missing.txt")
	names("Stat of a missing file", err, "errs/missing.txt")
	_, err = sb.ReadDir(c, "errs/missing-dir")
	names("ReadDir of a missing directory", err, "errs/missing-dir")
	names("Remove of a directory that is not empty", sb.Remove(c, "errs/full"), "errs/full")
	names("WriteFile beneath a regular file", sb.WriteFile(c, "errs/file.txt/child", []byte("x"), 0o644), "errs/file.txt")
	names("Mkdir beneath a regular file", sb.Mkdir(c, "errs/file.txt/sub"), "errs/file.txt")
	_, err = sb.ReadFile(c, "../outside.txt", 0)
	names("ReadFile of a path out of the workspace", err, "../outside.txt")
	err = sb.CopyIn(c, "errs", tarOf(t, &tar.Header{Name: "../evil", Typeflag: tar.TypeReg, Mode: 0o644, Linkname: "x"}))
	names("CopyIn of an archive climbing out", err, "../evil")
	_, err = sb.Exec(c, sandbox.ExecRequest{Shell: "true", Workdir: "errs/no-such-dir"})
	names("Exec in a missing workdir", err, "errs/no-such-dir")
	_, err = sb.Exec(c, sandbox.ExecRequest{Argv: []string{"echo", "a\x00b"}})
	names("Exec of an argument with a NUL byte", err, "NUL")
}
