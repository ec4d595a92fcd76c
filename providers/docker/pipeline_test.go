package docker

// Engine-level acceptance tests: the real agentctl binary, built here with
// go build, applies configurations that use provider "docker" with the
// test image, and the tests check what a user would see (plan text, state,
// agentctl exec output, the containers the engine leaves).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/cmd/agentctl/clitest"
	"github.com/agentctl/agentctl/internal/testfiles"

	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/sandbox"
)

var agentctlBin clitest.Binary

// agentctlBinary builds cmd/agentctl once per test binary.
func agentctlBinary(t *testing.T) string { return agentctlBin.Path(t) }

func removeBinary() { agentctlBin.Remove() }

// cli runs agentctl in one configuration directory.
type cli struct{ *clitest.CLI }

func newCLI(t *testing.T, dir, file string, env ...string) *cli {
	return &cli{&clitest.CLI{T: t, Bin: agentctlBinary(t), Dir: dir, File: file, Env: env}}
}

// destroyOnCleanup destroys what the configuration created at the end of
// the test and removes any container of its lineage that is left.
func (c *cli) destroyOnCleanup(p *Provider) {
	c.T.Cleanup(func() {
		st := c.State()
		if st == nil {
			return
		}
		if len(st.Sandboxes) > 0 {
			c.Run("destroy", "-auto-approve", c.File)
		}
		ctx := context.Background()
		list, _ := p.ListManaged(ctx, st.Lineage)
		for _, m := range list {
			_, _ = p.Client().ContainerRemove(ctx, m.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		}
	})
}

// removeAndRestore removes the container id of the sandbox at addr behind
// agentctl's back; plan must say restore with nothing to run, and apply
// restores it without running anything.
func removeAndRestore(t *testing.T, p *Provider, c *cli, addr, id string) {
	t.Helper()
	if _, err := p.Client().ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	out, code := c.Run("plan", "-detailed-exitcode", c.File)
	if code != 2 {
		t.Fatalf("plan after removal: exit %d\n%s", code, out)
	}
	mustContain(t, "plan after removal", out, "# "+addr+" will be restored from its snapshot", "Plan: 1 to create, 0 to change, 0 to destroy; 0 runs to execute, 0 to resume.")
	out = c.OK("apply", "-auto-approve", c.File)
	mustContain(t, "restore apply", out, "0 runs executed, 0 resumed")
	mustNotContain(t, "restore apply", out, "Executing...")
}

func mustContain(t *testing.T, what, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Fatalf("%s: missing %q in:\n%s", what, w, out)
		}
	}
}

func mustNotContain(t *testing.T, what, out string, nots ...string) {
	t.Helper()
	for _, n := range nots {
		if strings.Contains(out, n) {
			t.Fatalf("%s: unexpected %q in:\n%s", what, n, out)
		}
	}
}

func gitCmd(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// bareRepo makes a local bare repository with one commit on main.
func bareRepo(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if mustDocker() {
			t.Fatal("git is not installed (apt-get install git)")
		}
		testenv.Missing(t, "git is not installed")
	}
	base := t.TempDir()
	src := filepath.Join(base, "src")
	testfiles.WriteTree(t, src, map[string]string{"README.md": "lib from git\n", "lib/code.txt": "code\n"})
	gitCmd(t, src, "init", "-q", "-b", "main")
	gitCmd(t, src, "add", ".")
	gitCmd(t, src, "commit", "-q", "-m", "init")
	gitCmd(t, base, "clone", "-q", "--bare", src, "lib.git")
	return filepath.Join(base, "lib.git")
}

// releaseWhenServed runs while an apply does: it polls the URL recorded in
// state for addr's port 8080 until it serves want, then creates
// www/.release in the sandbox, which ends the run's waiting step. It
// returns the URL that answered.
func releaseWhenServed(ctx context.Context, p *Provider, c *cli, addr, want string) (string, error) {
	hc := &http.Client{Timeout: 2 * time.Second}
	last := "no URL in state yet"
	for {
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the URL in state never served %q (last: %s)", want, last)
		case <-time.After(100 * time.Millisecond):
		}
		st := c.State()
		if st == nil || st.Sandboxes[addr] == nil {
			continue
		}
		ss := st.Sandboxes[addr]
		url := ss.URLs["8080"]
		if url == "" {
			continue
		}
		resp, err := hc.Get(url + "/index.html")
		if err != nil {
			last = err.Error()
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != want {
			last = fmt.Sprintf("%s: %d %q", url, resp.StatusCode, body)
			continue
		}
		sb, err := p.Open(ctx, sandbox.Spec{Address: addr}, ss.Session)
		if err != nil {
			return url, err
		}
		return url, sb.WriteFile(ctx, "www/.release", []byte("go\n"), 0o644)
	}
}

// applyServing runs apply while releaseWhenServed answers the serve run.
func applyServing(t *testing.T, p *Provider, c *cli, args ...string) (out, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type result struct {
		url string
		err error
	}
	done := make(chan result, 1)
	go func() {
		u, err := releaseWhenServed(ctx, p, c, "sandbox.box", "hello-from-container")
		done <- result{u, err}
	}()
	out, code := c.Run(args...)
	cancel()
	r := <-done
	if code != 0 {
		t.Fatalf("agentctl %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	if r.err != nil {
		t.Fatalf("port 8080 during apply: %v\napply output:\n%s", r.err, out)
	}
	return out, r.url
}

const pipelineHCL = `
variable "token" {
  type      = string
  sensitive = true
}

provider "scripted" {
  script "worker" {
    reply {
      call "exec_command" {
        arguments = { cmd = "echo \"region=$REGION token=$DB_TOKEN\"" }
      }
    }
    reply {
      call "apply_patch" {
        arguments = {
          input = <<-PATCH
            *** Begin Patch
            *** Update File: project/src/app.txt
            @@
             name demo
            -version 1
            +version 2
            *** Add File: out/notes.md
            +written by the run
            *** End Patch
          PATCH
        }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "cat vendor/lib/README.md brief.md > out/combined.txt && wc -l < out/combined.txt" }
      }
    }
    reply {
      text = "pipeline done"
    }
  }
  script "server" {
    reply {
      call "exec_command" {
        arguments = { cmd = "rm -f www/.release; mkdir -p www && echo hello-from-container > www/index.html && httpd -p 8080 -h www </dev/null >/dev/null 2>&1; i=0; while [ ! -f www/.release ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; test -f www/.release && echo released" }
      }
    }
    reply {
      text = "served"
    }
  }
}

provider "docker" {}

manifest "work" {
  root = "/workspace"
  file "data/input.csv" {
    content = "a,b\n1,2\n"
  }
  dir "output" {}
  local_file "brief.md" {
    source = "brief.md"
  }
  local_dir "project" {
    source  = "project"
    exclude = ["node_modules", "*.tmp"]
  }
  git_repo "vendor/lib" {
    repo = "file://@REPO@"
    ref  = "main"
  }
  env = { REGION = "eu" }
  env "DB_TOKEN" {
    value     = var.token
    ephemeral = true
  }
}

sandbox "box" {
  provider = provider.docker
  image    = "@IMAGE@"
  manifest = manifest.work
  network  = "bridge"
  ports    = [8080]
  on_exit  = "stop"
  user     = "1000:1000"
}

capability "shell" "default" {
  timeout = "90s"
}

capability "filesystem" "default" {}

agent "worker" {
  provider     = provider.scripted
  instructions = "Work on the project."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default, capability.filesystem.default]
}

agent "server" {
  provider     = provider.scripted
  instructions = "Serve www."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default]
}

run "pipeline" {
  agent = agent.worker
  input = "Update the project and write notes."
}

run "serve" {
  agent      = agent.server
  input      = "Serve www on port 8080."
  depends_on = [run.pipeline]
}

output "url" {
  value = sandbox.box.urls["8080"]
}
`

// The whole lifecycle through the binary: every manifest entry type, tool
// calls (exec_command, apply_patch) writing files, env and ephemeral env,
// a port reachable from the host, on_exit = "stop" and the restart by the
// next apply (with the port URL re-recorded), a container removed behind
// agentctl's back restored from its snapshot without re-running, and a
// destroy that leaves no labelled container.
func TestDockerPipeline(t *testing.T) {
	p := testProvider(t)
	ctx := context.Background()
	repo := bareRepo(t)
	dir := t.TempDir()
	const token = "tok-5e4f1d9a7c3b"
	testfiles.WriteTree(t, dir, map[string]string{
		"pipeline.hcl":                    strings.NewReplacer("@REPO@", repo, "@IMAGE@", TestImage).Replace(pipelineHCL),
		"brief.md":                        "the brief\n",
		"project/src/app.txt":             "name demo\nversion 1\n",
		"project/node_modules/dep/i.js":   "excluded\n",
		"project/scratch.tmp":             "excluded\n",
		"project/docs/readme.txt":         "docs\n",
		"project/docs/node_modules/x.txt": "excluded too\n",
	})
	c := newCLI(t, dir, "pipeline.hcl", "AGENTCTL_VAR_token="+token)
	c.destroyOnCleanup(p)
	c.OK("validate", "pipeline.hcl")

	// First apply: create, materialize, both runs; the serve run waits
	// until the host has fetched the page through the URL in state.
	out, url1 := applyServing(t, p, c, "apply", "-auto-approve", "pipeline.hcl")
	mustContain(t, "first apply", out, "sandbox.box: Creation complete", "2 runs executed", "pipeline done", `url = "http://127.0.0.1:`)
	st := c.MustState()
	ss := st.Sandboxes["sandbox.box"]
	if ss.Status != "stopped" || st.Runs["run.pipeline"].Status != "completed" || st.Runs["run.serve"].Status != "completed" {
		t.Fatalf("after apply: sandbox %s, runs %s/%s", ss.Status, st.Runs["run.pipeline"].Status, st.Runs["run.serve"].Status)
	}
	if ss.URLs["8080"] != url1 {
		t.Fatalf("state URL %q, served at %q", ss.URLs["8080"], url1)
	}
	id := ss.Session.ID
	insp, err := p.Client().ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if insp.Container.State.Running {
		t.Fatal(`on_exit = "stop" left the container running`)
	}
	if strings.Contains(string(insp.Raw), token) {
		t.Fatal("the ephemeral token is in the container's configuration")
	}

	// Every entry type, the files the run wrote, env and ephemeral env.
	got := c.Exec("sandbox.box", `cat data/input.csv brief.md project/src/app.txt project/docs/readme.txt vendor/lib/README.md vendor/lib/lib/code.txt out/notes.md out/combined.txt
test -d output && echo dir-ok
test -e vendor/lib/.git || echo no-git-dir
find project | sort | tr '\n' ' '; echo
echo "region=$REGION token-length=${#DB_TOKEN}"`)
	want := "a,b\n1,2\nthe brief\nname demo\nversion 2\ndocs\nlib from git\ncode\nwritten by the run\nlib from git\nthe brief\n" +
		"dir-ok\nno-git-dir\nproject project/docs project/docs/readme.txt project/src project/src/app.txt \n" +
		fmt.Sprintf("region=eu token-length=%d\n", len(token))
	if got != want {
		t.Fatalf("workspace:\n got %q\nwant %q", got, want)
	}
	if res, _ := p.Client().ContainerInspect(ctx, id, client.ContainerInspectOptions{}); res.Container.State.Running {
		t.Fatal("agentctl exec left the stopped container running")
	}
	// The model saw the scrubbed token; nothing under .agentctl holds it.
	mustContain(t, "show", c.OK("show", "-config=pipeline.hcl", "run.pipeline"), "region=eu token=(sensitive)")
	filepath.WalkDir(filepath.Join(dir, ".agentctl"), func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(token)) {
				t.Errorf("%s holds the ephemeral token", path)
			}
		}
		return nil
	})

	// The next apply that needs the stopped sandbox starts it again; the
	// host port changes on restart and the URL in state follows.
	out, url2 := applyServing(t, p, c, "apply", "-auto-approve", "-replace=run.serve", "pipeline.hcl")
	mustContain(t, "restart apply", out, "1 run executed", "served")
	if st := c.MustState(); st.Sandboxes["sandbox.box"].URLs["8080"] != url2 || st.Sandboxes["sandbox.box"].Session.ID != id {
		t.Fatalf("after restart: state URL %q (served at %q), container %s (was %s)", st.Sandboxes["sandbox.box"].URLs["8080"], url2, st.Sandboxes["sandbox.box"].Session.ID, id)
	}
	mustContain(t, "outputs", c.OK("output", "-config=pipeline.hcl", "url"), url2)
	t.Logf("port 8080: %s, after restart %s", url1, url2)

	// Removed behind agentctl's back: plan says restore, runs stay.
	removeAndRestore(t, p, c, "sandbox.box", id)
	st = c.MustState()
	if nid := st.Sandboxes["sandbox.box"].Session.ID; nid == id || nid == "" {
		t.Fatalf("restored sandbox has container %q (old %q)", nid, id)
	}
	got = c.Exec("sandbox.box", "cat out/notes.md project/src/app.txt www/index.html; id -u")
	if got != "written by the run\nname demo\nversion 2\nhello-from-container\n1000\n" {
		t.Fatalf("restored workspace: %q", got)
	}
	if out, code := c.Run("plan", "-detailed-exitcode", "pipeline.hcl"); code != 0 {
		t.Fatalf("plan after restore: exit %d\n%s", code, out)
	}

	// destroy leaves no container with agentctl's labels for this state.
	c.OK("destroy", "-auto-approve", "pipeline.hcl")
	if list, err := p.ListManaged(ctx, st.Lineage); err != nil || len(list) != 0 {
		t.Fatalf("after destroy: %v %v", list, err)
	}
}

// examples/docker-offline.hcl, applied as a user would, once straight
// through and once killed with SIGKILL during its long step: plan says
// resume, and the resumed apply ends with the same output and files.
func TestDockerOfflineExampleResumeAfterKill(t *testing.T) {
	p := testProvider(t)
	ctx := context.Background()
	example, err := os.ReadFile("../../examples/docker-offline.hcl")
	if err != nil {
		t.Fatal(err)
	}
	setup := func() *cli {
		dir := t.TempDir()
		testfiles.WriteTree(t, dir, map[string]string{"docker-offline.hcl": string(example)})
		c := newCLI(t, dir, "docker-offline.hcl", "AGENTCTL_VAR_image="+TestImage)
		c.destroyOnCleanup(p)
		return c
	}
	const files = "cat out/report.md out/total.txt"

	// Straight through.
	a := setup()
	outA := a.OK("apply", "-auto-approve", "docker-offline.hcl")
	mustContain(t, "apply", outA, "1 run executed", "token is set")
	answer := a.OK("output", "-config=docker-offline.hcl", "answer")
	filesA := a.Exec("sandbox.box", files)
	if !strings.Contains(filesA, "Total: 14300000") {
		t.Fatalf("report: %q", filesA)
	}
	a.OK("destroy", "-auto-approve", "docker-offline.hcl")

	// Killed during "sleep 3": wait until the model turn that asks for it
	// is checkpointed in the journal, then SIGKILL.
	b := setup()
	cmdCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := b.Command(cmdCtx, "apply", "-auto-approve", "docker-offline.hcl")
	var killedOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &killedOut, &killedOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	journals := filepath.Join(b.StateDir(), "journals", "*.jsonl")
poll:
	for {
		select {
		case err := <-exited:
			t.Fatalf("apply ended (%v) before its long step was checkpointed:\n%s", err, killedOut.String())
		case <-time.After(50 * time.Millisecond):
		}
		names, _ := filepath.Glob(journals)
		for _, n := range names {
			if j, _ := os.ReadFile(n); bytes.Contains(j, []byte("sleep 3")) {
				break poll
			}
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	if st := b.MustState(); st.Runs["run.report"] == nil || st.Runs["run.report"].Status != "running" {
		t.Fatalf("after kill -9: %+v\n%s", st.Runs["run.report"], killedOut.String())
	}
	out, code := b.Run("plan", "-detailed-exitcode", "docker-offline.hcl")
	if code != 2 {
		t.Fatalf("plan after kill: exit %d\n%s", code, out)
	}
	mustContain(t, "plan after kill", out, "# run.report will be resumed", "interrupted at turn", "0 runs to execute, 1 to resume")
	mustNotContain(t, "plan after kill", out, "sandbox.box will")
	out = b.OK("apply", "-auto-approve", "docker-offline.hcl")
	mustContain(t, "resumed apply", out, "0 runs executed, 1 resumed")
	if got := b.OK("output", "-config=docker-offline.hcl", "answer"); got != answer {
		t.Fatalf("output after resume %q, uninterrupted %q", got, answer)
	}
	if got := b.Exec("sandbox.box", files); got != filesA {
		t.Fatalf("files after resume %q, uninterrupted %q", got, filesA)
	}
	st := b.MustState()
	b.OK("destroy", "-auto-approve", "docker-offline.hcl")
	if list, err := p.ListManaged(ctx, st.Lineage); err != nil || len(list) != 0 {
		t.Fatalf("after destroy: %v %v", list, err)
	}
}
