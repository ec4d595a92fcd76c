package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/fakedaytona"
	"github.com/agentctl/agentctl/state/local"
)

// The Daytona pipeline tests run the real agentctl binary, built here,
// against the in-process Daytona fake (which validates every request and
// response against the published OpenAPI documents and really runs the
// toolbox commands, confined to its Root). Nothing reaches the network
// and no key is needed: the child gets the fake's key in DAYTONA_API_KEY.

// pipeline is one configuration directory driven by the agentctl binary.
type pipeline struct {
	hostedPipeline
	fake *fakedaytona.Server
}

func newPipeline(t *testing.T) *pipeline {
	t.Helper()
	fake := fakedaytona.New(t)
	return &pipeline{hostedPipeline: newHostedPipeline(t, "Daytona", fake.APIKey, "DAYTONA_API_KEY="+fake.APIKey), fake: fake}
}

// write writes the configuration main.hcl from a template: {{ROOT}} is
// the fake's filesystem root and {{API}} its API URL.
func (p *pipeline) write(tmpl string) {
	p.t.Helper()
	p.writeConfig(strings.NewReplacer("{{ROOT}}", p.fake.Root, "{{API}}", p.fake.URL), tmpl)
}

// state reads the state (the state file and its log).
func (p *pipeline) state() stateFile {
	p.t.Helper()
	var st stateFile
	d, err := local.OpenDir(filepath.Join(p.dir, ".agentctl"))
	if err != nil {
		p.t.Fatal(err)
	}
	full, err := d.Read(context.Background())
	if err != nil {
		p.t.Fatalf("reading the state: %v", err)
	}
	b, err := json.Marshal(full)
	if err != nil {
		p.t.Fatal(err)
	}
	if err := json.Unmarshal(b, &st); err != nil {
		p.t.Fatalf("decoding the state: %v\n%s", err, b)
	}
	return st
}

// stateFile is the part of state.json these tests look at.
type stateFile struct {
	Lineage   string `json:"lineage"`
	Sandboxes map[string]struct {
		Status  string `json:"status"`
		Session struct {
			ID string `json:"id"`
		} `json:"session"`
		Snapshot string `json:"snapshot"`
	} `json:"sandboxes"`
	Runs map[string]struct {
		Status     string          `json:"status"`
		Output     json.RawMessage `json:"output"`
		Provenance struct {
			CompletedAt string `json:"completed_at"`
		} `json:"provenance"`
	} `json:"runs"`
}

// creates counts the sandbox create requests the fake has served.
func (p *pipeline) creates() int {
	n := 0
	for _, r := range p.fake.Requests() {
		if r == "POST /api/sandbox" {
			n++
		}
	}
	return n
}

// waitFor polls cond until it holds; it fails the test if agentctl exits
// first (the thing waited for can no longer happen). The generous bound
// only turns a hang into a failure; nothing depends on how long it takes.
func waitFor(t *testing.T, what string, exited <-chan error, out *bytes.Buffer, cond func() bool) {
	t.Helper()
	deadline := time.After(3 * time.Minute)
	for !cond() {
		select {
		case err := <-exited:
			t.Fatalf("agentctl exited (%v) before %s:\n%s", err, what, out)
		case <-deadline:
			t.Fatalf("gave up waiting until %s", what)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

const daytonaPipelineConfig = `
provider "daytona" {
  api_url = "{{API}}"
}

provider "scripted" {
  script "analyst" {
    reply {
      call "exec_command" {
        arguments = { cmd = "cat data/input.txt && echo step1 >> output/log.txt", yield_time_ms = 30000 }
      }
    }
    reply {
      text = "Now the slow part."
      call "exec_command" {
        arguments = { cmd = "touch {{ROOT}}/gate.waiting; while [ ! -e {{ROOT}}/gate.open ]; do sleep 0.05; done; echo step2 >> output/log.txt" }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "tr a-z A-Z < data/input.txt | tee output/report.txt" }
      }
    }
    reply {
      text = "Report written to output/report.txt."
    }
  }
%s
}

manifest "work" {
  root = "{{ROOT}}/workspace"
  file "data/input.txt" {
    content = "hello from the manifest\n"
  }
  dir "output" {}
}

sandbox "box" {
  provider = provider.daytona
  manifest = manifest.work
  on_exit  = "stop"

  labels             = { team = "data" }
  env                = { GREETING = "hi" }
  auto_stop_interval = 30
  network_allow_list = ["10.0.0.0/8", "192.168.1.0/24"]
  create_timeout     = "5m"
  start_timeout      = "2m"
}

capability "shell" "default" {}

agent "analyst" {
  provider     = provider.scripted
  instructions = "Write the report."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default]
  max_turns    = 8
}

run "report" {
  agent = agent.analyst
  input = "Write the report."
}

output "answer" {
  value = run.report.output
}
%s
`

// A second run, added later, that needs the (stopped) sandbox again.
const followupScript = `
  script "checker" {
    reply {
      call "exec_command" {
        arguments = { cmd = "cat output/report.txt; echo checked >> output/log.txt", yield_time_ms = 30000 }
      }
    }
    reply { text = "The report is there." }
  }`

const followupRun = `
agent "checker" {
  provider     = provider.scripted
  instructions = "Check the report."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default]
}

run "check" {
  agent      = agent.checker
  input      = "Check the report."
  depends_on = [run.report]
}
`

// TestDaytonaPipeline drives a whole scripted-model pipeline on the
// Daytona fake with the real binary: apply killed with SIGKILL in the
// middle of a slow tool call, plan says resume, apply resumes in the same
// sandbox; on_exit = "stop" leaves the sandbox stopped and the next apply
// that needs it starts it; a sandbox deleted behind agentctl's back is
// restored from its snapshot without re-running anything; destroy removes
// it all.
func TestDaytonaPipeline(t *testing.T) {
	p := newPipeline(t)
	p.write(fmt.Sprintf(daytonaPipelineConfig, "", ""))
	ws := filepath.Join(p.fake.Root, "workspace")

	// 1. apply, killed while the second tool call runs.
	var out bytes.Buffer
	apply := p.command("apply", "-auto-approve")
	apply.Stdout, apply.Stderr = &out, &out
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = apply.Process.Kill() }) // if a check fails first
	exited := make(chan error, 1)
	go func() { exited <- apply.Wait() }()
	waitFor(t, "the slow tool call started", exited, &out, func() bool { return exists(filepath.Join(p.fake.Root, "gate.waiting")) })
	if err := apply.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	if !strings.Contains(out.String(), "hello from the manifest") {
		t.Errorf("the first tool call's output was not streamed before the kill:\n%s", out.String())
	}

	ids := p.fake.IDs()
	if len(ids) != 1 || p.creates() != 1 {
		t.Fatalf("after the killed apply: sandboxes %v, %d creates; want one", ids, p.creates())
	}
	id := ids[0]
	// The sandbox settings reached the create request.
	created := p.fake.Created(id)
	if created["networkAllowList"] != "10.0.0.0/8,192.168.1.0/24" || created["autoStopInterval"] != float64(30) ||
		fmt.Sprint(created["env"]) != "map[GREETING:hi]" {
		t.Errorf("create request: %v", created)
	}
	if l := p.fake.Labels(id); l["team"] != "data" || l["dev.agentctl.managed"] != "true" || l["dev.agentctl.address"] != "sandbox.box" {
		t.Errorf("labels: %v", l)
	}
	st := p.state()
	if got := st.Sandboxes["sandbox.box"].Session.ID; got != id {
		t.Fatalf("state records sandbox %q, the fake has %q", got, id)
	}
	if got := st.Runs["run.report"].Status; got != "running" {
		t.Fatalf("run status after kill -9 = %q, want running (a crashed apply)", got)
	}

	// 2. plan says the run resumes, in the same sandbox.
	plan := p.run("plan")
	if !strings.Contains(plan, "run.report will be resumed") || !strings.Contains(plan, "interrupted at turn 2") {
		t.Fatalf("plan after the crash does not resume run.report:\n%s", plan)
	}
	if strings.Contains(plan, "sandbox.box will be") {
		t.Errorf("plan wants to change the sandbox after the crash:\n%s", plan)
	}

	// 3. apply resumes and completes; no second sandbox.
	if err := os.WriteFile(filepath.Join(p.fake.Root, "gate.open"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	res := p.run("apply", "-auto-approve")
	if !strings.Contains(res, "Apply complete") {
		t.Errorf("second apply output:\n%s", res)
	}
	if ids := p.fake.IDs(); len(ids) != 1 || ids[0] != id || p.creates() != 1 {
		t.Fatalf("after resuming: sandboxes %v, %d creates; want only %s", ids, p.creates(), id)
	}
	if got := strings.TrimSpace(p.run("output", "-raw", "answer")); got != "Report written to output/report.txt." {
		t.Errorf("output answer = %q", got)
	}
	report, err := os.ReadFile(filepath.Join(ws, "output", "report.txt"))
	if err != nil || string(report) != "HELLO FROM THE MANIFEST\n" {
		t.Errorf("output/report.txt = %q, %v", report, err)
	}
	show := p.run("show", "run.report")
	if !strings.Contains(show, "HELLO FROM THE MANIFEST") {
		t.Errorf("transcript lacks the last tool output:\n%s", show)
	}
	st = p.state()
	if r := st.Runs["run.report"]; r.Status != "completed" {
		t.Fatalf("run.report status = %q", r.Status)
	}
	completedAt := st.Runs["run.report"].Provenance.CompletedAt

	// 4. on_exit = "stop": the sandbox is stopped; plan has nothing to do.
	if got := p.fake.State(id); got != "stopped" {
		t.Fatalf("fake sandbox state after apply = %q, want stopped (on_exit = \"stop\")", got)
	}
	if got := p.state().Sandboxes["sandbox.box"].Status; got != "stopped" {
		t.Errorf("state sandbox status = %q, want stopped", got)
	}
	if plan := p.run("plan"); !strings.Contains(plan, "No changes") {
		t.Errorf("plan after a complete apply:\n%s", plan)
	}
	// An apply with nothing to do leaves it stopped.
	p.run("apply", "-auto-approve")
	if got := p.fake.State(id); got != "stopped" || countRequests(p.fake, "/start") != 0 {
		t.Errorf("an apply with nothing to do: sandbox %q, %d start requests", got, countRequests(p.fake, "/start"))
	}
	// Daytona archives stopped sandboxes after a while; agentctl exec
	// starts it for the command and stops it again.
	p.fake.SetState(id, "archived", "")
	if plan := p.run("plan"); !strings.Contains(plan, "No changes") {
		t.Errorf("plan with the sandbox archived:\n%s", plan)
	}
	if got := p.run("exec", "sandbox.box", "--", "cat", "output/report.txt"); !strings.Contains(got, "HELLO FROM THE MANIFEST") {
		t.Errorf("agentctl exec output:\n%s", got)
	}
	if got := p.fake.State(id); got != "stopped" || countRequests(p.fake, "/start") != 1 {
		t.Errorf("after agentctl exec: sandbox %q, %d start requests; want stopped after one start", got, countRequests(p.fake, "/start"))
	}
	// Both exec paths ran: process/execute for short timeouts, sessions
	// with asynchronous commands for long ones.
	if countRequests(p.fake, "/process/execute") == 0 || countRequests(p.fake, "/process/session") == 0 {
		t.Errorf("exec paths used: %d process/execute, %d session requests; want both",
			countRequests(p.fake, "/process/execute"), countRequests(p.fake, "/process/session"))
	}

	// 5. A new run needs the stopped sandbox: apply starts it.
	p.write(fmt.Sprintf(daytonaPipelineConfig, followupScript, followupRun))
	starts := countRequests(p.fake, "POST /api/sandbox/"+id+"/start")
	stops := countRequests(p.fake, "POST /api/sandbox/"+id+"/stop")
	res = p.run("apply", "-auto-approve")
	if got := countRequests(p.fake, "POST /api/sandbox/"+id+"/start"); got != starts+1 {
		t.Errorf("start requests: %d before, %d after; want one more\n%s", starts, got, res)
	}
	if !strings.Contains(res, "HELLO FROM THE MANIFEST") {
		t.Errorf("the follow-up run did not see the report:\n%s", res)
	}
	if got := p.fake.State(id); got != "stopped" || countRequests(p.fake, "POST /api/sandbox/"+id+"/stop") != stops+1 {
		t.Errorf("fake sandbox state after the follow-up apply = %q, want stopped again", got)
	}
	if ids := p.fake.IDs(); len(ids) != 1 || p.creates() != 1 {
		t.Fatalf("after the follow-up: sandboxes %v, %d creates", ids, p.creates())
	}
	st = p.state()
	if st.Runs["run.check"].Status != "completed" || st.Runs["run.report"].Provenance.CompletedAt != completedAt {
		t.Fatalf("after the follow-up: run.check %q, run.report completed at %q (was %q)",
			st.Runs["run.check"].Status, st.Runs["run.report"].Provenance.CompletedAt, completedAt)
	}
	logBefore, err := os.ReadFile(filepath.Join(ws, "output", "log.txt"))
	if err != nil {
		t.Fatal(err)
	}

	// 6. The sandbox disappears behind agentctl's back: plan says restore,
	// apply restores the workspace from the snapshot and re-runs nothing.
	p.fake.Forget(id)
	if exists(ws) {
		t.Fatalf("Forget left the workspace behind")
	}
	plan = p.run("plan")
	if !strings.Contains(plan, "sandbox.box will be restored from its snapshot") {
		t.Fatalf("plan after the sandbox vanished:\n%s", plan)
	}
	if strings.Contains(plan, "run.report will be") || strings.Contains(plan, "run.check will be") {
		t.Errorf("plan wants to run something again after the sandbox vanished:\n%s", plan)
	}
	p.run("apply", "-auto-approve")
	ids = p.fake.IDs()
	if len(ids) != 1 || ids[0] == id || p.creates() != 2 {
		t.Fatalf("after restore: sandboxes %v (old %s), %d creates; want one new sandbox", ids, id, p.creates())
	}
	newID := ids[0]
	logAfter, err := os.ReadFile(filepath.Join(ws, "output", "log.txt"))
	if err != nil || !bytes.Equal(logAfter, logBefore) {
		t.Errorf("output/log.txt after restore = %q, %v; want the snapshot's %q (nothing re-run)", logAfter, err, logBefore)
	}
	if report, err := os.ReadFile(filepath.Join(ws, "output", "report.txt")); err != nil || string(report) != "HELLO FROM THE MANIFEST\n" {
		t.Errorf("output/report.txt after restore = %q, %v", report, err)
	}
	st = p.state()
	if got := st.Sandboxes["sandbox.box"].Session.ID; got != newID {
		t.Errorf("state records sandbox %q after restore, want %q", got, newID)
	}
	if st.Runs["run.report"].Provenance.CompletedAt != completedAt {
		t.Errorf("run.report was re-run by the restore")
	}
	if plan := p.run("plan"); !strings.Contains(plan, "No changes") {
		t.Errorf("plan after restore:\n%s", plan)
	}

	// 7. destroy removes the sandbox and empties the state.
	res = p.run("destroy", "-auto-approve")
	if ids := p.fake.IDs(); len(ids) != 0 {
		t.Errorf("sandboxes left after destroy: %v\n%s", ids, res)
	}
	st = p.state()
	if len(st.Sandboxes) != 0 || len(st.Runs) != 0 {
		t.Errorf("state after destroy: %d sandboxes, %d runs", len(st.Sandboxes), len(st.Runs))
	}
	if list := strings.TrimSpace(p.run("state", "list")); list != "" {
		t.Errorf("state list after destroy:\n%s", list)
	}
	if exists(ws) {
		t.Errorf("the workspace survived destroy")
	}
	// Journals and snapshots went with the state entries.
	for _, sub := range []string{"journals", "snapshots"} {
		if ents, _ := os.ReadDir(filepath.Join(p.dir, ".agentctl", sub)); len(ents) != 0 {
			t.Errorf(".agentctl/%s after destroy: %d entries", sub, len(ents))
		}
	}
	// The key never reaches the state directory.
	filepath.WalkDir(filepath.Join(p.dir, ".agentctl"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(p.fake.APIKey)) {
				t.Errorf("%s contains the Daytona API key", path)
			}
		}
		return nil
	})
}

func countRequests(f *fakedaytona.Server, contains string) int {
	return len(slices.DeleteFunc(f.Requests(), func(r string) bool { return !strings.Contains(r, contains) }))
}

// applyKilledDuringCreate runs apply with the fake holding new sandboxes
// in "creating", kills it with SIGKILL once it polls the new sandbox, and
// returns that sandbox's id.
func (p *pipeline) applyKilledDuringCreate() string {
	t := p.t
	t.Helper()
	before := p.creates()
	known := p.fake.IDs()
	p.fake.SetPollsToSettle(1 << 30)
	defer p.fake.SetPollsToSettle(2)
	var out bytes.Buffer
	apply := p.command("apply", "-auto-approve")
	apply.Stdout, apply.Stderr = &out, &out
	if err := apply.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = apply.Process.Kill() }) // if a check fails first
	exited := make(chan error, 1)
	go func() { exited <- apply.Wait() }()
	var id string
	waitFor(t, "agentctl polled the sandbox it is creating", exited, &out, func() bool {
		if p.creates() != before+1 {
			return false
		}
		for _, x := range p.fake.IDs() {
			if !slices.Contains(known, x) && countRequests(p.fake, "GET /api/sandbox/"+x) > 0 {
				id = x
				return true
			}
		}
		return false
	})
	if err := apply.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	return id
}

// TestDaytonaPipelineCrashDuringCreate kills apply while Daytona is still
// creating a sandbox, before agentctl could record its id: the next apply
// must not leave that sandbox behind, unrecorded and billed. The
// provider finds it by its labels (managed, lineage, address) and
// deletes it before creating the sandbox again.
func TestDaytonaPipelineCrashDuringCreate(t *testing.T) {
	p := newPipeline(t)
	p.write(fmt.Sprintf(daytonaPipelineConfig, "", ""))
	if err := os.WriteFile(filepath.Join(p.fake.Root, "gate.open"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	onlyRecorded := func(when string) {
		t.Helper()
		ids := p.fake.IDs()
		st := p.state()
		if len(ids) != 1 || st.Sandboxes["sandbox.box"].Session.ID != ids[0] || st.Runs["run.report"].Status != "completed" {
			t.Fatalf("%s: live sandboxes %v, state records %q, run.report %q; want exactly the recorded sandbox and a completed run",
				when, ids, st.Sandboxes["sandbox.box"].Session.ID, st.Runs["run.report"].Status)
		}
	}

	t.Run("first create", func(t *testing.T) {
		orphan := p.applyKilledDuringCreate()
		p.run("apply", "-auto-approve")
		// The first apply persists the state's lineage before it creates
		// anything, so the orphan carries a lineage this apply knows and
		// is removed before the new sandbox is created.
		if slices.Contains(p.fake.IDs(), orphan) {
			t.Fatalf("the sandbox whose creation was killed (%s) is still alive and untracked", orphan)
		}
		onlyRecorded("after the first create was killed")
	})

	t.Run("restore", func(t *testing.T) {
		if _, err := os.Stat(filepath.Join(p.dir, ".agentctl", "state.json")); err != nil {
			p.run("apply", "-auto-approve")
		}
		onlyRecorded("before the restore")
		old := p.fake.IDs()[0]
		p.fake.Forget(old)
		orphan := p.applyKilledDuringCreate()
		if orphan == "" || orphan == old {
			t.Fatalf("the killed restore created %q", orphan)
		}
		if got := p.fake.Labels(orphan)["dev.agentctl.lineage"]; got != p.state().Lineage {
			t.Fatalf("sandbox labelled with lineage %q, the state has %q", got, p.state().Lineage)
		}
		out := p.run("apply", "-auto-approve")
		onlyRecorded("after the restore was killed")
		if slices.Contains(p.fake.IDs(), orphan) {
			t.Errorf("the sandbox of the killed restore survived:\n%s", out)
		}
		if b, err := os.ReadFile(filepath.Join(p.fake.Root, "workspace", "output", "report.txt")); err != nil || string(b) != "HELLO FROM THE MANIFEST\n" {
			t.Errorf("report.txt after the restore = %q, %v", b, err)
		}
	})

	p.run("destroy", "-auto-approve")
	if ids := p.fake.IDs(); len(ids) != 0 {
		t.Errorf("sandboxes left after destroy: %v", ids)
	}
}

// A Daytona sandbox whose manifest sets no root works in
// /home/daytona/workspace. The fake's user, like the default snapshot's,
// cannot create it outside the fake's Root: apply fails saying where the
// root can go, and leaves nothing running or untracked.
func TestDaytonaDefaultRootFailedCreateLeavesNothing(t *testing.T) {
	p := newPipeline(t)
	p.write(`
provider "daytona" {
  api_url = "{{API}}"
}

manifest "work" {
  file "a.txt" {
    content = "a\n"
  }
}

sandbox "box" {
  provider = provider.daytona
  manifest = manifest.work
}
`)
	out, err := p.command("apply", "-auto-approve").CombinedOutput()
	if err == nil {
		t.Fatalf("apply succeeded outside the fake's root:\n%s", out)
	}
	for _, want := range []string{"creating the workspace root /home/daytona/workspace", "permission denied",
		`set root = "` + p.fake.Home + `/workspace" in the manifest`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("apply output does not say %q:\n%s", want, out)
		}
	}
	if ids := p.fake.IDs(); len(ids) != 0 {
		t.Errorf("sandboxes left running: %v", ids)
	}

	// With the root the hint names, the same configuration applies.
	p.write(`
provider "daytona" {
  api_url = "{{API}}"
}

manifest "work" {
  root = "` + p.fake.Home + `/workspace"
  file "a.txt" {
    content = "a\n"
  }
}

sandbox "box" {
  provider = provider.daytona
  manifest = manifest.work
}
`)
	p.run("apply", "-auto-approve")
	if b, err := os.ReadFile(filepath.Join(p.fake.Home, "workspace", "a.txt")); err != nil || string(b) != "a\n" {
		t.Errorf("a.txt in the home workspace: %q, %v", b, err)
	}
	if ids := p.fake.IDs(); len(ids) != 1 || p.state().Sandboxes["sandbox.box"].Session.ID != ids[0] {
		t.Errorf("live sandboxes %v, state %+v", ids, p.state().Sandboxes)
	}
}
