package sandboxtest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
)

// testStopStart: a stopped sandbox says so, runs nothing, and comes back
// with its workspace after a reconnect from its session state (as the
// next apply does); a sandbox whose Stop loses its workspace
// (sandbox.StopDiscarder) is then missing instead.
func (s *suite) testStopStart(t *testing.T) {
	sb, spec := s.create(t, sandbox.Spec{})
	c := ctx(t)
	if err := sb.WriteFile(c, "keep.txt", []byte("kept"), 0o600); err != nil {
		t.Fatal(err)
	}
	if st, err := sb.Refresh(c); err != nil || st != sandbox.StatusRunning {
		t.Fatalf("a new sandbox is reported %q (%s), want running", st, describe(err))
	}
	if err := sb.Stop(c); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if d, ok := sb.(sandbox.StopDiscarder); ok && d.StopDiscardsWorkspace() {
		checkGone(t, s.f.Provider, sb, spec, "Stop of a sandbox whose Stop discards its workspace")
		if err := sb.Start(c); !errors.Is(err, sandbox.ErrNotFound) {
			t.Errorf("Start after a Stop that discarded the workspace = %s, want ErrNotFound (the engine restores a snapshot instead)", describe(err))
		}
		return
	}
	if st, err := sb.Refresh(c); err != nil || st != sandbox.StatusStopped {
		t.Errorf("a stopped sandbox is reported %q (%s), want stopped", st, describe(err))
	}
	res, err := sb.Exec(c, sandbox.ExecRequest{Shell: "echo ran"})
	if err == nil {
		t.Errorf("Exec on a stopped sandbox ran the command (exit %d, %q) instead of failing", res.ExitCode, res.Stdout)
	} else if !errors.Is(err, sandbox.ErrUnavailable) && !strings.Contains(err.Error(), "stopped") {
		t.Errorf("Exec on a stopped sandbox failed without saying the sandbox is stopped or unavailable: %v", err)
	}
	re := reopen(t, s.f.Provider, spec, sb.Session())
	if st, err := re.Refresh(c); err != nil || st != sandbox.StatusStopped {
		t.Errorf("a stopped sandbox reopened from its session state is reported %q (%s), want stopped", st, describe(err))
	}
	if err := re.Start(c); err != nil {
		t.Fatalf("Start of the reopened stopped sandbox: %v", err)
	}
	if st, err := re.Refresh(c); err != nil || st != sandbox.StatusRunning {
		t.Errorf("a started sandbox is reported %q (%s), want running", st, describe(err))
	}
	if got, err := re.ReadFile(c, "keep.txt", 0); err != nil || string(got) != "kept" {
		t.Errorf("the workspace did not survive Stop and Start: keep.txt reads %q (%s)", got, describe(err))
	}
	if got := sh(t, re, "running a command after Start", "cat keep.txt; echo; echo ok"); got != "kept\nok\n" {
		t.Errorf("a command after Stop and Start reads %q", got)
	}
	if err := re.Start(c); err != nil {
		t.Errorf("Start of a running sandbox: %v", err)
	}
}

// reopen reconnects to a sandbox from its session state after a round
// trip through JSON, as the state file keeps it.
func reopen(t *testing.T, p sandbox.Provider, spec sandbox.Spec, st sandbox.SessionState) sandbox.Sandbox {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatalf("the session state does not encode as JSON: %v", err)
	}
	var back sandbox.SessionState
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Provider != p.Kind() {
		t.Errorf("the session state names provider %q, not %q", back.Provider, p.Kind())
	}
	sb, err := p.Open(ctx(t), spec, back)
	if err != nil {
		t.Fatalf("Open from the session state: %v", err)
	}
	return sb
}

// checkGone: after what, the sandbox is missing, cannot be reopened and
// runs nothing.
func checkGone(t *testing.T, p sandbox.Provider, sb sandbox.Sandbox, spec sandbox.Spec, what string) {
	t.Helper()
	c := ctx(t)
	if st, err := sb.Refresh(c); (err != nil || st != sandbox.StatusMissing) && !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("after %s the sandbox is reported %q (%s), want missing", what, st, describe(err))
	}
	if _, err := p.Open(c, spec, sb.Session()); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("Open after %s = %s, want ErrNotFound", what, describe(err))
	}
	if res, err := sb.Exec(c, sandbox.ExecRequest{Shell: "echo ran"}); err == nil {
		t.Errorf("Exec after %s ran the command (exit %d, %q)", what, res.ExitCode, res.Stdout)
	}
}

// testDelete: Delete of a running and of a stopped sandbox leaves
// nothing behind, and deleting it again is not an error.
func (s *suite) testDelete(t *testing.T) {
	for _, stopped := range []bool{false, true} {
		name := "running"
		if stopped {
			name = "stopped"
		}
		t.Run(name, func(t *testing.T) {
			spec := s.spec(t, sandbox.Spec{})
			c := ctx(t)
			sb, err := s.f.Provider.Create(c, spec)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			t.Cleanup(func() { sb.Delete(context.Background()) })
			if err := sb.WriteFile(c, "work/file.txt", []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
			if stopped {
				if err := sb.Stop(c); err != nil {
					t.Fatalf("Stop: %v", err)
				}
			}
			if err := sb.Delete(c); err != nil {
				t.Fatalf("Delete of a %s sandbox: %v", name, err)
			}
			checkGone(t, s.f.Provider, sb, spec, "Delete")
			if err := sb.Delete(c); err != nil {
				t.Errorf("Delete of a sandbox already deleted = %v, want no error", err)
			}
			s.checkNothingLeft(t, spec, "Delete of a "+name+" sandbox")
		})
	}
}

// testLeftovers: a sandbox whose creation was never recorded (agentctl
// was killed during Create) is removed by the next Create of the same
// lineage and address, so nothing is left untracked; sandboxes of
// another address or lineage are left alone.
func (s *suite) testLeftovers(t *testing.T) {
	spec := s.spec(t, sandbox.Spec{})
	other, foreign := spec, spec
	other.Address = `sandbox.other["` + randHex(3) + `"]`
	foreign.Lineage += "-other"
	var made []sandbox.Sandbox
	for _, sp := range []sandbox.Spec{spec, other, foreign, spec} {
		sb, err := s.f.Provider.Create(ctx(t), sp)
		if err != nil {
			t.Fatalf("Create of %s (lineage %s): %v", sp.Address, sp.Lineage, err)
		}
		t.Cleanup(func() { sb.Delete(context.Background()) })
		made = append(made, sb)
	}
	if st, err := made[0].Refresh(ctx(t)); st != sandbox.StatusMissing && !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("the sandbox an interrupted create left is still there after the next Create of its address: %q (%s)", st, describe(err))
	}
	for i, what := range []string{"", "another address's sandbox", "another lineage's sandbox", "the new sandbox"} {
		if i == 0 {
			continue
		}
		if st, err := made[i].Refresh(ctx(t)); err != nil || st != sandbox.StatusRunning {
			t.Errorf("Create removed %s, which was no leftover of it: %q (%s)", what, st, describe(err))
		}
	}
}
