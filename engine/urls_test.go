package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const urlsConfig = `
provider "scripted" {
  script "a" {
    reply {
      call "note_url" {
        arguments = {}
      }
    }
    reply { text = "done" }
  }
}
provider "local" { isolation = "none" }
sandbox "s" {
  provider = provider.local
  ports    = [8080]
}
capability "command" "note_url" {
  description = "Write the URL down."
  command     = ["sh", "-c", "echo \"$AGENTCTL_URL_8080\" > url.txt"]
}
agent "a" {
  provider     = provider.scripted
  instructions = "x"
  sandbox      = sandbox.s
  capabilities = [capability.command.note_url]
}
run "r" {
  agent = agent.a
  input = "Open ${sandbox.s.urls["8080"]}."
}
`

// A run input that takes a sandbox URL plans on a fresh configuration
// (targeted too) as known after the sandbox is created; apply gives the
// run the URL (and its command tool AGENTCTL_URL_8080); a URL that changes
// afterwards does not change the run's digest.
func TestRunInputSandboxURL(t *testing.T) {
	e, _ := newTestEngine(t, urlsConfig)
	ctx := context.Background()
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, targets := range [][]string{nil, {"run.r"}} {
		p, err := e.Plan(ctx, st, PlanOptions{Refresh: true, Targets: targets})
		if err != nil {
			t.Fatalf("plan (targets %v): %v", targets, err)
		}
		c := p.Change("run.r")
		if c == nil || c.Action != ActionExecute || c.Attributes["input"] != "(known after sandbox.s is created)" {
			t.Fatalf("plan (targets %v): run.r %+v", targets, c)
		}
		if p.Change("sandbox.s") == nil {
			t.Fatalf("plan (targets %v) does not create sandbox.s", targets)
		}
	}

	st = planApply(t, e, PlanOptions{})
	r := st.Runs["run.r"]
	if r.Status != RunCompleted {
		t.Fatalf("run.r: %s %s", r.Status, r.Error)
	}
	url := st.Sandboxes["sandbox.s"].URLs["8080"]
	if url != "http://127.0.0.1:8080" {
		t.Fatalf("recorded URL %q", url)
	}
	ws := filepath.Join(e.State.Abs("sandboxes"))
	var got []byte
	filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "url.txt" {
			got, _ = os.ReadFile(p)
		}
		return nil
	})
	if string(got) != url+"\n" {
		t.Errorf("AGENTCTL_URL_8080 = %q, want %q", got, url)
	}
	journal, err := os.ReadFile(e.State.Abs(r.Journal))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(journal), "Open "+url+".") {
		t.Errorf("the run's transcript lacks its input with the URL:\n%s", journal)
	}

	p, err := e.Plan(ctx, st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Change("run.r"); c.Action != ActionNoop || c.Attributes["input"] != "Open "+url+"." {
		t.Fatalf("plan after apply: run.r %+v", c)
	}

	// The sandbox comes back elsewhere (as a stopped Docker sandbox does
	// on new host ports): the run is not re-run for that.
	st.Sandboxes["sandbox.s"].URLs["8080"] = "http://127.0.0.1:9090"
	p, err = e.Plan(ctx, st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Change("run.r"); c.Action != ActionNoop || c.Attributes["input"] != "Open http://127.0.0.1:9090." {
		t.Fatalf("plan after the URL changed: run.r %+v", c)
	}
}

// A run may take the URL of a sandbox its agents do not use, through any
// function: that sandbox is running while the run executes (started if it
// was stopped), and its on_exit applies after the apply.
func TestRunInputOtherSandboxURL(t *testing.T) {
	e, _ := newTestEngine(t, strings.Replace(urlsConfig, `run "r" {
  agent = agent.a
  input = "Open ${sandbox.s.urls["8080"]}."
}`, `sandbox "web" {
  provider = provider.local
  ports    = [3000]
}
run "r" {
  agent = agent.a
  input = "Open ${upper(sandbox.web.urls["3000"])}."
}`, 1))
	st := planApply(t, e, PlanOptions{})
	if r := st.Runs["run.r"]; r.Status != RunCompleted {
		t.Fatalf("run.r: %s %s", r.Status, r.Error)
	}
	st = planApply(t, e, PlanOptions{Replace: []string{"run.r"}})
	r := st.Runs["run.r"]
	if r.Status != RunCompleted {
		t.Fatalf("run.r again: %s %s", r.Status, r.Error)
	}
	journal, err := os.ReadFile(e.State.Abs(r.Journal))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(journal), "Open HTTP://127.0.0.1:3000.") {
		t.Errorf("the run's transcript lacks its input with the URL:\n%s", journal)
	}
	if got := st.Sandboxes["sandbox.web"].Status; got != "stopped" {
		t.Errorf("sandbox.web after the apply: %q, want stopped (on_exit)", got)
	}
}
