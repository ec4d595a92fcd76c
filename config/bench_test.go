package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/providers/builtin"
)

// largeConfig generates a configuration with the given numbers of
// agents, runs and sandboxes. Agents form teams of ten: each has a
// sandbox, a handoff to the next member (the last hands back to the
// first, so every team is a cycle) and the member after that as an agent
// tool. Every tenth run reads the previous run's output.
func largeConfig(agents, runs, sandboxes int) string {
	var b strings.Builder
	b.WriteString(`
agentctl {
  required_version = ">= 0.1.0"
}
variable "model" {
  default = "gpt-5.4-mini"
  validation {
    condition     = length(var.model) > 0
    error_message = "model must not be empty"
  }
}
locals {
  prefix = "You are agent"
}
provider "openai" {}
provider "local" {}
manifest "m" {
  file "data/in.csv" { content = "a,b\n1,2\n" }
  dir "out" {}
  env = { REGION = "eu" }
}
capability "shell" "default" {
  timeout = "60s"
}
capability "filesystem" "default" {}
`)
	for i := 0; i < sandboxes; i++ {
		fmt.Fprintf(&b, "sandbox \"s%d\" {\n  provider = provider.local\n  manifest = manifest.m\n}\n", i)
	}
	for i := 0; i < agents; i++ {
		fmt.Fprintf(&b, `agent "a%d" {
  model        = var.model
  instructions = "${local.prefix} %d."
  sandbox      = sandbox.s%d
  capabilities = [capability.shell.default, capability.filesystem.default]
  handoffs     = [agent.a%d]
  tool "helper" {
    agent       = agent.a%d
    description = "Ask a helper."
  }
  max_turns = 20
}
`, i, i, i%sandboxes, team(i, 1, agents), team(i, 2, agents))
	}
	for i := 0; i < runs; i++ {
		input := fmt.Sprintf("Task %d", i)
		if i%10 == 9 {
			input = fmt.Sprintf("Task %d after ${run.r%d.output}", i, i-1)
		}
		fmt.Fprintf(&b, "run \"r%d\" {\n  agent = agent.a%d\n  input = \"%s\"\n}\n", i, i%agents, input)
	}
	b.WriteString("output \"last\" {\n  value = run.r9.output\n}\n")
	return b.String()
}

// team returns the agent k places after i within i's team of ten.
func team(i, k, agents int) int {
	base := i / 10 * 10
	size := min(10, agents-base)
	return base + (i-base+k)%size
}

// BenchmarkValidateLarge loads and validates (decoding, references,
// late-value checks and the dependency graph with its cycle check) a
// configuration with 1,000 agents, 1,000 runs and 100 sandboxes.
func BenchmarkValidateLarge(b *testing.B) {
	dir := b.TempDir()
	src := largeConfig(1000, 1000, 100)
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		c, diags := Load(dir, Options{Registry: builtin.Registry()})
		if diags.HasErrors() {
			b.Fatal(diags.Error())
		}
		if len(c.Agents) != 1000 || len(c.RunInstances) != 1000 || len(c.SandboxInstances) != 100 {
			b.Fatalf("got %d agents, %d runs, %d sandboxes", len(c.Agents), len(c.RunInstances), len(c.SandboxInstances))
		}
	}
}

// TestLargeConfigValid keeps the benchmark's configuration valid under
// plain go test.
func TestLargeConfigValid(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(largeConfig(50, 50, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
	c, diags := Load(dir, Options{Registry: builtin.Registry()})
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	g, _ := c.DependencyGraph()
	// Agent a9 reaches its whole team (a0..a9, sandboxes s0..s9).
	if deps := g.DependenciesOf("run.r9"); len(deps) != 11 || deps[0] != "run.r8" {
		t.Errorf("run.r9 depends on %v, want run.r8 and the 10 sandboxes", deps)
	}
	if n := len(c.AgentGraph().Cycles()); n != 5 {
		t.Errorf("agent graph has %d cycles, want one per team (5)", n)
	}
}
