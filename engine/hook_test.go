package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/engine/agentloop"
)

const hooksConfig = `
variable "token" {
  default   = "s3cr3t-t0ken"
  sensitive = true
}
provider "scripted" {
  script "a" {
    reply {
      call "note" {
        arguments = { key = "s3cr3t-t0ken" }
      }
    }
    reply { text = "done" }
  }
}
agent "a" {
  provider = provider.scripted
  hook "tool_start" {
    command = ["sh", "-c", "cat > event.json; echo 'blocked: no notes today' >&2; exit 1"]
  }
  hook "tool_end" {
    command = ["sh", "-c", "sleep 30 & sleep 30"]
    timeout = "200ms"
  }
}
run "r" {
  agent = agent.a
  input = "go"
  hook "run_end" {
    command = ["sh", "-c", "cat >> run_end.json"]
  }
}
`

// TestHooksBlockScrubAndTimeOut: a failing tool_start hook blocks the
// call and the model reads its stderr; the event on its stdin never holds
// the sensitive value; a hook past its timeout is killed with its
// children and reported without failing the run; run_end runs once.
func TestHooksBlockScrubAndTimeOut(t *testing.T) {
	e, dir := newTestEngine(t, hooksConfig)
	var warnings []string
	e.Events = func(ev Event) {
		if strings.HasPrefix(ev.Message, "Warning: ") {
			warnings = append(warnings, ev.Message)
		}
	}
	began := time.Now()
	if err := applyErr(t, e, PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("apply took %s: the timed-out hook was not killed", d)
	}
	st := readState(t, e)
	r := st.Runs["run.r"]
	if r.Status != RunCompleted {
		t.Fatalf("run.r = %+v", r)
	}
	steps, err := e.readJournal(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	var out string
	for _, s := range steps {
		if s.Kind == agentloop.StepTool {
			out = s.Result.Output
		}
	}
	if out != "blocked: no notes today" {
		t.Fatalf("the model saw %q", out)
	}
	event, err := os.ReadFile(filepath.Join(dir, "event.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(event), "s3cr3t") || !strings.Contains(string(event), `"event":"tool_start"`) || !strings.Contains(string(event), `"run":"run.r"`) {
		t.Fatalf("event on stdin: %s", event)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "tool_end hook sh (") || !strings.Contains(warnings[0], "timed out after 200ms") {
		t.Fatalf("warnings: %q", warnings)
	}
	ends, err := os.ReadFile(filepath.Join(dir, "run_end.json"))
	if err != nil || strings.Count(string(ends), `"event":"run_end"`) != 1 || !strings.Contains(string(ends), `"status":"completed"`) {
		t.Fatalf("run_end: %s %v", ends, err)
	}
}
