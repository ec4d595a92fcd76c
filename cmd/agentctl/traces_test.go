package main

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	common "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/agentctl/agentctl/internal/fakeopenai"
)

// otlpReceiver is an in-process OTLP/HTTP trace receiver: it decodes
// every export request and keeps its raw bytes.
type otlpReceiver struct {
	mu    sync.Mutex
	raw   [][]byte
	spans []*tracepb.Span
	errs  []string
}

func newOTLPReceiver(t *testing.T) (*otlpReceiver, *httptest.Server) {
	r := &otlpReceiver{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" {
			r.errs = append(r.errs, req.Method+" "+req.URL.Path+" "+req.Header.Get("Content-Type"))
			http.Error(w, "unexpected request", http.StatusBadRequest)
			return
		}
		var body io.Reader = req.Body
		if req.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(req.Body)
			if err != nil {
				r.errs = append(r.errs, err.Error())
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			body = zr
		}
		b, err := io.ReadAll(body)
		if err != nil {
			r.errs = append(r.errs, err.Error())
			return
		}
		r.raw = append(r.raw, b)
		var msg collector.ExportTraceServiceRequest
		if err := proto.Unmarshal(b, &msg); err != nil {
			r.errs = append(r.errs, err.Error())
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, rs := range msg.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		out, _ := proto.Marshal(&collector.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return r, srv
}

func attrs(s *tracepb.Span) map[string]*common.AnyValue {
	m := map[string]*common.AnyValue{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

const tracedConfig = `variable "token" {
  type      = string
  sensitive = true
}

provider "openai" {}
provider "local" { isolation = "none" }

manifest "ws" {
  env "TOKEN" {
    value     = var.token
    ephemeral = true
  }
}

sandbox "box" {
  provider = provider.local
  manifest = manifest.ws
}

capability "shell" "default" {}

agent "worker" {
  model        = "gpt-test"
  instructions = "Run the steps."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default]
}

run "job" {
  agent = agent.worker
  input = "Run the steps."
}
`

// TestTracesExported applies a one-run configuration with the OTLP
// variables pointing at an in-process receiver and checks the spans:
// names, the parent of each, the GenAI attributes, one trace recorded in
// the state and shown by show, and neither the sensitive variable's value
// nor the API key in any byte received.
func TestTracesExported(t *testing.T) {
	const secret = "canary-sensitive-5b1d9e7c"
	const apiKey = "sk-canary-apikey-0c4f2a9d"
	recv, otlp := newOTLPReceiver(t)
	model := fakeopenai.New(t)
	model.Enqueue(
		fakeopenai.Reply{Calls: []fakeopenai.Call{fakeopenai.FunctionCall("call_1", "exec_command", `{"cmd":"printf %s \"$TOKEN\" | rev | rev; echo done"}`)}, Usage: fakeopenai.Usage{InputTokens: 120, OutputTokens: 15}},
		fakeopenai.Reply{Text: "All steps done.", Usage: fakeopenai.Usage{InputTokens: 200, OutputTokens: 7}},
	)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(tracedConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"OPENAI_BASE_URL="+model.URL, "OPENAI_API_KEY="+apiKey,
		"OTEL_EXPORTER_OTLP_ENDPOINT="+otlp.URL,
		"OTEL_EXPORTER_OTLP_HEADERS=x-test=1",
	)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"apply", "-auto-approve", "-no-color", "-var", "token=" + secret, dir}, &stdout, &stderr, env); code != 0 {
		t.Fatalf("apply exited %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	if len(recv.errs) > 0 {
		t.Fatalf("the receiver got bad requests: %q", recv.errs)
	}
	if len(recv.raw) == 0 || len(recv.spans) == 0 {
		t.Fatalf("no spans exported (%d requests)", len(recv.raw))
	}
	for _, b := range recv.raw {
		for _, canary := range []string{secret, apiKey, hex.EncodeToString([]byte(secret))} {
			if bytes.Contains(b, []byte(canary)) {
				t.Errorf("an export request holds the canary %q", canary)
			}
		}
	}

	byName := map[string][]*tracepb.Span{}
	byID := map[string]*tracepb.Span{}
	for _, s := range recv.spans {
		byName[s.Name] = append(byName[s.Name], s)
		byID[string(s.SpanId)] = s
	}
	one := func(name string) *tracepb.Span {
		t.Helper()
		if len(byName[name]) != 1 {
			var names []string
			for _, s := range recv.spans {
				names = append(names, s.Name)
			}
			t.Fatalf("want one span %q, got %d; spans: %q", name, len(byName[name]), names)
		}
		return byName[name][0]
	}
	parentName := func(s *tracepb.Span) string {
		if p := byID[string(s.ParentSpanId)]; p != nil {
			return p.Name
		}
		return ""
	}
	root := one("agentctl apply")
	if len(root.ParentSpanId) != 0 {
		t.Errorf("the command's span has a parent")
	}
	for _, s := range recv.spans {
		if !bytes.Equal(s.TraceId, root.TraceId) {
			t.Errorf("span %q is in another trace", s.Name)
		}
	}
	wantParent := map[string]string{
		"plan":             "agentctl apply",
		"apply":            "agentctl apply",
		"create_sandbox":   "apply",
		"run run.job":      "apply",
		"snapshot_sandbox": "run run.job",
	}
	for name, parent := range wantParent {
		if got := parentName(one(name)); got != parent {
			t.Errorf("span %q: parent %q, want %q", name, got, parent)
		}
	}
	turns := byName["invoke_agent worker"]
	if len(turns) != 2 {
		t.Fatalf("want 2 invoke_agent spans (one per turn), got %d", len(turns))
	}
	chats := byName["chat gpt-test"]
	if len(chats) != 2 {
		t.Fatalf("want 2 chat spans, got %d", len(chats))
	}
	for _, s := range turns {
		if parentName(s) != "run run.job" {
			t.Errorf("invoke_agent's parent is %q", parentName(s))
		}
		a := attrs(s)
		if a["gen_ai.operation.name"].GetStringValue() != "invoke_agent" || a["gen_ai.agent.name"].GetStringValue() != "worker" {
			t.Errorf("invoke_agent attributes: %v", a)
		}
	}
	var in, out int64
	for _, s := range chats {
		if parentName(s) != "invoke_agent worker" {
			t.Errorf("chat's parent is %q", parentName(s))
		}
		a := attrs(s)
		if a["gen_ai.operation.name"].GetStringValue() != "chat" || a["gen_ai.request.model"].GetStringValue() != "gpt-test" || a["gen_ai.provider.name"].GetStringValue() != "openai" {
			t.Errorf("chat attributes: %v", a)
		}
		in += a["gen_ai.usage.input_tokens"].GetIntValue()
		out += a["gen_ai.usage.output_tokens"].GetIntValue()
	}
	if in != 320 || out != 22 {
		t.Errorf("chat spans' usage = %d in / %d out, want 320 / 22", in, out)
	}
	tool := one("execute_tool exec_command")
	if p := byID[string(tool.ParentSpanId)]; p == nil || p.Name != "invoke_agent worker" || attrs(p)["agentctl.turn"].GetIntValue() != 1 {
		t.Errorf("execute_tool's parent is not the first turn's invoke_agent")
	}
	ta := attrs(tool)
	if ta["gen_ai.operation.name"].GetStringValue() != "execute_tool" || ta["gen_ai.tool.name"].GetStringValue() != "exec_command" ||
		ta["gen_ai.tool.call.id"].GetStringValue() != "call_1" || ta["process.exit.code"] == nil || ta["process.exit.code"].GetIntValue() != 0 ||
		ta["agentctl.tool.output.length"].GetIntValue() == 0 {
		t.Errorf("execute_tool attributes: %v", ta)
	}
	ra := attrs(one("run run.job"))
	if ra["agentctl.run.status"].GetStringValue() != "completed" || ra["gen_ai.usage.input_tokens"].GetIntValue() != 320 {
		t.Errorf("run attributes: %v", ra)
	}

	// The state records the trace, and show prints it.
	traceID := hex.EncodeToString(root.TraceId)
	b, err := os.ReadFile(filepath.Join(dir, ".agentctl", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Runs map[string]struct {
			TraceID string `json:"trace_id"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	if got := st.Runs["run.job"].TraceID; got != traceID {
		t.Errorf("state's trace_id = %q, want %q", got, traceID)
	}
	stdout.Reset()
	if code := run([]string{"show", "-no-color", "-config=" + dir, "run.job"}, &stdout, &stderr, os.Environ()); code != 0 {
		t.Fatalf("show exited %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "Trace: "+traceID) {
		t.Errorf("show does not print the trace id:\n%s", stdout.String())
	}
	stdout.Reset()
	run([]string{"destroy", "-auto-approve", "-no-color", "-var", "token=" + secret, dir}, &stdout, &stderr, os.Environ())
}

// TestRestoreTraced: a sandbox lost behind agentctl's back is restored
// from its snapshot by the next apply, under a restore_sandbox span (a
// child of apply, with the sandbox's address) instead of create_sandbox.
func TestRestoreTraced(t *testing.T) {
	recv, otlp := newOTLPReceiver(t)
	dir := t.TempDir()
	cfg := `
provider "scripted" {
  script "worker" {
    reply { text = "done" }
  }
}
provider "local" { isolation = "none" }
manifest "ws" {
  file "a.txt" { content = "a" }
}
sandbox "box" {
  provider = provider.local
  manifest = manifest.ws
}
agent "worker" {
  provider     = provider.scripted
  instructions = "x"
  sandbox      = sandbox.box
}
run "job" {
  agent = agent.worker
  input = "go"
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+otlp.URL)
	var stdout, stderr bytes.Buffer
	if code := run([]string{"apply", "-auto-approve", "-no-color", dir}, &stdout, &stderr, env); code != 0 {
		t.Fatalf("apply exited %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(filepath.Join(dir, ".agentctl", "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		Sandboxes map[string]struct {
			Snapshot string `json:"snapshot"`
			Session  struct {
				Data struct {
					Dir string `json:"dir"`
				} `json:"data"`
			} `json:"session"`
		} `json:"sandboxes"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	box := st.Sandboxes["sandbox.box"]
	if box.Snapshot == "" || box.Session.Data.Dir == "" {
		t.Fatalf("sandbox.box in the state: %+v", box)
	}
	// Lost: its directory moved away.
	if err := os.Rename(filepath.Dir(box.Session.Data.Dir), filepath.Join(t.TempDir(), "lost")); err != nil {
		t.Fatal(err)
	}
	recv.mu.Lock()
	recv.spans = nil
	recv.mu.Unlock()
	stdout.Reset()
	if code := run([]string{"apply", "-auto-approve", "-no-color", dir}, &stdout, &stderr, env); code != 0 {
		t.Fatalf("restoring apply exited %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "sandbox.box: Restore complete") {
		t.Fatalf("the apply did not restore sandbox.box:\n%s", stdout.String())
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	byID := map[string]*tracepb.Span{}
	var restores []*tracepb.Span
	for _, s := range recv.spans {
		byID[string(s.SpanId)] = s
		switch s.Name {
		case "restore_sandbox":
			restores = append(restores, s)
		case "create_sandbox":
			t.Errorf("the restore was traced as create_sandbox")
		}
	}
	if len(restores) != 1 {
		t.Fatalf("want one restore_sandbox span, got %d", len(restores))
	}
	s := restores[0]
	if p := byID[string(s.ParentSpanId)]; p == nil || p.Name != "apply" {
		t.Errorf("restore_sandbox's parent is not apply")
	}
	if a := attrs(s); a["agentctl.address"].GetStringValue() != "sandbox.box" {
		t.Errorf("restore_sandbox attributes: %v", a)
	}
	if s.Status != nil && s.Status.Code == tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("restore_sandbox ended in error: %s", s.Status.Message)
	}
	run([]string{"destroy", "-auto-approve", "-no-color", dir}, &stdout, &stderr, os.Environ())
}

// TestTraceparent: a command started with TRACEPARENT (a CI job's trace,
// or the agentctl process that runs the command again in a user
// namespace) puts its spans in that trace, under that span.
func TestTraceparent(t *testing.T) {
	recv, otlp := newOTLPReceiver(t)
	dir := t.TempDir()
	cfg := `
provider "scripted" {
  script "worker" {
    reply { text = "done" }
  }
}
agent "worker" {
  provider     = provider.scripted
  instructions = "x"
}
run "job" {
  agent = agent.worker
  input = "go"
}
`
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	env := append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+otlp.URL, "TRACEPARENT=00-"+traceID+"-"+parentID+"-01")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"apply", "-auto-approve", "-no-color", dir}, &stdout, &stderr, env); code != 0 {
		t.Fatalf("apply exited %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	recv.mu.Lock()
	defer recv.mu.Unlock()
	var root *tracepb.Span
	for _, s := range recv.spans {
		if hex.EncodeToString(s.TraceId) != traceID {
			t.Errorf("span %q is in trace %x, want %s", s.Name, s.TraceId, traceID)
		}
		if s.Name == "agentctl apply" {
			root = s
		}
	}
	if root == nil {
		t.Fatalf("no agentctl apply span among %d", len(recv.spans))
	}
	if got := hex.EncodeToString(root.ParentSpanId); got != parentID {
		t.Errorf("agentctl apply's parent span is %q, want %s (TRACEPARENT's)", got, parentID)
	}
}
