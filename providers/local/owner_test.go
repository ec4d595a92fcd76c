package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

// A local sandbox belongs to the working directory and machine that made
// it: opened from another (a state shared through a backend), it is an
// *sandbox.ElsewhereError naming its directory and host, which is also
// not found here; on the same machine, one whose directory is gone is
// plainly missing, to be restored.
func TestOpenSandboxOfAnotherDirectoryOrHost(t *testing.T) {
	ctx := context.Background()
	dirA, dirB := t.TempDir(), t.TempDir()
	onA := local.New(local.Options{Isolation: local.IsolationNone, Host: "host-a"})
	spec := sandbox.Spec{Address: "sandbox.box", Lineage: "l1", StateDir: dirA, Root: "/workspace"}
	sb, err := onA.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Delete(context.Background()) })
	sess := sb.Session()
	var data struct{ Dir, Host string }
	if err := json.Unmarshal(sess.Data, &data); err != nil || data.Host != "host-a" || filepath.Dir(data.Dir) != dirA {
		t.Fatalf("session state %s does not record the owner (host-a, %s): %v", sess.Data, dirA, err)
	}
	if _, err := onA.Open(ctx, spec, sess); err != nil {
		t.Fatalf("opening from its own directory: %v", err)
	}

	elsewhere := func(p *local.Provider, stateDir, wantWhere string) {
		t.Helper()
		s := spec
		s.StateDir = stateDir
		_, err := p.Open(ctx, s, sess)
		ee, ok := errors.AsType[*sandbox.ElsewhereError](err)
		if !ok || !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("Open from %s: %v, want an ElsewhereError that is also ErrNotFound", stateDir, err)
		}
		if ee.Where != wantWhere || !strings.Contains(err.Error(), stateDir) {
			t.Errorf("Open from %s: where %q, error %q; want %q and this directory named", stateDir, ee.Where, err, wantWhere)
		}
	}
	// Another working directory of the same machine.
	elsewhere(onA, dirB, data.Dir+" on host host-a")
	// The same path on another machine.
	onB := local.New(local.Options{Isolation: local.IsolationNone, Host: "host-b"})
	elsewhere(onB, dirA, data.Dir+" on host host-a")

	// Gone from its owner's directory on this machine: missing, seen from
	// its own directory or another one.
	if err := os.RemoveAll(data.Dir); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{dirA, dirB} {
		s := spec
		s.StateDir = dir
		_, err := onA.Open(ctx, s, sess)
		if _, ok := errors.AsType[*sandbox.ElsewhereError](err); ok || !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Open from %s of a deleted sandbox: %v, want not found and not elsewhere", dir, err)
		}
	}
	// From another machine it cannot be looked at: still elsewhere.
	elsewhere(onB, dirA, data.Dir+" on host host-a")
}

// A state written before the host was recorded: the sandbox is its
// directory's, and is recorded as this machine's once opened here.
func TestOpenSandboxWithoutRecordedHost(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	p := local.New(local.Options{Isolation: local.IsolationNone, Host: "host-a"})
	spec := sandbox.Spec{Address: "sandbox.box", Lineage: "l1", StateDir: dir, Root: "/workspace"}
	sb, err := p.Create(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Delete(context.Background()) })
	old := sb.Session()
	var data map[string]any
	json.Unmarshal(old.Data, &data)
	delete(data, "host")
	old.Data, _ = json.Marshal(data)

	opened, err := local.New(local.Options{Isolation: local.IsolationNone, Host: "host-b"}).Open(ctx, spec, old)
	if err != nil {
		t.Fatalf("opening a sandbox without a recorded host from its directory: %v", err)
	}
	if !strings.Contains(string(opened.Session().Data), `"host":"host-b"`) {
		t.Errorf("session after opening it here: %s, want host-b recorded", opened.Session().Data)
	}
}
