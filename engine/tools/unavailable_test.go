//go:build unix

package tools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// newNamedWorkspace is a workspace named sandbox.box over a host
// directory, which the test can remove from under it.
func newNamedWorkspace(t *testing.T) (*sandbox.Workspace, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ws")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hd, err := hostfs.NewHostDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hd.Close() })
	return &sandbox.Workspace{Sandbox: hd, Address: "sandbox.box"}, dir
}

// TestToolFailuresOfARunningSandbox: while the sandbox is there, failures
// are the tool's (non-zero exits, missing files and directories, a
// command killed by a signal) and go back to the model.
func TestToolFailuresOfARunningSandbox(t *testing.T) {
	ws, _ := newNamedWorkspace(t)
	ctx := context.Background()
	out, err := NewExecCommand(ws, ExecOptions{}, nil).Call(ctx, `{"cmd": "echo no >&2; exit 3"}`)
	if err != nil || !strings.Contains(out.Text, "exited with code 3") {
		t.Fatalf("non-zero exit: %q %v", out.Text, err)
	}
	out, err = NewExecCommand(ws, ExecOptions{}, nil).Call(ctx, `{"cmd": "kill -9 $$"}`)
	if err != nil {
		t.Fatalf("a command that killed itself: %v", err)
	}
	for _, c := range []struct {
		tool Tool
		args string
	}{
		{NewExecCommand(ws, ExecOptions{}, nil), `{"cmd": "true", "workdir": "nope"}`},
		{NewApplyPatch(ws, FilesystemOptions{}), "*** Begin Patch\n*** Update File: missing.txt\n@@\n-a\n+b\n*** End Patch\n"},
		{NewViewImage(ws, FilesystemOptions{}), `{"path": "missing.png"}`},
	} {
		_, err := c.tool.Call(ctx, c.args)
		if err == nil || isUnavailable(err) {
			t.Fatalf("%s: %v, want a tool failure", c.tool.Definition().Name, err)
		}
	}
}

// TestToolsReportAVanishedSandbox: once the sandbox is gone, every tool's
// failure is an *sandbox.UnavailableError naming the sandbox, and so is a
// command killed by the sandbox going away under it.
func TestToolsReportAVanishedSandbox(t *testing.T) {
	ws, dir := newNamedWorkspace(t)
	ctx := context.Background()
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The command removes the whole workspace and then dies of a signal,
	// as commands do when their container is stopped.
	_, err := NewExecCommand(ws, ExecOptions{}, nil).Call(ctx, `{"cmd": "rm -rf \"$PWD\"; kill -9 $$"}`)
	checkVanished(t, "exec_command killed as the sandbox vanished", err)

	for _, c := range []struct {
		tool Tool
		args string
	}{
		{NewExecCommand(ws, ExecOptions{}, nil), `{"cmd": "true"}`},
		{NewExecCommand(ws, ExecOptions{}, nil), `{"cmd": "true", "workdir": "sub"}`},
		{NewApplyPatch(ws, FilesystemOptions{}), "*** Begin Patch\n*** Update File: a.txt\n@@\n-a\n+b\n*** End Patch\n"},
		{NewApplyPatch(ws, FilesystemOptions{}), "*** Begin Patch\n*** Add File: b.txt\n+b\n*** End Patch\n"},
		{NewViewImage(ws, FilesystemOptions{}), `{"path": "a.png"}`},
	} {
		_, err := c.tool.Call(ctx, c.args)
		checkVanished(t, c.tool.Definition().Name+" "+c.args, err)
	}
}

func checkVanished(t *testing.T, what string, err error) {
	t.Helper()
	ue, ok := errors.AsType[*sandbox.UnavailableError](err)
	if !ok {
		t.Fatalf("%s: %v, want a *sandbox.UnavailableError", what, err)
	}
	if ue.Name() != "sandbox.box" || ue.What() != "was deleted" {
		t.Fatalf("%s: %s %s (%v)", what, ue.Name(), ue.What(), err)
	}
}
