package engine

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/mcptest"
)

// TestRunDrivesAREPLAndEndsItsSessions: a scripted agent starts busybox-
// free sh on a terminal, drives it across turns with write_stdin, leaves a
// long command running; when the run ends every session process is gone.
func TestRunDrivesAREPLAndEndsItsSessions(t *testing.T) {
	mark := strconv.FormatInt(time.Now().UnixNano(), 10)
	e, _ := newTestEngine(t, fmt.Sprintf(`
provider "scripted" {
  script "a" {
    reply {
      call "exec_command" {
        arguments = { cmd = "sh", tty = true, yield_time_ms = 300 }
      }
    }
    reply {
      call "write_stdin" {
        arguments = { session_id = 1, chars = "echo product-$((6*7))\n", yield_time_ms = 2000 }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "sleep 300", yield_time_ms = 0 }
      }
    }
    reply { text = "done" }
  }
}
provider "local" { isolation = "none" }
manifest "m" {
  env "SESSION_MARK" { value = %q }
}
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
`, mark))
	st := planApply(t, e, PlanOptions{})
	if r := st.Runs["run.r"]; r == nil || r.Status != RunCompleted {
		t.Fatalf("run.r = %+v", r)
	}
	outs := toolOutputs(journalSteps(t, e, st, "run.r"))
	all := fmt.Sprint(outs)
	for _, want := range []string{"Process running with session ID 1", "product-42", "Process running with session ID 2"} {
		if !strings.Contains(all, want) {
			t.Errorf("tool outputs lack %q: %s", want, all)
		}
	}
	mcptest.AwaitNoProcesses(t, "SESSION_MARK="+mark, "the run's sessions after it ended")
}
