package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/providers/builtin"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/local"
)

// newTestEngine loads src as dir/main.hcl with a state directory beside it.
func newTestEngine(t *testing.T, src string) (*Engine, string) {
	t.Helper()
	dir := t.TempDir()
	return engineIn(t, dir, src), dir
}

// engineIn loads src written to dir/main.hcl, with its state in
// dir/.agentctl.
func engineIn(tb testing.TB, dir, src string) *Engine {
	tb.Helper()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		tb.Fatal(err)
	}
	cfg, diags := config.Load(dir, config.Options{Registry: builtin.Registry()})
	if diags.HasErrors() {
		tb.Fatal(diags)
	}
	sd, err := local.OpenDir(filepath.Join(dir, ".agentctl"))
	if err != nil {
		tb.Fatal(err)
	}
	return &Engine{Config: cfg, State: sd, Version: "test", Registry: builtin.Registry()}
}

func planApply(t testing.TB, e *Engine, opts PlanOptions) *state.State {
	t.Helper()
	ctx := context.Background()
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	opts.Refresh = true
	p, err := e.Plan(ctx, st, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Apply(ctx, st, p); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestApplyProgress: a run that is still working reports "Still
// executing..." progress events. The step waits until the test has seen
// one, so nothing depends on timing.
func TestApplyProgress(t *testing.T) {
	release := filepath.Join(t.TempDir(), "release")
	e, _ := newTestEngine(t, fmt.Sprintf(`
provider "scripted" {
  script "a" {
    reply {
      call "exec_command" {
        arguments = { cmd = "while [ ! -e %s ]; do sleep 0.01; done" }
      }
    }
    reply { text = "done" }
  }
}
provider "local" { isolation = "none" }
manifest "m" {}
sandbox "s" {
  provider = provider.local
  manifest = manifest.m
}
capability "shell" "default" {}
agent "a" {
  provider     = provider.scripted
  instructions = "x"
  sandbox      = sandbox.s
  capabilities = [capability.shell.default]
}
run "r" {
  agent = agent.a
  input = "go"
}
`, release))
	e.ProgressInterval = 20 * time.Millisecond
	var mu sync.Mutex
	var progress []Event
	e.Events = func(ev Event) {
		if ev.Type != EventApplyProgress || ev.Address != "run.r" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if len(progress) == 0 {
			if err := os.WriteFile(release, nil, 0o644); err != nil {
				t.Error(err)
			}
		}
		progress = append(progress, ev)
	}
	st := planApply(t, e, PlanOptions{})
	if st.Runs["run.r"].Status != RunCompleted {
		t.Fatalf("run.r: %s %s", st.Runs["run.r"].Status, st.Runs["run.r"].Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) == 0 || progress[0].Action != ActionExecute {
		t.Fatalf("progress events: %+v", progress)
	}
}

// TestSharedDeletedSandboxRestoredOnce: two runs that share a sandbox
// deleted after the last apply (on_exit = "delete") run in parallel; the
// sandbox is restored once, not once per run.
func TestSharedDeletedSandboxRestoredOnce(t *testing.T) {
	e, dir := newTestEngine(t, `
provider "scripted" {
  script "a" {
    reply {
      call "exec_command" {
        arguments = { cmd = "echo x >> shared.txt" }
      }
    }
    reply { text = "done" }
  }
}
provider "local" { isolation = "none" }
manifest "m" {}
sandbox "s" {
  provider = provider.local
  manifest = manifest.m
  on_exit  = "delete"
}
capability "shell" "default" {}
agent "a" {
  provider     = provider.scripted
  instructions = "x"
  sandbox      = sandbox.s
  capabilities = [capability.shell.default]
}
run "one" {
  agent = agent.a
  input = "one"
}
run "two" {
  agent = agent.a
  input = "two"
}
`)
	st := planApply(t, e, PlanOptions{})
	if got := st.Sandboxes["sandbox.s"].Status; got != statusDeleted {
		t.Fatalf("sandbox.s status %q after apply, want deleted", got)
	}
	st = planApply(t, e, PlanOptions{Replace: []string{"run.one", "run.two"}})
	for _, r := range []string{"run.one", "run.two"} {
		if st.Runs[r].Status != RunCompleted {
			t.Fatalf("%s: %s %s", r, st.Runs[r].Status, st.Runs[r].Error)
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, ".agentctl", "sandboxes"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, en := range entries {
		if !strings.HasPrefix(en.Name(), ".") {
			names = append(names, en.Name())
		}
	}
	// The restored sandbox was deleted again by on_exit: nothing is left.
	if len(names) != 0 {
		t.Fatalf("sandbox directories left: %v (a second restore leaves an untracked one)", names)
	}
}
