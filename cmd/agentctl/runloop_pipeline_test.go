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

	"github.com/agentctl/agentctl/providers/runloop/runloopfake"
)

// The Runloop pipeline tests run the real agentctl binary, built here,
// against the in-process Runloop fake, which the child reaches through
// RUNLOOP_BASE_URL with the fake's key in RUNLOOP_API_KEY. Every exchange
// is validated against the derived API document; commands really run,
// each devbox with a disk of its own seen at the fake's Root (read here
// through the fake). Outside Root a devbox sees the host, so the gate
// files that pace a slow tool call live in a host directory.

type runloopPipeline struct {
	hostedPipeline
	gates string
	fake  *runloopfake.Server
}

func newRunloopPipeline(t *testing.T) *runloopPipeline {
	t.Helper()
	fake := runloopfake.New(t)
	h := newHostedPipeline(t, "Runloop", fake.APIKey, "RUNLOOP_API_KEY="+fake.APIKey, "RUNLOOP_BASE_URL="+fake.URL())
	return &runloopPipeline{hostedPipeline: h, gates: t.TempDir(), fake: fake}
}

func (p *runloopPipeline) write(tmpl string) {
	p.t.Helper()
	p.writeConfig(strings.NewReplacer("{{ROOT}}", p.fake.Root, "{{GATES}}", p.gates), tmpl)
}

// requests counts the requests whose "METHOD path" matches.
func (p *runloopPipeline) requests(match func(string) bool) int {
	return len(slices.DeleteFunc(p.fake.Requests(), func(r string) bool { return !match(r) }))
}

func (p *runloopPipeline) creates() int {
	return p.requests(func(r string) bool { return r == "POST /v1/devboxes" })
}

// file reads a file of devbox id's workspace.
func (p *runloopPipeline) file(id, rel string) string {
	p.t.Helper()
	b, err := p.fake.ReadFile(id, p.fake.Root+"/workspace/"+rel)
	if err != nil {
		p.t.Fatalf("reading %s in devbox %s: %v", rel, id, err)
	}
	return string(b)
}

var runloopPipelineConfig = gatedPipelineConfig("runloop", `
  metadata        = { team = "data" }
  env             = { GREETING = "hi" }
  timeout         = "30m"
  commit_snapshot = true`)

// TestRunloopPipeline drives a scripted-model pipeline on the Runloop
// fake with the real binary: an apply killed in the middle of a slow tool
// call resumes in the same devbox; exec and apply_patch work in it; the
// apply takes a disk snapshot; on_exit = "stop" suspends the devbox and
// agentctl exec resumes it; a devbox shut down behind agentctl's back is
// restored from its disk snapshot without re-running anything; destroy
// leaves no devbox running and no snapshot.
func TestRunloopPipeline(t *testing.T) {
	p := newRunloopPipeline(t)
	p.write(runloopPipelineConfig)

	id := p.killMidToolCall()
	logBefore := p.resume(id)
	p.stopped(id)
	p.restored(id, logBefore)

	p.run("destroy", "-auto-approve")
	if live := p.fake.Live(); len(live) != 0 {
		t.Errorf("devboxes still running after destroy: %v", live)
	}
	if snaps := p.fake.Snapshots(); len(snaps) != 0 {
		t.Errorf("disk snapshots left after destroy: %v", snaps)
	}
	p.noKeyInState()
}

// killMidToolCall kills an apply with SIGKILL while the second tool call
// runs and returns the one devbox it made.
func (p *runloopPipeline) killMidToolCall() string {
	t := p.t
	var out bytes.Buffer
	apply, exited := p.start(&out, "apply", "-auto-approve")
	waitFor(t, "the slow tool call started", exited, &out, func() bool { return exists(filepath.Join(p.gates, "gate.waiting")) })
	if err := apply.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	live := p.fake.Live()
	if len(live) != 1 || p.creates() != 1 {
		t.Fatalf("after the killed apply: devboxes %v, %d creates; want one", live, p.creates())
	}
	id := live[0]
	d := p.fake.Devbox(id)
	md, _ := d["metadata"].(map[string]any)
	lp, _ := d["launch_parameters"].(map[string]any)
	if md["team"] != "data" || md["dev.agentctl.address"] != "sandbox.box" || lp["keep_alive_time_seconds"] != float64(1800) {
		t.Errorf("created devbox: %v", d)
	}
	return id
}

// resume checks that plan resumes the run and apply completes it in the
// same devbox; it returns output/log.txt.
func (p *runloopPipeline) resume(id string) string {
	t := p.t
	plan := p.run("plan")
	if !strings.Contains(plan, "run.report will be resumed") || strings.Contains(plan, "sandbox.box will be") {
		t.Fatalf("plan after the crash:\n%s", plan)
	}
	if err := os.WriteFile(filepath.Join(p.gates, "gate.open"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := p.run("apply", "-auto-approve"); !strings.Contains(res, "Apply complete") {
		t.Errorf("resuming apply:\n%s", res)
	}
	if live := p.fake.Live(); len(live) != 1 || live[0] != id || p.creates() != 1 {
		t.Fatalf("after resuming: devboxes %v, %d creates; want only %s", live, p.creates(), id)
	}
	if report := p.file(id, "output/report.txt"); report != "HELLO FROM THE PATCH\n" {
		t.Errorf("output/report.txt = %q", report)
	}
	log := p.file(id, "output/log.txt")
	if !strings.Contains(log, "step1") || !strings.Contains(log, "step2") {
		t.Fatalf("output/log.txt = %q", log)
	}
	if snaps := p.fake.Snapshots(); len(snaps) == 0 {
		t.Fatalf("the apply took no disk snapshot (commit_snapshot = true)")
	}
	return log
}

// stopped checks that on_exit = "stop" suspended the devbox and that
// agentctl exec resumes it for the command and suspends it again.
func (p *runloopPipeline) stopped(id string) {
	t := p.t
	if got := p.fake.Status(id); got != "suspended" {
		t.Fatalf("devbox status after apply = %q, want suspended (on_exit = \"stop\")", got)
	}
	if plan := p.run("plan"); !strings.Contains(plan, "No changes") {
		t.Errorf("plan after a complete apply:\n%s", plan)
	}
	got := p.run("exec", "sandbox.box", "--", "sh", "-c", `cat output/report.txt; echo "$GREETING"`)
	if !strings.Contains(got, "HELLO FROM THE PATCH") || !strings.Contains(got, "hi") {
		t.Errorf("agentctl exec output:\n%s", got)
	}
	resumes := p.requests(func(r string) bool { return r == "POST /v1/devboxes/"+id+"/resume" })
	if st := p.fake.Status(id); st != "suspended" || resumes == 0 {
		t.Errorf("after agentctl exec: devbox %q, %d resumes; want suspended again after a resume", st, resumes)
	}
}

// restored shuts the devbox down behind agentctl's back: plan says
// restore, apply creates a devbox from the disk snapshot and re-runs
// nothing.
func (p *runloopPipeline) restored(id, logBefore string) {
	t := p.t
	p.fake.Shutdown(id)
	plan := p.run("plan")
	if !strings.Contains(plan, "sandbox.box will be restored from its snapshot") || strings.Contains(plan, "run.report will be") {
		t.Fatalf("plan after the devbox was shut down:\n%s", plan)
	}
	p.run("apply", "-auto-approve")
	live := p.fake.Live()
	if len(live) != 1 || live[0] == id {
		t.Fatalf("after restore: devboxes %v (old %s)", live, id)
	}
	snaps := p.fake.Snapshots()
	if from := p.fake.Devbox(live[0])["snapshot_id"]; !slices.Contains(snaps, fmt.Sprint(from)) {
		t.Errorf("the restored devbox was created from snapshot %v; want one of %v", from, snaps)
	}
	if logAfter := p.file(live[0], "output/log.txt"); logAfter != logBefore {
		t.Errorf("output/log.txt after restore = %q; want the snapshot's %q (nothing re-run)", logAfter, logBefore)
	}
}

const runloopCreateConfig = `
provider "runloop" {}

provider "scripted" {
  script "one" {
    reply {
      call "exec_command" {
        arguments = { cmd = "echo done > out.txt" }
      }
    }
    reply { text = "done" }
  }
}

manifest "work" {
  root = "{{ROOT}}/workspace"
}

sandbox "box" {
  provider = provider.runloop
  manifest = manifest.work
}

capability "shell" "default" {}

agent "one" {
  provider     = provider.scripted
  instructions = "Do it."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default]
  max_turns    = 4
}

run "once" {
  agent = agent.one
  input = "Do it."
}
`

// TestRunloopKilledMidCreate: an apply killed with SIGKILL after Runloop
// made its devbox but before agentctl heard of it leaves a devbox the
// state does not hold; the next apply finds it by its metadata and shuts
// it down before creating its own, so nothing runs untracked, and
// destroy then leaves nothing running.
func TestRunloopKilledMidCreate(t *testing.T) {
	p := newRunloopPipeline(t)
	p.write(runloopCreateConfig)
	release := p.fake.HoldCreates()
	var out bytes.Buffer
	apply, exited := p.start(&out, "apply", "-auto-approve")
	waitFor(t, "Runloop created the devbox", exited, &out, func() bool { return len(p.fake.Live()) == 1 })
	orphan := p.fake.Live()[0]
	if err := apply.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	release()
	if st := p.fake.Status(orphan); st != "running" {
		t.Fatalf("the orphan is %q before the next apply; want running (left behind)", st)
	}

	p.run("apply", "-auto-approve")
	live := p.fake.Live()
	if st := p.fake.Status(orphan); st != "shutdown" || len(live) != 1 || live[0] == orphan || p.creates() != 2 {
		t.Fatalf("after the next apply: orphan %s is %q, running %v, %d creates; want the orphan shut down and one new devbox", orphan, st, live, p.creates())
	}
	if got := p.file(live[0], "out.txt"); got != "done\n" {
		t.Errorf("out.txt = %q", got)
	}
	p.run("destroy", "-auto-approve")
	if live := p.fake.Live(); len(live) != 0 {
		t.Errorf("devboxes still running after destroy: %v", live)
	}
}
