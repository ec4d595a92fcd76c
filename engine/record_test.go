package engine

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/fakeopenai"
)

const (
	canaryKey    = "sk-canary-0123456789abcdef"
	canarySecret = "hunter2-canary-secret"
)

// recordConfig is a two-run pipeline on the OpenAI provider at baseURL:
// run.first runs a shell command, then answers with text that holds the
// sensitive value; run.second takes run.first's output. replay, when not
// "", is the provider's replay setting.
func recordConfig(baseURL, replay, question string) string {
	replayLine := ""
	if replay != "" {
		replayLine = fmt.Sprintf("  replay = %q\n", replay)
	}
	return fmt.Sprintf(`
variable "token" {
  type      = string
  sensitive = true
  default   = %q
}
provider "openai" {
  base_url    = %q
  max_retries = 0
%s}
provider "local" { isolation = "none" }
manifest "m" {
  env "TOKEN" {
    value     = var.token
    ephemeral = true
  }
}
sandbox "s" {
  provider = provider.local
  manifest = manifest.m
}
capability "shell" "default" {}
agent "analyst" {
  model        = "gpt-test"
  sandbox      = sandbox.s
  capabilities = [capability.shell.default]
}
agent "writer" {
  model = "gpt-test"
}
run "first" {
  agent = agent.analyst
  input = %q
}
run "second" {
  agent = agent.writer
  input = "Rewrite: ${run.first.output}"
}
output "final" { value = run.second.output }
`, canarySecret, baseURL, replayLine, question)
}

// engineAt loads src written to dir/main.hcl with its state in dir.
func engineAt(t *testing.T, dir, src string) *Engine {
	t.Helper()
	e := engineIn(t, dir, src)
	e.Environ = []string{"OPENAI_API_KEY=" + canaryKey}
	return e
}

// TestRecordThenReplayOffline records a pipeline against the fake OpenAI
// server, stops the server, and replays it: the outputs are byte-identical,
// no cassette byte holds the key or the sensitive value, and a changed
// prompt fails naming the request that was not recorded.
func TestRecordThenReplayOffline(t *testing.T) {
	srv := fakeopenai.New(t)
	srv.Enqueue(
		fakeopenai.Calls(fakeopenai.FunctionCall("call_1", "exec_command", `{"cmd":"echo sales; echo $TOKEN"}`)),
		fakeopenai.Text("Sales are up; the token was "+canarySecret+"."),
		fakeopenai.Text("Sales rose."),
	)
	recDir := t.TempDir()
	tapes := filepath.Join(recDir, "cassettes")
	e := engineAt(t, recDir, recordConfig(srv.URL, "", "How are sales?"))
	e.Record = tapes
	var notes []string
	e.Events = func(ev Event) {
		if ev.Type == EventApplyProgress {
			notes = append(notes, ev.Message)
		}
	}
	recorded := planApply(t, e, PlanOptions{})
	if len(srv.Requests()) != 3 {
		t.Fatalf("%d requests recorded, want 3", len(srv.Requests()))
	}
	file := filepath.Join(tapes, "provider.openai.yaml")
	if !strings.Contains(strings.Join(notes, "\n"), "recorded 3 model exchanges in "+file) {
		t.Errorf("progress does not report the recording: %q", notes)
	}
	tape, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{canaryKey, "canary-0123", canarySecret, "Bearer", "Authorization", "aHVudGVyMi1jYW5hcnktc2VjcmV0"} {
		if bytes.Contains(tape, []byte(leak)) {
			t.Errorf("the cassette holds %q", leak)
		}
	}
	if !bytes.Contains(tape, []byte("(sensitive)")) || !bytes.Contains(tape, []byte("Sales rose.")) {
		t.Errorf("the cassette does not hold the scrubbed exchanges:\n%s", tape)
	}
	srv.Close()

	// Replayed with the server gone, in a fresh state: the provider's
	// replay setting names the directory, relative to the configuration.
	playDir := t.TempDir()
	if err := os.CopyFS(filepath.Join(playDir, "cassettes"), os.DirFS(tapes)); err != nil {
		t.Fatal(err)
	}
	e = engineAt(t, playDir, recordConfig("http://127.0.0.1:1/v1", "cassettes", "How are sales?"))
	e.Environ = nil // no API key is needed to replay
	replayed := planApply(t, e, PlanOptions{})
	for _, addr := range []string{"run.first", "run.second"} {
		if got, want := string(replayed.Runs[addr].Output), string(recorded.Runs[addr].Output); got != want || replayed.Runs[addr].Status != RunCompleted {
			t.Errorf("%s replayed %s (%s), recorded %s", addr, got, replayed.Runs[addr].Status, want)
		}
	}
	if got, want := string(replayed.Outputs["final"].Value), string(recorded.Outputs["final"].Value); got != want {
		t.Errorf("output final replayed %s, recorded %s", got, want)
	}

	// Engine.Replay (agentctl test -replay) serves the same cassettes to a
	// configuration without a replay setting.
	e = engineAt(t, t.TempDir(), recordConfig("http://127.0.0.1:1/v1", "", "How are sales?"))
	e.Replay = tapes
	if st := planApply(t, e, PlanOptions{}); string(st.Runs["run.second"].Output) != string(recorded.Runs["run.second"].Output) {
		t.Errorf("Engine.Replay: run.second replayed %s", st.Runs["run.second"].Output)
	}

	// A changed prompt was never recorded: the run fails, naming the
	// request and where it differs.
	e = engineAt(t, t.TempDir(), recordConfig("http://127.0.0.1:1/v1", "", "How are profits?"))
	e.Replay = tapes
	err = applyErr(t, e, PlanOptions{})
	want := `run.first: agent "analyst", turn 1: model call failed: replay: request 1 of this run's provider (POST /v1/responses) was not recorded in ` + file
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `How are profits?`) || !strings.Contains(err.Error(), "How are sales?") {
		t.Fatalf("replay of a changed prompt: %v\nwant it to contain %q and both prompts", err, want)
	}
}

// A provider whose cassette is missing fails at plan, saying how to record
// one.
func TestReplayWithoutCassetteFailsAtPlan(t *testing.T) {
	e := engineAt(t, t.TempDir(), recordConfig("http://127.0.0.1:1/v1", "nothing-here", "How are sales?"))
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Plan(context.Background(), st, PlanOptions{})
	if err == nil || !strings.Contains(err.Error(), "replay: there is no cassette") || !strings.Contains(err.Error(), "agentctl apply -record") {
		t.Fatalf("plan: %v", err)
	}
}

// Recording while replaying, whether the provider's replay setting or
// the engine's asks for the replay, is refused at plan, saying what to
// leave out.
func TestRecordWhileReplayingRefused(t *testing.T) {
	for name, engineReplay := range map[string]bool{"provider's replay": false, "engine's replay": true} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			replay := "cassettes"
			if engineReplay {
				replay = ""
			}
			e := engineAt(t, dir, recordConfig("http://127.0.0.1:1/v1", replay, "How are sales?"))
			if engineReplay {
				e.Replay = filepath.Join(dir, "cassettes")
			}
			e.Record = filepath.Join(dir, "recorded")
			st, err := e.State.Read(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			_, err = e.Plan(context.Background(), st, PlanOptions{})
			if err == nil || !strings.Contains(err.Error(), "provider.openai: cannot record while replaying") || !strings.Contains(err.Error(), "leave -record out") {
				t.Fatalf("plan with -record and replay: %v", err)
			}
		})
	}
}

// TestWriteReplayExample records examples/replay.hcl's pipeline against
// the fake OpenAI server into examples/cassettes/replay, the cassette the
// example replays (skipped unless AGENTCTL_WRITE_REPLAY_EXAMPLE=1):
//
//	AGENTCTL_WRITE_REPLAY_EXAMPLE=1 go test ./engine -run TestWriteReplayExample
func TestWriteReplayExample(t *testing.T) {
	if os.Getenv("AGENTCTL_WRITE_REPLAY_EXAMPLE") != "1" {
		t.Skip("set AGENTCTL_WRITE_REPLAY_EXAMPLE=1 to record the example's cassette again")
	}
	src, err := os.ReadFile("../examples/replay.hcl")
	if err != nil {
		t.Fatal(err)
	}
	srv := fakeopenai.New(t)
	srv.Enqueue(
		fakeopenai.Text("Q3 revenue rose 12% to 4.1M while churn fell to 2%."),
		fakeopenai.Text("Revenue Up 12%, Churn Down to 2%"),
	)
	live := strings.Replace(string(src), `  replay = "cassettes/replay"`, fmt.Sprintf("  base_url = %q", srv.URL), 1)
	dir := t.TempDir()
	e := engineAt(t, dir, live)
	tapes, err := filepath.Abs("../examples/cassettes/replay")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(tapes); err != nil {
		t.Fatal(err)
	}
	e.Record = tapes
	planApply(t, e, PlanOptions{})
}
