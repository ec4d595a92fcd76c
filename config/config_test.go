package config

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/agentctl/agentctl/providers/builtin"
	"github.com/agentctl/agentctl/providers/daytona"
	"github.com/agentctl/agentctl/providers/docker"
	"github.com/agentctl/agentctl/providers/openai"
	"github.com/agentctl/agentctl/providers/scripted"
)

// load writes files into a temporary directory and loads it.
func load(t *testing.T, files map[string]string, opts Options) (*Config, hcl.Diagnostics) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if opts.Registry == nil {
		opts.Registry = builtin.Registry()
	}
	return Load(dir, opts)
}

func mustLoad(t *testing.T, files map[string]string, opts Options) *Config {
	t.Helper()
	c, diags := load(t, files, opts)
	if diags.HasErrors() {
		t.Fatalf("unexpected diagnostics: %s", diags.Error())
	}
	return c
}

const pipeline = `
variable "topic" { default = "pricing" }
variable "token" {
  default   = "t0ken-value"
  sensitive = true
}
provider "scripted" {
  script "w" {
    reply { text = "done" }
  }
}
provider "docker" {}
provider "openai" {
  alias   = "compat"
  api_key = env("COMPAT_KEY")
  api     = "chat_completions"
  timeout = "30s"
}
manifest "m" {
  file "a.txt" {
    content = "hello"
    mode    = "0755"
  }
  env = { REGION = "eu" }
  env "TOKEN" {
    value     = var.token
    ephemeral = true
  }
}
sandbox "box" {
  provider        = provider.docker
  image           = "alpine:3"
  manifest        = manifest.m
  network         = "bridge"
  ports           = [8080, 9090]
  user            = "1000"
  commit_snapshot = true
  cap_add         = ["net_raw"]
  shm_size        = 128
  resources {
    cpus   = 1.5
    memory = 512
  }
}
agent "w" {
  provider = provider.scripted
  sandbox  = sandbox.box
  tool "ask" {
    agent = agent.helper
  }
}
agent "helper" {
  provider = provider.scripted
}
run "first" {
  agent = agent.w
  input = "Study ${var.topic}"
}
run "second" {
  for_each = { a = "alpha", b = "beta" }
  agent    = agent.w
  input    = "${each.key}/${each.value}: ${run.first.output} at ${sandbox.box.urls["8080"]}"
}
output "all" {
  value = { for k, r in run.second : k => r.output }
}
output "token" {
  value     = var.token
  sensitive = true
}
`

func TestLoadPipeline(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": pipeline}, Options{Environ: []string{"COMPAT_KEY=sk-compat-123"}})

	if got := slices.Sorted(maps.Keys(c.RunInstances)); !cmp.Equal(got, []string{`run.first`, `run.second["a"]`, `run.second["b"]`}) {
		t.Errorf("run instances = %v", got)
	}
	ri := c.RunInstances[`run.second["a"]`]
	if diff := cmp.Diff([]string{"run.first", "sandbox.box"}, ri.DependsOn); diff != "" {
		t.Errorf("DependsOn (-want +got):\n%s", diff)
	}

	sb := c.SandboxInstances["sandbox.box"]
	if sb.Network != "bridge" || sb.OnExit != "stop" || !cmp.Equal(sb.Ports, []int{8080, 9090}) {
		t.Errorf("sandbox = %+v", sb)
	}
	if sb.Resources.CPUs != 1.5 || sb.Resources.MemoryMB != 512 {
		t.Errorf("resources = %+v", sb.Resources)
	}
	user, commit, shm := "1000", true, int64(128)
	if diff := cmp.Diff(&docker.SandboxSettings{User: &user, Commit: &commit, CapAdd: []string{"net_raw"}, ShmSizeMB: &shm}, sb.Settings); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	if js, _ := json.Marshal(sb.Settings); string(js) != `{"cap_add":["net_raw"],"commit_snapshot":true,"shm_size":128,"user":"1000"}` {
		t.Errorf("settings JSON (digested) = %s", js)
	}

	m := c.Manifests["m"]
	if m.Entries[0].Mode != 0o755 || m.Env["REGION"] != "eu" || m.EphemeralEnv["TOKEN"] != "t0ken-value" {
		t.Errorf("manifest = %+v", m)
	}

	p := c.Providers["openai.compat"].Settings.(*openai.ProviderSettings)
	if p.APIKey != "sk-compat-123" || p.API != "chat_completions" || p.Timeout != 30*time.Second {
		t.Errorf("provider = %+v", p)
	}
	if sp := c.Providers["scripted"].Settings.(*scripted.ProviderSettings); sp.Scripts["w"][0].Text != "done" {
		t.Errorf("script = %+v", sp)
	}

	// Sensitive values: the variable and the env() result, for scrubbing.
	if diff := cmp.Diff([]string{"sk-compat-123", "t0ken-value"}, c.SensitiveValues()); diff != "" {
		t.Errorf("SensitiveValues (-want +got):\n%s", diff)
	}
}

func TestEvalRunInputAndOutputs(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": pipeline}, Options{})
	rv := RuntimeValues{
		RunOutputs:  map[string]cty.Value{"run.first": cty.StringVal("F")},
		SandboxURLs: map[string]map[string]string{"sandbox.box": {"8080": "http://127.0.0.1:32768"}},
	}
	in, diags := c.EvalRunInput(c.RunInstances[`run.second["b"]`], rv)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if want := "b/beta: F at http://127.0.0.1:32768"; in != want {
		t.Errorf("input = %q, want %q", in, want)
	}

	// Without the upstream output, the input is not known yet.
	_, diags = c.EvalRunInput(c.RunInstances[`run.second["b"]`], RuntimeValues{})
	if !diags.HasErrors() || !strings.Contains(diags.Error(), "not completed") {
		t.Errorf("diags = %v", diags)
	}

	rv.RunOutputs[`run.second["a"]`] = cty.StringVal("A")
	rv.RunOutputs[`run.second["b"]`] = cty.ObjectVal(map[string]cty.Value{"ok": cty.True})
	outs, diags := c.EvalOutputs(rv)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	all := outs["all"].Value
	if all.GetAttr("a").AsString() != "A" || !all.GetAttr("b").GetAttr("ok").True() {
		t.Errorf("all = %#v", all)
	}
	tok := outs["token"]
	if !tok.Sensitive || tok.Value.AsString() != "t0ken-value" || tok.Value.IsMarked() {
		t.Errorf("token = %#v", tok)
	}
}

// TestEvalExpr evaluates expressions as agentctl console does: run
// outputs and sandbox URLs from the runtime values, unknown when absent,
// sensitive values marked.
func TestEvalExpr(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": pipeline}, Options{})
	rv := RuntimeValues{
		RunOutputs:  map[string]cty.Value{"run.first": cty.StringVal("F")},
		SandboxURLs: map[string]map[string]string{"sandbox.box": {"8080": "http://127.0.0.1:32768"}},
	}
	eval := func(src string, rv RuntimeValues) cty.Value {
		t.Helper()
		expr, diags := hclsyntax.ParseExpression([]byte(src), "<stdin>", hcl.InitialPos)
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		v, diags := c.EvalExpr(expr, rv)
		if diags.HasErrors() {
			t.Fatalf("%s: %s", src, diags.Error())
		}
		return v
	}
	for src, want := range map[string]string{
		`upper(var.topic)`:                   "PRICING",
		`run.first.output`:                   "F",
		`sandbox.box.urls["8080"]`:           "http://127.0.0.1:32768",
		`"${run.first.output}/${var.topic}"`: "F/pricing",
	} {
		if v := eval(src, rv); !v.IsKnown() || v.AsString() != want {
			t.Errorf("%s = %#v, want %q", src, v, want)
		}
	}
	if v := eval(`run.first.output`, RuntimeValues{}); v.IsKnown() {
		t.Errorf("run.first.output with no runs = %#v, want unknown", v)
	}
	if v := eval(`run.second["a"].output`, rv); v.IsKnown() {
		t.Errorf(`run.second["a"].output not run = %#v, want unknown`, v)
	}
	if v := eval(`var.token`, rv); !v.IsMarked() {
		t.Errorf("var.token = %#v, want a sensitive value", v)
	}
	expr, _ := hclsyntax.ParseExpression([]byte(`var.topik`), "<stdin>", hcl.InitialPos)
	if _, diags := c.EvalExpr(expr, rv); !diags.HasErrors() || !strings.Contains(diags.Error(), `"topik"`) {
		t.Errorf("var.topik: diags = %v", diags)
	}
}

func TestVariablePrecedence(t *testing.T) {
	files := map[string]string{
		"main.hcl":          `variable "v" { default = "default" }` + "\n" + `output "v" { value = var.v }`,
		"one.vars.hcl":      `v = "file-one"`,
		"two.vars.json":     `{"v": "file-two"}`,
		"agentctl.vars.hcl": `v = "auto"`,
	}
	dir := t.TempDir()
	for n, s := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	get := func(opts Options) string {
		t.Helper()
		opts.Registry = builtin.Registry()
		c, diags := Load(dir, opts)
		if diags.HasErrors() {
			t.Fatal(diags.Error())
		}
		return c.Variables["v"].Value.AsString()
	}
	env := []string{"AGENTCTL_VAR_v=env"}
	one, two := filepath.Join(dir, "one.vars.hcl"), filepath.Join(dir, "two.vars.json")
	cases := []struct {
		name string
		opts Options
		want string
	}{
		{"auto file over env", Options{Environ: env}, "auto"},
		{"var file over auto file", Options{Environ: env, VarFiles: []string{one}}, "file-one"},
		{"later var file wins", Options{VarFiles: []string{one, two}}, "file-two"},
		{"-var wins", Options{Environ: env, VarFiles: []string{one}, Vars: []string{"v=flag", "v=flag2"}}, "flag2"},
	}
	for _, tc := range cases {
		if got := get(tc.opts); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
	if err := os.Remove(filepath.Join(dir, "agentctl.vars.hcl")); err != nil {
		t.Fatal(err)
	}
	if got := get(Options{Environ: env}); got != "env" {
		t.Errorf("env over default: got %q", got)
	}
	if got := get(Options{}); got != "default" {
		t.Errorf("default: got %q", got)
	}
}

func TestComplexVariableFromFlag(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": `
variable "plans" { type = map(string) }
variable "n" { type = number }
`}, Options{Vars: []string{`plans={ a = "x" }`, "n=3"}})
	if c.Variables["plans"].Value.Index(cty.StringVal("a")).AsString() != "x" {
		t.Errorf("plans = %#v", c.Variables["plans"].Value)
	}
	if !c.Variables["n"].Value.RawEquals(cty.NumberIntVal(3)) {
		t.Errorf("n = %#v", c.Variables["n"].Value)
	}
}

func TestDependencyGraphAndClosure(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": `
provider "local" {}
sandbox "a" { provider = provider.local }
sandbox "b" { provider = provider.local }
sandbox "c" {
  for_each = toset(["x", "y"])
  provider = provider.local
}
agent "lead" {
  model    = "m"
  sandbox  = sandbox.a
  handoffs = [agent.helper]
}
agent "helper" {
  model    = "m"
  sandbox  = sandbox.b
  handoffs = [agent.lead]
}
run "r1" {
  agent = agent.lead
  input = "go"
}
run "r2" {
  agent      = agent.lead
  sandbox    = sandbox.c["y"]
  input      = "go"
  depends_on = [run.r1]
}
`}, Options{})
	g, diags := c.DependencyGraph()
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if diff := cmp.Diff([]string{"sandbox.a", "sandbox.b"}, g.DependenciesOf("run.r1")); diff != "" {
		t.Errorf("r1 deps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"run.r1", `sandbox.b`, `sandbox.c["y"]`}, g.DependenciesOf("run.r2")); diff != "" {
		t.Errorf("r2 deps (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"helper", "lead"}, c.AgentClosure("lead")); diff != "" {
		t.Errorf("closure (-want +got):\n%s", diff)
	}
	ag := c.AgentGraph()
	if len(ag.Cycles()) != 1 {
		t.Errorf("agent graph cycles = %v", ag.Cycles())
	}
}

func TestCommandCapabilitySchema(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": `
capability "command" "q" {
  description = "Query"
  parameters  = { sql = { type = "string", description = "the query" }, limit = { type = "integer" } }
  command     = ["python3", "q.py"]
  timeout     = "5s"
}
`}, Options{})
	cc := c.Capabilities["command.q"].Command
	var schema map[string]any
	if err := json.Unmarshal(cc.Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"sql":   map[string]any{"type": "string", "description": "the query"},
			"limit": map[string]any{"type": "integer"},
		},
		"required":             []any{"limit", "sql"},
		"additionalProperties": false,
	}
	if diff := cmp.Diff(want, schema); diff != "" {
		t.Errorf("schema (-want +got):\n%s", diff)
	}
	if cc.Timeout != 5*time.Second || !cmp.Equal(cc.Command, []string{"python3", "q.py"}) {
		t.Errorf("command = %+v", cc)
	}
}

func TestDaytonaSettings(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": `
sandbox "d" {
  provider           = provider.daytona
  snapshot           = "py"
  labels             = { team = "x" }
  auto_stop_interval = 15
  network_allow_list = ["10.0.0.0/8"]
  public             = true
  create_timeout     = "2m"
}
`}, Options{})
	want := map[string]any{
		"snapshot":           "py",
		"labels":             map[string]string{"team": "x"},
		"auto_stop_interval": 15,
		"network_allow_list": []string{"10.0.0.0/8"},
		"public":             true,
		"create_timeout":     2 * time.Minute,
	}
	snap, interval, public := "py", 15, true
	got := c.SandboxInstances["sandbox.d"].Settings
	if diff := cmp.Diff(&daytona.Settings{Snapshot: &snap, Labels: map[string]string{"team": "x"}, AutoStopInterval: &interval,
		NetworkAllowList: []string{"10.0.0.0/8"}, Public: &public, CreateTimeout: 2 * time.Minute}, got); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	// The settings enter the sandbox's configuration digest through their
	// JSON encoding, which stays that of the settings map it replaced.
	wantJSON, _ := json.Marshal(want)
	if gotJSON, _ := json.Marshal(got); string(gotJSON) != string(wantJSON) {
		t.Errorf("settings JSON = %s, want %s", gotJSON, wantJSON)
	}
	if c.Providers["daytona"] == nil {
		t.Error("implicit daytona provider missing")
	}
}

func TestFunctionsRelativeToConfigDir(t *testing.T) {
	c := mustLoad(t, map[string]string{
		"main.hcl": `
agent "a" {
  model        = "m"
  instructions = templatefile("prompts/t.tmpl", { who = "analyst" })
}
agent "b" {
  model        = sha256(file("prompts/t.tmpl"))
  instructions = yamlencode({ a = 1 })
}
`,
		"prompts/t.tmpl": "You are the ${who}.",
	}, Options{})
	if got := c.Agents["a"].Instructions; got != "You are the analyst." {
		t.Errorf("instructions = %q", got)
	}
	if len(c.Agents["b"].Model) != 64 {
		t.Errorf("model = %q", c.Agents["b"].Model)
	}
}

func TestSingleFileConfig(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "one.hcl")
	if err := os.WriteFile(p, []byte(`agent "a" { model = "m" }`), 0o644); err != nil {
		t.Fatal(err)
	}
	// A sibling file is not part of a single-file configuration.
	if err := os.WriteFile(filepath.Join(dir, "other.hcl"), []byte(`agent "a" { model = "n" }`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, diags := Load(p, Options{Registry: builtin.Registry()})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	if c.Dir != dir || c.Agents["a"].Model != "m" {
		t.Errorf("dir=%s agent=%+v", c.Dir, c.Agents["a"])
	}
}

func TestRunSandboxesChain(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": `
provider "local" {}
sandbox "a" { provider = provider.local }
sandbox "b" { provider = provider.local }
sandbox "o" { provider = provider.local }
agent "lead" {
  model    = "m"
  sandbox  = sandbox.a
  handoffs = [agent.mid]
}
agent "mid" {
  model = "m"
  tool "t" {
    agent = agent.leaf
  }
}
agent "leaf" {
  model   = "m"
  sandbox = sandbox.b
}
agent "twin" {
  model    = "m"
  sandbox  = sandbox.a
  handoffs = [agent.lead]
}
run "plain" {
  agent = agent.lead
  input = "x"
}
run "override" {
  agent   = agent.lead
  sandbox = sandbox.o
  input   = "x"
}
run "shared" {
  agent   = agent.twin
  sandbox = sandbox.o
  input   = "x"
}
`}, Options{})
	cases := map[string][]string{
		"run.plain":    {"sandbox.a", "sandbox.b"},
		"run.override": {"sandbox.b", "sandbox.o"},
		// twin's own sandbox is replaced, but lead (reached by handoff)
		// uses the same sandbox.
		"run.shared": {"sandbox.a", "sandbox.b", "sandbox.o"},
	}
	for addr, want := range cases {
		if diff := cmp.Diff(want, c.RunSandboxes(c.RunInstances[addr])); diff != "" {
			t.Errorf("%s (-want +got):\n%s", addr, diff)
		}
	}
	// Each agent's own sandbox in a run: the override replaces only the
	// start agent's.
	perAgent := map[string]map[string]string{
		"run.override": {"lead": "sandbox.o", "mid": "", "leaf": "sandbox.b"},
		"run.shared":   {"twin": "sandbox.o", "lead": "sandbox.a", "mid": "", "leaf": "sandbox.b"},
	}
	for addr, want := range perAgent {
		ri := c.RunInstances[addr]
		got := map[string]string{}
		for _, name := range c.AgentClosure(ri.Agent) {
			got[name] = ri.AgentSandbox(c.Agents[name])
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s per agent (-want +got):\n%s", addr, diff)
		}
	}
}

// TestSandboxArgumentRules: arguments a provider would refuse are
// reported at validate time, at the argument, with the fix.
func TestSandboxArgumentRules(t *testing.T) {
	cases := []struct {
		name, body string
		line       int    // 0: valid
		want       string // in the detail
	}{
		{"docker default network", `provider = provider.docker
  image    = "alpine:3"
  ports    = [8080]`, 4, `the default is "none"`},
		{"docker none", `provider = provider.docker
  image    = "alpine:3"
  network  = "none"
  ports    = [8080]`, 5, `network = "bridge"`},
		{"docker host", `provider = provider.docker
  image    = "alpine:3"
  network  = "host"
  ports    = [8080]`, 5, `network = "host"`},
		{"docker bridge", `provider = provider.docker
  image    = "alpine:3"
  network  = "bridge"
  ports    = [8080]`, 0, ""},
		{"docker named network", `provider = provider.docker
  image    = "alpine:3"
  network  = "agents"
  ports    = [8080]`, 0, ""},
		{"docker no ports", `provider = provider.docker
  image    = "alpine:3"`, 0, ""},
		{"daytona stop -1", `provider = provider.daytona
  auto_stop_interval = -1`, 3, "must be 0 or more"},
		{"daytona archive -1", `provider = provider.daytona
  auto_archive_interval = -1`, 3, "must be 0 or more"},
		{"daytona delete -1", `provider = provider.daytona
  auto_delete_interval = -1`, 0, ""},
		{"daytona delete -2", `provider = provider.daytona
  auto_delete_interval = -2`, 3, "must be -1 (never delete) or more"},
		{"daytona zeros", `provider = provider.daytona
  auto_stop_interval    = 0
  auto_archive_interval = 0
  auto_delete_interval  = 0`, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := load(t, map[string]string{"main.hcl": "sandbox \"s\" {\n  " + tc.body + "\n}\n"}, Options{})
			if tc.line == 0 {
				if diags.HasErrors() {
					t.Fatalf("unexpected diagnostics: %s", diags.Error())
				}
				return
			}
			if len(diags) != 1 || diags[0].Subject == nil {
				t.Fatalf("want one diagnostic, got %v", diags)
			}
			d := diags[0]
			if d.Subject.Start.Line != tc.line || !strings.Contains(d.Detail, tc.want) {
				t.Errorf("got line %d, %q; want line %d, detail containing %q", d.Subject.Start.Line, d.Detail, tc.line, tc.want)
			}
		})
	}
}

// A schema that breaks JSON Schema's rules is reported where it is
// written, when the configuration is loaded, not when a tool is called
// or a run ends.
func TestInvalidSchemasReportedAtLoad(t *testing.T) {
	for name, tc := range map[string]struct{ hcl, summary, detail string }{
		"command parameters": {`
capability "command" "q" {
  description = "Query"
  parameters  = { limit = { type = "integer", minimum = "one" } }
  command     = ["python3", "q.py"]
}
`, "Invalid parameters", `minimum: type: one has type "string", want "number"`},
		"output_schema": {`
provider "scripted" {
  script "w" {
    reply { text = "{}" }
  }
}
agent "a" {
  provider      = provider.scripted
  output_schema = {
    type       = "object"
    properties = { summary = { type = "strnig" } }
  }
}
`, "Invalid output_schema", `strnig does not equal any of`},
	} {
		t.Run(name, func(t *testing.T) {
			_, diags := load(t, map[string]string{"main.hcl": tc.hcl}, Options{})
			if !diags.HasErrors() {
				t.Fatal("loaded without an error")
			}
			d := diags[0]
			if d.Summary != tc.summary || !strings.Contains(d.Detail, tc.detail) || d.Subject == nil || d.Subject.Start.Line < 3 {
				t.Errorf("diagnostic %q: %q at %v, want %q saying %q at the attribute", d.Summary, d.Detail, d.Subject, tc.summary, tc.detail)
			}
		})
	}
}

// Load takes its provider types from the caller only: without a registry
// it says what is missing instead of falling back to the shipped types.
func TestLoadNeedsARegistry(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(`provider "local" {}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, diags := Load(dir, Options{})
	if c != nil || !diags.HasErrors() || !strings.Contains(diags.Error(), "Options.Registry") || !strings.Contains(diags.Error(), "builtin.Registry()") {
		t.Fatalf("Load without a registry: config %v, diagnostics %v; want an error naming Options.Registry", c, diags)
	}
}
