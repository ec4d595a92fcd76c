package sandboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/sandbox"
)

// Factory is what TestSandbox needs of a provider.
type Factory struct {
	// Provider is the provider under test. The capabilities it declares
	// it lacks (sandbox.CapabilityLacker) are checked as refusals, the
	// others as behaviour.
	Provider sandbox.Provider
	// Spec returns the spec of a new sandbox for t: want's Accounts and
	// Ports (what the subtest needs), an address and lineage of its own,
	// and whatever else the provider needs for them (an image, a
	// network, settings, a state directory).
	Spec func(t *testing.T, want sandbox.Spec) sandbox.Spec
	// Validate checks spec as the configuration does before apply: the
	// provider type's DecodeSandbox, given spec's arguments written at
	// the ranges in at. It is needed when the provider lacks a
	// capability: the suite checks the refusal is reported at the
	// argument that asks for it.
	Validate func(spec sandbox.Spec, at Ranges) hcl.Diagnostics
	// Leftovers lists what the provider still holds of spec's lineage
	// (containers, Pods, claims, directories); after Delete the suite
	// expects nothing.
	Leftovers func(ctx context.Context, spec sandbox.Spec) ([]string, error)
	// HTTPClient fetches the URLs PortURL returns (a fake's client that
	// routes its hosts to it); nil is a plain client.
	HTTPClient *http.Client
	// PortsUnreachable, when not "", says why the URLs PortURL returns
	// cannot be fetched from the test (a fake's preview links): the suite
	// then checks what PortURL returns without fetching it.
	PortsUnreachable string
	// KnownBroken lists checks known to fail with this provider, by name
	// (see Check*), with the reason (an issue). The suite reports such a
	// failure without failing, and fails once the check passes, so that
	// the entry is removed.
	KnownBroken map[string]string
}

// Ranges are where a configuration wrote a sandbox's arguments, for
// Factory.Validate (registry.SandboxArgs holds the same ranges).
type Ranges struct {
	// Manifest is the sandbox's manifest argument, where the manifest's
	// users are reported (SandboxArgs.AccountsRange).
	Manifest hcl.Range
	// Ports is the ports argument (SandboxArgs.PortsRange).
	Ports hcl.Range
}

// suiteRanges are the ranges the suite gives Validate.
var suiteRanges = Ranges{
	Manifest: hcl.Range{Filename: "sandboxtest.hcl", Start: hcl.Pos{Line: 3, Column: 3, Byte: 30}, End: hcl.Pos{Line: 3, Column: 11, Byte: 38}},
	Ports:    hcl.Range{Filename: "sandboxtest.hcl", Start: hcl.Pos{Line: 4, Column: 3, Byte: 60}, End: hcl.Pos{Line: 4, Column: 8, Byte: 65}},
}

// Names of the checks a Factory may list in KnownBroken.
const (
	// CheckTerminalName: a process on a terminal can name it (tty(1),
	// ttyname(3)).
	CheckTerminalName = "terminal-name"
)

// TestSandbox holds a sandbox provider to the contract of the sandbox
// package, the way testing/fstest.TestFS holds an fs.FS: every behaviour
// is a subtest, and a failure names the behaviour that broke
// (docs/sandbox.md, "The contract's conformance suite"). It creates its
// own sandboxes through f and deletes them.
func TestSandbox(t *testing.T, f Factory) {
	t.Helper()
	if f.Provider == nil || f.Spec == nil {
		t.Fatal("sandboxtest: the Factory needs a Provider and a Spec function")
	}
	s := &suite{f: f}
	t.Run("exec", s.testExec)
	t.Run("files", s.testFiles)
	t.Run("manifest", s.testManifest)
	t.Run("users", s.testUsers)
	t.Run("processes", s.testProcesses)
	t.Run("ports", s.testPorts)
	t.Run("stop-start", s.testStopStart)
	t.Run("snapshot-restore", s.testSnapshot)
	t.Run("delete", s.testDelete)
	t.Run("leftovers", s.testLeftovers)
	t.Run("errors", s.testErrors)
}

type suite struct {
	f Factory
}

// opTimeout bounds every call the suite makes, so that a provider that
// hangs fails the check that hung instead of the whole test binary.
const opTimeout = 3 * time.Minute

// ctx returns a context ending with t (and after opTimeout).
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), opTimeout)
	t.Cleanup(cancel)
	return c
}

// spec returns the factory's spec for want, checking it kept what the
// subtest asked for.
func (s *suite) spec(t *testing.T, want sandbox.Spec) sandbox.Spec {
	t.Helper()
	spec := s.f.Spec(t, want)
	if len(want.Accounts.Users) != len(spec.Accounts.Users) || len(want.Ports) != len(spec.Ports) {
		t.Fatalf("sandboxtest: the Factory's Spec dropped the accounts or ports the subtest asked for: %+v", spec)
	}
	return spec
}

// create makes a sandbox of the factory's spec for want, deleted when t
// ends.
func (s *suite) create(t *testing.T, want sandbox.Spec) (sandbox.Sandbox, sandbox.Spec) {
	t.Helper()
	spec := s.spec(t, want)
	sb, err := s.f.Provider.Create(ctx(t), spec)
	if err != nil {
		t.Fatalf("creating a sandbox (%s): %v", spec.Address, err)
	}
	t.Cleanup(func() {
		c, cancel := sandbox.CleanupContext(context.Background())
		defer cancel()
		if err := sb.Delete(c); err != nil {
			t.Errorf("deleting the sandbox %s after the test: %v", spec.Address, err)
		}
	})
	return sb, spec
}

// sh runs script and fails t when it cannot be run or exits non-zero;
// what names the step for the failure.
func sh(t *testing.T, sb sandbox.Sandbox, what, script string) string {
	t.Helper()
	res, err := sb.Exec(ctx(t), sandbox.ExecRequest{Shell: script})
	if err != nil {
		t.Fatalf("%s: Exec(%q): %v", what, script, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("%s: %q exited %d: stdout %q, stderr %q", what, script, res.ExitCode, res.Stdout, res.Stderr)
	}
	return string(res.Stdout)
}

// known runs the check named name, which returns what broke (nil when
// it holds): a failure of t, unless the factory lists it in KnownBroken,
// where it is logged, and then passing is the failure.
func (s *suite) known(t *testing.T, name string, check func() error) {
	t.Helper()
	err := check()
	why, broken := s.f.KnownBroken[name]
	switch {
	case broken && err == nil:
		t.Errorf("%s now works, but the Factory lists it in KnownBroken (%s): remove the entry", name, why)
	case broken:
		t.Logf("known broken (%s): %v", why, err)
	case err != nil:
		t.Error(err)
	}
}

// randHex returns n random bytes in hex.
func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// outside is a directory beyond the workspace that escape checks aim
// at: a symlink or archive that reaches it was followed. It holds one
// file, s, reading "secret\n".
type outside struct {
	dir string
}

// makeOutside creates the directory outside the workspace (a fresh
// /tmp directory of the sandbox), removed when t ends.
func makeOutside(t *testing.T, sb sandbox.Sandbox) outside {
	t.Helper()
	o := outside{dir: "/tmp/agentctl-suite-" + randHex(6)}
	sh(t, sb, "preparing a directory outside the workspace", "mkdir -p "+o.dir+" && echo secret > "+o.dir+"/s")
	t.Cleanup(func() {
		_, _ = sb.Exec(context.Background(), sandbox.ExecRequest{Shell: "rm -rf " + o.dir, Timeout: time.Minute})
	})
	return o
}

// up is a relative symlink target that climbs from any workspace depth
// to the file system's root and then names p (absolute).
func up(p string) string {
	return strings.Repeat("../", 24) + strings.TrimPrefix(p, "/")
}

// check fails t when the directory outside the workspace changed: what
// wrote into it followed a path out of the workspace.
func (o outside) check(t *testing.T, sb sandbox.Sandbox, what string) {
	t.Helper()
	res, err := sb.Exec(ctx(t), sandbox.ExecRequest{Shell: "ls -A " + o.dir + " && cat " + o.dir + "/s"})
	if err != nil {
		t.Fatalf("listing the directory outside the workspace: %v", err)
	}
	if got := string(res.Stdout); got != "s\nsecret\n" {
		t.Errorf("%s: the directory outside the workspace (%s) changed: it now lists and reads %q", what, o.dir, got)
	}
}

// isEscape reports whether err is the refusal of a path leaving the
// workspace.
func isEscape(err error) bool { return errors.Is(err, sandbox.ErrPathEscape) }

// describe formats an error for a failure message ("nil" for none).
func describe(err error) string {
	if err == nil {
		return "no error"
	}
	return fmt.Sprintf("%q", err.Error())
}

// NewSpec returns a spec with an address and a lineage of its own and
// want's accounts and ports, for a Factory's Spec; with rootBase set, a
// workspace root of its own beneath it, for fakes whose sandboxes share
// this machine's file system.
func NewSpec(want sandbox.Spec, rootBase string) sandbox.Spec {
	id := randHex(4)
	spec := sandbox.Spec{Address: `sandbox.suite["` + id + `"]`, Lineage: "suite-" + id, Accounts: want.Accounts, Ports: want.Ports}
	if rootBase != "" {
		spec.Root = rootBase + "/ws-" + id
	}
	return spec
}
