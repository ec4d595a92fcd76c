package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/agentctl/agentctl/providers/e2b/e2bfake"
)

// The E2B pipeline test runs the real agentctl binary, built here,
// against the in-process E2B fake, which the child reaches as it would
// reach E2B: through the fake's HTTPS proxy, trusting the fake's
// certificate authority (e2bfake.Server.Environ). Every exchange is
// validated against E2B's published documents; commands really run,
// confined to the fake's Root.

type e2bPipeline struct {
	hostedPipeline
	fake *e2bfake.Server
}

func newE2BPipeline(t *testing.T) *e2bPipeline {
	t.Helper()
	fake := e2bfake.New(t)
	return &e2bPipeline{hostedPipeline: newHostedPipeline(t, "E2B", fake.APIKey, fake.Environ()...), fake: fake}
}

func (p *e2bPipeline) write(tmpl string) {
	p.t.Helper()
	p.writeConfig(strings.NewReplacer("{{ROOT}}", p.fake.Root, "{{GATES}}", p.fake.Root), tmpl)
}

func (p *e2bPipeline) creates() int {
	return len(slices.DeleteFunc(p.fake.Requests(), func(r string) bool { return r != "POST api /sandboxes" }))
}

func (p *e2bPipeline) requests(contains string) int {
	return len(slices.DeleteFunc(p.fake.Requests(), func(r string) bool { return !strings.Contains(r, contains) }))
}

var e2bPipelineConfig = gatedPipelineConfig("e2b", `  network  = "none"

  metadata   = { team = "data" }
  env        = { GREETING = "hi" }
  timeout    = "30m"
  on_timeout = "pause"`)

// TestE2BPipeline drives a scripted-model pipeline on the E2B fake with
// the real binary: an apply killed with SIGKILL while E2B creates its
// sandbox leaves nothing behind once the next apply runs; an apply killed
// in the middle of a slow tool call resumes in the same sandbox; exec and
// apply_patch work in it; on_exit = "stop" pauses it and agentctl exec
// resumes it; a sandbox killed behind agentctl's back is restored from
// its snapshot without re-running anything; destroy leaves nothing.
func TestE2BPipeline(t *testing.T) {
	p := newE2BPipeline(t)
	p.write(e2bPipelineConfig)
	ws := filepath.Join(p.fake.Root, "workspace")

	// 1. apply killed while E2B creates the sandbox: the sandbox E2B made
	// is not in the state.
	release := p.fake.HoldCreates()
	var out bytes.Buffer
	apply, exited := p.start(&out, "apply", "-auto-approve")
	waitFor(t, "E2B created the sandbox", exited, &out, func() bool { return len(p.fake.IDs()) == 1 })
	orphan := p.fake.IDs()[0]
	if err := apply.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	release()

	// 2. apply, killed while the second tool call runs; the orphan of
	// the first is killed before a sandbox is created.
	out.Reset()
	apply, exited = p.start(&out, "apply", "-auto-approve")
	waitFor(t, "the slow tool call started", exited, &out, func() bool { return exists(filepath.Join(p.fake.Root, "gate.waiting")) })
	if err := apply.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	ids := p.fake.IDs()
	if len(ids) != 1 || ids[0] == orphan || p.creates() != 2 {
		t.Fatalf("after the second killed apply: sandboxes %v (orphan %s), %d creates; want one new sandbox", ids, orphan, p.creates())
	}
	id := ids[0]
	created := p.fake.Created(id)
	md, _ := created["metadata"].(map[string]any)
	if md["team"] != "data" || md["dev.agentctl.address"] != "sandbox.box" || created["autoPause"] != true || created["timeout"] != float64(1800) ||
		created["allow_internet_access"] != false || fmt.Sprint(created["envVars"]) != "map[GREETING:hi]" {
		t.Errorf("create request: %v", created)
	}

	// 3. plan resumes the run; apply completes it in the same sandbox.
	plan := p.run("plan")
	if !strings.Contains(plan, "run.report will be resumed") || strings.Contains(plan, "sandbox.box will be") {
		t.Fatalf("plan after the crash:\n%s", plan)
	}
	if err := os.WriteFile(filepath.Join(p.fake.Root, "gate.open"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := p.run("apply", "-auto-approve"); !strings.Contains(res, "Apply complete") {
		t.Errorf("resuming apply:\n%s", res)
	}
	if ids := p.fake.IDs(); len(ids) != 1 || ids[0] != id || p.creates() != 2 {
		t.Fatalf("after resuming: sandboxes %v, %d creates; want only %s", ids, p.creates(), id)
	}
	if report, err := os.ReadFile(filepath.Join(ws, "output", "report.txt")); err != nil || string(report) != "HELLO FROM THE PATCH\n" {
		t.Errorf("output/report.txt = %q, %v", report, err)
	}
	logBefore, err := os.ReadFile(filepath.Join(ws, "output", "log.txt"))
	if err != nil || !strings.Contains(string(logBefore), "step2") {
		t.Fatalf("output/log.txt = %q, %v", logBefore, err)
	}

	// 4. on_exit = "stop" paused it; agentctl exec resumes it for the
	// command and pauses it again.
	if got := p.fake.State(id); got != "paused" {
		t.Fatalf("sandbox state after apply = %q, want paused (on_exit = \"stop\")", got)
	}
	if plan := p.run("plan"); !strings.Contains(plan, "No changes") {
		t.Errorf("plan after a complete apply:\n%s", plan)
	}
	if got := p.run("exec", "sandbox.box", "--", "sh", "-c", `cat output/report.txt; echo "$GREETING"`); !strings.Contains(got, "HELLO FROM THE PATCH") || !strings.Contains(got, "hi") {
		t.Errorf("agentctl exec output:\n%s", got)
	}
	if got := p.fake.State(id); got != "paused" || p.requests("/connect") == 0 {
		t.Errorf("after agentctl exec: sandbox %q, %d connects; want paused again after a resume", got, p.requests("/connect"))
	}

	// 5. The sandbox is killed behind agentctl's back: plan says restore,
	// apply restores the workspace from the snapshot and re-runs nothing.
	p.fake.Kill(id)
	plan = p.run("plan")
	if !strings.Contains(plan, "sandbox.box will be restored from its snapshot") || strings.Contains(plan, "run.report will be") {
		t.Fatalf("plan after the sandbox was killed:\n%s", plan)
	}
	p.run("apply", "-auto-approve")
	ids = p.fake.IDs()
	if len(ids) != 1 || ids[0] == id {
		t.Fatalf("after restore: sandboxes %v (old %s)", ids, id)
	}
	if logAfter, err := os.ReadFile(filepath.Join(ws, "output", "log.txt")); err != nil || !bytes.Equal(logAfter, logBefore) {
		t.Errorf("output/log.txt after restore = %q, %v; want the snapshot's %q (nothing re-run)", logAfter, err, logBefore)
	}

	// 6. destroy leaves nothing.
	p.run("destroy", "-auto-approve")
	if ids := p.fake.IDs(); len(ids) != 0 {
		t.Errorf("sandboxes left after destroy: %v", ids)
	}
	if exists(ws) {
		t.Errorf("the workspace survived destroy")
	}
	filepath.WalkDir(filepath.Join(p.dir, ".agentctl"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(p.fake.APIKey)) {
				t.Errorf("%s contains the E2B API key", path)
			}
		}
		return nil
	})
}
