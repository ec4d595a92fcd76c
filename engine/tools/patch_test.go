package tools

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/sandbox"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for p, v := range snapshot(t, dir) {
		if c, ok := strings.CutPrefix(v, "file:"); ok {
			out[p] = c
		}
	}
	return out
}

func applyArgs(t *testing.T, ws *sandbox.Workspace, args string) (string, error) {
	t.Helper()
	out, err := NewApplyPatch(ws, FilesystemOptions{Root: "/workspace"}).Call(context.Background(), args)
	return out.Text, err
}

func inputArgs(patch string) string {
	b, _ := json.Marshal(map[string]string{"input": patch})
	return string(b)
}

func TestApplyPatchSummary(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	writeFiles(t, dir, map[string]string{"old.txt": "gone\n", "src/app.py": "def greet():\n    print(\"Hi\")\n"})
	out, err := applyArgs(t, ws, inputArgs(`*** Begin Patch
*** Add File: hello.txt
+Hello world
*** Update File: src/app.py
*** Move to: src/main.py
@@ def greet():
-    print("Hi")
+    print("Hello, world!")
*** Delete File: old.txt
*** End Patch
`))
	if err != nil {
		t.Fatal(err)
	}
	want := "Success. Updated the following files:\nA hello.txt\nM src/main.py\nD old.txt\n"
	if out != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
	wantFiles := map[string]string{"hello.txt": "Hello world\n", "src/main.py": "def greet():\n    print(\"Hello, world!\")\n"}
	if diff := cmp.Diff(wantFiles, files(t, dir)); diff != "" {
		t.Error(diff)
	}
}

func TestApplyPatchArgumentForms(t *testing.T) {
	patch := "*** Begin Patch\n*** Add File: a.txt\n+one\n*** End Patch\n"
	for name, args := range map[string]string{
		"function input":  inputArgs(patch),
		"freeform text":   patch,
		"heredoc wrapped": "<<'EOF'\n" + patch + "EOF\n",
	} {
		t.Run(name, func(t *testing.T) {
			ws, dir := newHostWorkspace(t)
			if out, err := applyArgs(t, ws, args); err != nil || out != "Success. Updated the following files:\nA a.txt\n" {
				t.Fatalf("got %q, %v", out, err)
			}
			if got := files(t, dir)["a.txt"]; got != "one\n" {
				t.Errorf("a.txt = %q", got)
			}
		})
	}
}

func TestApplyPatchJSONOperations(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	writeFiles(t, dir, map[string]string{"keep.txt": "a\nb\nc\n", "del.txt": "x\n", "mv.txt": "m\n"})
	// A single Responses API apply_patch_call operation.
	if _, err := applyArgs(t, ws, `{"type": "create_file", "path": "new/file.txt", "diff": "+first\n+second\n"}`); err != nil {
		t.Fatal(err)
	}
	// The apply_patch_call item itself: its operation is applied.
	if _, err := applyArgs(t, ws, `{"type": "apply_patch_call", "call_id": "c1", "status": "completed", "operation": {"type": "update_file", "path": "keep.txt", "diff": "@@\n a\n-b\n+B\n"}}`); err != nil {
		t.Fatal(err)
	}
	// A list of operations.
	out, err := applyArgs(t, ws, `{"operations": [{"type": "delete_file", "path": "del.txt"}, {"type": "update_file", "path": "mv.txt", "move_to": "moved.txt", "diff": "-m\n+M\n"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	if out != "Success. Updated the following files:\nM moved.txt\nD del.txt\n" {
		t.Errorf("output %q", out)
	}
	// An array.
	if _, err := applyArgs(t, ws, `[{"type": "create_file", "path": "arr.txt", "diff": "+x\n+\n"}]`); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"new/file.txt": "first\nsecond", // the SDK's create_file adds no final newline
		"keep.txt":     "a\nB\nc\n",
		"moved.txt":    "M\n",
		"arr.txt":      "x\n",
	}
	if diff := cmp.Diff(want, files(t, dir)); diff != "" {
		t.Error(diff)
	}
	for _, bad := range []struct{ args, want string }{
		{`{"type": "rename_file", "path": "a"}`, "Invalid apply_patch operation type"},
		{`{"type": "create_file", "diff": "+a"}`, "missing a path"},
		{`{"type": "update_file", "path": "keep.txt"}`, "missing a diff"},
		{`{"type": "create_file", "path": "a", "diff": "a"}`, "Invalid Add File Line"},
		{`{"type": "create_file", "path": "a", "diff": "+a", "mode": 7}`, `unknown field "mode"`},
		{`{"input": "*** Begin Patch\n*** End Patch", "extra": 1}`, `unknown field "extra"`},
		{`{"input": 5}`, `"input" must be a string`},
		{`{"input": `, "invalid arguments"},
	} {
		if _, err := applyArgs(t, ws, bad.args); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%s: error %v, want %q", bad.args, err, bad.want)
		}
	}
}

func TestApplyPatchPathsCheckedBeforeAnyChange(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	writeFiles(t, dir, map[string]string{"a.txt": "a\n"})
	for _, p := range []string{"../escape.txt", "/etc/passwd", "/workspace/../x", "sub\\x", "/workspace"} {
		patch := "*** Begin Patch\n*** Add File: first.txt\n+1\n*** Delete File: a.txt\n*** Add File: " + p + "\n+x\n*** End Patch"
		_, err := applyArgs(t, ws, inputArgs(patch))
		if err == nil {
			t.Fatalf("%s: accepted", p)
		}
		if p != "/workspace" && !errors.Is(err, sandbox.ErrPathEscape) {
			t.Errorf("%s: error %v does not wrap ErrPathEscape", p, err)
		}
		if diff := cmp.Diff(map[string]string{"a.txt": "a\n"}, files(t, dir)); diff != "" {
			t.Errorf("%s: workspace changed: %s", p, diff)
		}
	}
	// Move destinations are checked too.
	_, err := applyArgs(t, ws, inputArgs("*** Begin Patch\n*** Update File: a.txt\n*** Move to: ../../out.txt\n@@\n-a\n+b\n*** End Patch"))
	if !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("escaping move: %v", err)
	}
	// An absolute path inside the root is fine.
	if _, err := applyArgs(t, ws, inputArgs("*** Begin Patch\n*** Add File: /workspace/abs.txt\n+ok\n*** End Patch")); err != nil {
		t.Fatal(err)
	}
	if files(t, dir)["abs.txt"] != "ok\n" {
		t.Error("absolute path inside the root not written")
	}
}

func TestApplyPatchPartialFailureReportsAppliedChanges(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	_, err := applyArgs(t, ws, inputArgs("*** Begin Patch\n*** Add File: created.txt\n+hello\n*** Update File: missing.txt\n@@\n-old\n+new\n*** End Patch"))
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	if !strings.Contains(msg, "Failed to read file to update missing.txt") || !strings.Contains(msg, "applied before the failure and are kept:\nA created.txt") {
		t.Errorf("error message:\n%s", msg)
	}
	if files(t, dir)["created.txt"] != "hello\n" {
		t.Error("earlier operation rolled back")
	}
}

func TestApplyPatchFuzzyMatching(t *testing.T) {
	for name, tc := range map[string]struct{ file, patch, want string }{
		"trailing whitespace": {"a  \nb\t\nc\n", "@@\n a\n-b\n+B\n", "a  \nB\nc\n"},
		"indentation":         {"    a\n    b\n", "@@\n a\n-b\n+    B\n", "    a\n    B\n"},
		"context text kept":   {"x = “q”\ny\n", "@@\n x = \"q\"\n-y\n+z\n", "x = “q”\nz\n"},
		"unicode punctuation": {"say “hi” — now\nend\n", "@@\n-say \"hi\" - now\n+say hello\n", "say hello\nend\n"},
		"context anchor": {"def f():\n    return 1\ndef g():\n    return 1\n",
			"@@ def g():\n-    return 1\n+    return 2\n", "def f():\n    return 1\ndef g():\n    return 2\n"},
		"stacked anchors": {"class A:\n  def m():\n    x = 1\nclass B:\n  def m():\n    x = 1\n",
			"@@ class B:\n@@   def m():\n-    x = 1\n+    x = 2\n", "class A:\n  def m():\n    x = 1\nclass B:\n  def m():\n    x = 2\n"},
		"end of file":        {"x\nend\nx\nend\n", "@@\n-end\n+END\n*** End of File\n", "x\nend\nx\nEND\n"},
		"crlf kept":          {"a\r\nb\r\n", "@@\n-a\n+A\n", "A\nb\r\n"},
		"no @@ first":        {"a\nb\n", " a\n-b\n+c\n", "a\nc\n"},
		"blank line context": {"a\n\nb\n", "@@\n a\n\n-b\n+c\n", "a\n\nc\n"},
	} {
		t.Run(name, func(t *testing.T) {
			ws, dir := newHostWorkspace(t)
			writeFiles(t, dir, map[string]string{"f.txt": tc.file})
			patch := "*** Begin Patch\n*** Update File: f.txt\n" + tc.patch + "*** End Patch\n"
			if _, err := applyArgs(t, ws, inputArgs(patch)); err != nil {
				t.Fatal(err)
			}
			if got := files(t, dir)["f.txt"]; got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestApplyPatchErrors(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	writeFiles(t, dir, map[string]string{"f.txt": "a\n", "bin.dat": "\xff\xfe\x00"})
	for _, tc := range []struct{ patch, want string }{
		{"nonsense", "The first line of the patch must be '*** Begin Patch'"},
		{"*** Begin Patch\n*** Add File: x\n+x", "The last line of the patch must be '*** End Patch'"},
		{"*** Begin Patch\n*** Update File: f.txt\n@@ nope\n-a\n+b\n*** End Patch", "Failed to find context 'nope' in f.txt"},
		{"*** Begin Patch\n*** Update File: f.txt\n@@\n-zzz\n+b\n*** End Patch", "Failed to find expected lines in f.txt:\nzzz"},
		{"*** Begin Patch\n*** Update File: f.txt\n@@\nbad line\n*** End Patch", "Unexpected line found in update hunk"},
		{"*** Begin Patch\n*** Update File: bin.dat\n@@\n-a\n+b\n*** End Patch", "not valid UTF-8"},
		{"*** Begin Patch\n*** Update File: .\n@@\n-a\n+b\n*** End Patch", "workspace root"},
	} {
		_, err := applyArgs(t, ws, inputArgs(tc.patch))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.patch, err, tc.want)
		}
	}
	if files(t, dir)["f.txt"] != "a\n" {
		t.Error("failed patches changed f.txt")
	}
}

func TestApplyPatchKeepsModeAndSecrets(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	ws.Scrub = sandbox.NewScrubber([]string{"hunter22"})
	writeFiles(t, dir, map[string]string{"run.sh": "#!/bin/sh\nTOKEN=hunter22\necho hi\n"})
	os.Chmod(filepath.Join(dir, "run.sh"), 0o755)
	if _, err := applyArgs(t, ws, inputArgs("*** Begin Patch\n*** Update File: run.sh\n@@\n-echo hi\n+echo bye\n*** End Patch")); err != nil {
		t.Fatal(err)
	}
	if got := files(t, dir)["run.sh"]; got != "#!/bin/sh\nTOKEN=hunter22\necho bye\n" {
		t.Errorf("secret in an untouched line was rewritten: %q", got)
	}
	fi, _ := os.Stat(filepath.Join(dir, "run.sh"))
	if fi.Mode().Perm() != 0o755 {
		t.Errorf("mode = %v, want 0755 kept", fi.Mode().Perm())
	}
}

func TestApplyPatchMoveOntoItself(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	writeFiles(t, dir, map[string]string{"a.txt": "a\n"})
	if _, err := applyArgs(t, ws, inputArgs("*** Begin Patch\n*** Update File: a.txt\n*** Move to: ./a.txt\n@@\n-a\n+b\n*** End Patch")); err != nil {
		t.Fatal(err)
	}
	if got := files(t, dir)["a.txt"]; got != "b\n" {
		t.Errorf("a.txt = %q: a move onto the same path must not delete the file", got)
	}
}

func TestApplyPatchSymlinkEscapeRefused(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"secret.txt": "top\n"})
	if err := os.Symlink(outside, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, patch := range []string{
		"*** Begin Patch\n*** Update File: link/secret.txt\n@@\n-top\n+pwned\n*** End Patch",
		"*** Begin Patch\n*** Add File: link/new.txt\n+x\n*** End Patch",
		"*** Begin Patch\n*** Delete File: link/secret.txt\n*** End Patch",
	} {
		if _, err := applyArgs(t, ws, inputArgs(patch)); err == nil {
			t.Errorf("patch through a symlink out of the workspace was accepted:\n%s", patch)
		}
	}
	if diff := cmp.Diff(map[string]string{"secret.txt": "top\n"}, files(t, outside)); diff != "" {
		t.Errorf("outside directory changed: %s", diff)
	}
}

// memFS is an in-memory PatchFS for the core tests and the fuzz target.
type memFS map[string]string

func (m memFS) ReadFile(_ context.Context, p string, _ int64) ([]byte, error) {
	c, ok := m[p]
	if !ok {
		return nil, os.ErrNotExist
	}
	return []byte(c), nil
}
func (m memFS) WriteFile(_ context.Context, p string, b []byte, _ os.FileMode) error {
	m[p] = string(b)
	return nil
}
func (m memFS) Remove(_ context.Context, p string) error {
	if _, ok := m[p]; !ok {
		return os.ErrNotExist
	}
	delete(m, p)
	return nil
}
func (m memFS) Stat(_ context.Context, p string) (sandbox.FileInfo, error) {
	c, ok := m[p]
	if !ok {
		return sandbox.FileInfo{}, os.ErrNotExist
	}
	return sandbox.FileInfo{Path: p, Size: int64(len(c)), Mode: 0o644}, nil
}

func TestApplyPatchCore(t *testing.T) {
	fsys := memFS{"a.txt": "1\n2\n3\n"}
	out, err := ApplyPatch(context.Background(), fsys, "", "*** Begin Patch\n*** Update File: a.txt\n@@\n 1\n-2\n+two\n*** End Patch")
	if err != nil || out != "Success. Updated the following files:\nM a.txt\n" {
		t.Fatalf("%q %v", out, err)
	}
	if fsys["a.txt"] != "1\ntwo\n3\n" {
		t.Errorf("a.txt = %q", fsys["a.txt"])
	}
}

func FuzzApplyPatch(f *testing.F) {
	f.Add("line1\nline2\n", "*** Begin Patch\n*** Update File: f.txt\n@@\n line1\n-line2\n+x\n*** End Patch")
	f.Add("a\n", "*** Begin Patch\n*** Add File: g.txt\n+y\n*** Delete File: f.txt\n*** End Patch")
	f.Add("a\nb\n", "*** Begin Patch\n*** Update File: f.txt\n*** Move to: h.txt\n@@ a\n@@ b\n-b\n+c\n*** End of File\n*** End Patch")
	f.Add("", `{"operations": [{"type": "update_file", "path": "f.txt", "diff": "@@\n+z"}]}`)
	f.Add("x", "<<'EOF'\n*** Begin Patch\n*** Update File: f.txt\n-x\n+y\nEOF")
	f.Fuzz(func(t *testing.T, content, patch string) {
		fsys := memFS{"f.txt": content}
		out, err := ApplyPatch(context.Background(), fsys, "/workspace", patch)
		if err == nil && !strings.HasPrefix(out, "Success. Updated the following files:\n") {
			t.Fatalf("success without the summary: %q", out)
		}
		for p := range fsys {
			if p == "" || strings.HasPrefix(p, "/") || p == ".." || strings.HasPrefix(p, "../") {
				t.Fatalf("wrote outside the workspace: %q", p)
			}
		}
	})
}

func TestApplyPatchErrorsAreScrubbed(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	ws.Scrub = sandbox.NewScrubber([]string{"hunter22"})
	writeFiles(t, dir, map[string]string{"f.txt": "a\n"})
	_, err := applyArgs(t, ws, inputArgs("*** Begin Patch\n*** Update File: f.txt\n@@\n-token=hunter22\n+x\n*** End Patch"))
	if err == nil || strings.Contains(err.Error(), "hunter22") || !strings.Contains(err.Error(), "token=(sensitive)") {
		t.Errorf("error %v", err)
	}
	_, err = applyArgs(t, ws, inputArgs("*** Begin Patch\n*** Add File: ../hunter22.txt\n+x\n*** End Patch"))
	if err == nil || strings.Contains(err.Error(), "hunter22") || !errors.Is(err, sandbox.ErrPathEscape) {
		t.Errorf("error %v: want scrubbed and still wrapping ErrPathEscape", err)
	}
}
