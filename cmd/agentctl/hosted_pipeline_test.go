package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The pipeline tests of the hosted sandbox providers (Daytona, E2B,
// Runloop) run the real agentctl binary, built here, in a configuration
// directory against the provider's in-process fake. hostedPipeline is what
// they share: the binary, the directory, the child's environment and the
// API key it must never print or store.

// buildAgentctl builds the command into a temporary directory.
func buildAgentctl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "agentctl")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// hostedPipeline is one configuration directory driven by the agentctl
// binary against a hosted provider's fake.
type hostedPipeline struct {
	t   *testing.T
	bin string
	dir string
	env []string
	// service names the provider in messages ("Daytona"); key is its API
	// key, which agentctl must not print or keep in its state.
	service, key string
}

// newHostedPipeline builds agentctl and gives it a PATH, a HOME of its
// own, TMPDIR and env (the fake's address and key).
func newHostedPipeline(t *testing.T, service, key string, env ...string) hostedPipeline {
	t.Helper()
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "TMPDIR=" + os.TempDir()}
	return hostedPipeline{t: t, bin: buildAgentctl(t), dir: t.TempDir(), env: append(base, env...), service: service, key: key}
}

// writeConfig writes the configuration main.hcl from tmpl, with r's
// replacements made.
func (p *hostedPipeline) writeConfig(r *strings.Replacer, tmpl string) {
	p.t.Helper()
	if err := os.WriteFile(filepath.Join(p.dir, "main.hcl"), []byte(r.Replace(tmpl)), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

func (p *hostedPipeline) command(args ...string) *exec.Cmd {
	cmd := exec.Command(p.bin, append([]string{"-no-color"}, args...)...)
	cmd.Dir, cmd.Env = p.dir, p.env
	return cmd
}

// run runs agentctl to completion and fails the test on a non-zero exit
// or when it prints the API key.
func (p *hostedPipeline) run(args ...string) string {
	p.t.Helper()
	out, err := p.command(args...).CombinedOutput()
	if err != nil {
		p.t.Fatalf("agentctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if bytes.Contains(out, []byte(p.key)) {
		p.t.Errorf("agentctl %s printed the %s API key", strings.Join(args, " "), p.service)
	}
	return string(out)
}

// start starts agentctl in the background; the returned channel yields
// its exit.
func (p *hostedPipeline) start(out *bytes.Buffer, args ...string) (*exec.Cmd, <-chan error) {
	p.t.Helper()
	cmd := p.command(args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = cmd.Process.Kill() })
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return cmd, exited
}

// noKeyInState fails if any file agentctl keeps holds the API key.
func (p *hostedPipeline) noKeyInState() {
	_ = filepath.WalkDir(filepath.Join(p.dir, ".agentctl"), func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(p.key)) {
				p.t.Errorf("%s contains the %s API key", path, p.service)
			}
		}
		return nil
	})
}

// gatedPipelineConfig is the configuration of the E2B and Runloop pipeline
// tests for provider type provider, with sandboxSettings after the sandbox
// block's on_exit: a scripted run whose second tool call waits for the file
// {{GATES}}/gate.open after making {{GATES}}/gate.waiting, in a manifest
// rooted at {{ROOT}}/workspace.
func gatedPipelineConfig(provider, sandboxSettings string) string {
	return strings.NewReplacer("{{PROVIDER}}", provider, "{{SANDBOX}}", sandboxSettings).Replace(gatedPipelineTemplate)
}

const gatedPipelineTemplate = `
provider "{{PROVIDER}}" {}

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
        arguments = { cmd = "touch {{GATES}}/gate.waiting; while [ ! -e {{GATES}}/gate.open ]; do sleep 0.05; done; echo step2 >> output/log.txt", yield_time_ms = 60000 }
      }
    }
    reply {
      call "apply_patch" {
        arguments = { input = "*** Begin Patch\n*** Add File: output/report.txt\n+HELLO FROM THE PATCH\n*** End Patch\n" }
      }
    }
    reply {
      text = "Report written to output/report.txt."
    }
  }
}

manifest "work" {
  root = "{{ROOT}}/workspace"
  file "data/input.txt" {
    content = "hello from the manifest\n"
  }
  dir "output" {}
}

sandbox "box" {
  provider = provider.{{PROVIDER}}
  manifest = manifest.work
  on_exit  = "stop"
{{SANDBOX}}
}

capability "shell" "default" {}
capability "filesystem" "default" {}

agent "analyst" {
  provider     = provider.scripted
  instructions = "Write the report."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default, capability.filesystem.default]
  max_turns    = 8
}

run "report" {
  agent = agent.analyst
  input = "Write the report."
}

output "answer" {
  value = run.report.output
}
`
