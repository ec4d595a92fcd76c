package clitest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Analyst is the offline data analyst example (examples/docker-offline.hcl
// and its twins for other providers: run.report in sandbox.box writes
// out/report.md and out/total.txt during a long step, "sleep 3", and the
// output answer) as a provider's tests apply it.
type Analyst struct {
	// New returns a CLI in a fresh directory holding the example, which
	// destroys what it created when the test ends.
	New func() *CLI
	// Left lists what the provider still holds of a state lineage.
	Left func(lineage string) []string
}

// analystFiles is what the analyst's run writes.
const analystFiles = "cat out/report.md out/total.txt"

// ApplyResumeAfterKill applies the example as a user would, once straight
// through and once killed with SIGKILL during its long step: plan then
// says resume, the resumed apply ends with the same output and files, and
// destroy leaves nothing of either state's lineage.
func (a Analyst) ApplyResumeAfterKill(t *testing.T) {
	t.Helper()
	c := a.New()
	mustContain(t, "apply", c.OK("apply", "-auto-approve", c.File), "1 run executed", "token is set")
	answer := c.OK("output", "-config="+c.File, "answer")
	files := c.Exec("sandbox.box", analystFiles)
	if !strings.Contains(files, "Total: 14300000") {
		t.Fatalf("the report: %q", files)
	}
	a.destroy(t, c)

	c = a.New()
	killDuringLongStep(t, c)
	if st := c.MustState(); st.Runs["run.report"] == nil || st.Runs["run.report"].Status != "running" {
		t.Fatalf("after kill -9, run.report is %+v", st.Runs["run.report"])
	}
	out, code := c.Run("plan", "-detailed-exitcode", c.File)
	if code != 2 {
		t.Fatalf("plan after kill: exit %d\n%s", code, out)
	}
	mustContain(t, "plan after kill", out, "# run.report will be resumed", "interrupted at turn", "0 runs to execute, 1 to resume")
	if strings.Contains(out, "sandbox.box will") {
		t.Fatalf("plan after kill changes the sandbox:\n%s", out)
	}
	mustContain(t, "resumed apply", c.OK("apply", "-auto-approve", c.File), "0 runs executed, 1 resumed")
	if got := c.OK("output", "-config="+c.File, "answer"); got != answer {
		t.Fatalf("output after resume %q, uninterrupted %q", got, answer)
	}
	if got := c.Exec("sandbox.box", analystFiles); got != files {
		t.Fatalf("files after resume %q, uninterrupted %q", got, files)
	}
	a.destroy(t, c)
}

// destroy destroys what c's configuration created and checks the
// provider holds nothing of its lineage.
func (a Analyst) destroy(t *testing.T, c *CLI) {
	t.Helper()
	lineage := c.MustState().Lineage
	c.OK("destroy", "-auto-approve", c.File)
	if left := a.Left(lineage); len(left) != 0 {
		t.Fatalf("after destroy: %v", left)
	}
}

// killDuringLongStep starts apply and kills it with SIGKILL once the
// model turn asking for the long step is checkpointed in its journal.
func killDuringLongStep(t *testing.T, c *CLI) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := c.Command(ctx, "apply", "-auto-approve", c.File)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	journals := filepath.Join(c.StateDir(), "journals", "*.jsonl")
	for checkpointed := false; !checkpointed; {
		select {
		case err := <-exited:
			t.Fatalf("apply ended (%v) before its long step was checkpointed:\n%s", err, out.String())
		case <-time.After(50 * time.Millisecond):
		}
		names, _ := filepath.Glob(journals)
		for _, n := range names {
			if j, _ := os.ReadFile(n); bytes.Contains(j, []byte("sleep 3")) {
				checkpointed = true
			}
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
}

func mustContain(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Fatalf("%s: missing %q in:\n%s", what, w, out)
		}
	}
}
