package kubernetes

// Engine-level acceptance tests: the real agentctl binary, built here,
// applies configurations that use provider "kubernetes" against the test
// cluster, and the tests check what a user would see (plan text, state,
// outputs, transcripts, the objects left in the namespace).

import (
	"bytes"
	"context"
	"encoding/json"
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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/agentctl/agentctl/cmd/agentctl/clitest"
	"github.com/agentctl/agentctl/internal/k8stest"
	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/internal/testfiles"
	"github.com/agentctl/agentctl/sandbox"
)

var agentctlBin clitest.Binary

// agentctlBinary builds cmd/agentctl once per test binary.
func agentctlBinary(t *testing.T) string { return agentctlBin.Path(t) }

// cli runs agentctl in one configuration directory.
type cli struct{ *clitest.CLI }

func newCLI(t *testing.T, dir, file string, env ...string) *cli {
	return &cli{&clitest.CLI{T: t, Bin: agentctlBinary(t), Dir: dir, File: file, Env: env, Timeout: 4 * time.Minute}}
}

// destroyOnCleanup destroys what the configuration created at the end
// of the test (the namespace goes too, with anything left in it).
func (c *cli) destroyOnCleanup() {
	c.T.Cleanup(func() {
		if st := c.State(); st != nil && len(st.Sandboxes) > 0 {
			c.Run("destroy", "-auto-approve", c.File)
		}
	})
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

// releaseWhenServed runs while an apply does: it polls the URL recorded
// in state for port 8080 of sandbox.box until it serves want, then
// creates www/.release in the sandbox, which ends the run's waiting step.
func releaseWhenServed(ctx context.Context, p *Provider, c *cli, want string) (string, error) {
	hc := &http.Client{Timeout: 2 * time.Second}
	last := "no URL in state yet"
	for {
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the URL in state never served %q (last: %s)", want, last)
		case <-time.After(100 * time.Millisecond):
		}
		st := c.State()
		if st == nil || st.Sandboxes["sandbox.box"] == nil {
			continue
		}
		ss := st.Sandboxes["sandbox.box"]
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
		sb, err := p.Open(ctx, sandbox.Spec{Address: "sandbox.box"}, ss.Session)
		if err != nil {
			return url, err
		}
		return url, sb.WriteFile(ctx, "www/.release", []byte("go\n"), 0o644)
	}
}

// applyServing runs apply while releaseWhenServed answers the serve run.
func applyServing(t *testing.T, p *Provider, c *cli, args ...string) (out, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	type result struct {
		url string
		err error
	}
	done := make(chan result, 1)
	go func() {
		u, err := releaseWhenServed(ctx, p, c, "hello-from-pod")
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
        arguments = { cmd = "cat data/input.csv brief.md project/src/app.txt project/docs/readme.txt vendor/lib/README.md vendor/lib/lib/code.txt out/notes.md out/combined.txt; test -d output && echo dir-ok; test -e vendor/lib/.git || echo no-git-dir; find project | sort | tr '\\n' ' '; echo; echo \"region=$REGION token-length=$${#DB_TOKEN}\"" }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = "rm -f www/.release; mkdir -p www && echo hello-from-pod > www/index.html && httpd -p 8080 -h www </dev/null >/dev/null 2>&1; i=0; while [ ! -f www/.release ] && [ $i -lt 1200 ]; do sleep 0.1; i=$((i+1)); done; test -f www/.release && echo released" }
      }
    }
    reply {
      text = "served"
    }
  }
  script "keeper" {
    reply {
      call "exec_command" {
        arguments = { cmd = "echo kept-by-the-run > kept.txt" }
      }
    }
    reply {
      text = "kept"
    }
  }
}

provider "kubernetes" {
  config_path = "@KUBECONFIG@"
  namespace   = "@NAMESPACE@"
}

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

manifest "small" {
  file "hello.txt" {
    content = "hello\n"
  }
}

sandbox "box" {
  provider = provider.kubernetes
  image    = "@IMAGE@"
  manifest = manifest.work
  ports    = [8080]
  on_exit  = "stop"
}

sandbox "kept" {
  provider = provider.kubernetes
  image    = "@IMAGE@"
  manifest = manifest.small
  on_exit  = "keep"
}

capability "shell" "default" {
  timeout = "150s"
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

agent "keeper" {
  provider     = provider.scripted
  instructions = "Keep a file."
  sandbox      = sandbox.kept
  capabilities = [capability.shell.default]
}

run "pipeline" {
  agent = agent.worker
  input = "Update the project and write notes."
}

run "serve" {
  agent      = agent.server
  input      = "Show the workspace and serve www on port 8080."
  depends_on = [run.pipeline]
}

run "keep" {
  agent = agent.keeper
  input = "Keep a file."
}

output "url" {
  value = sandbox.box.urls["8080"]
}
`

// The whole lifecycle through the binary against the cluster: every
// manifest entry type, tool calls writing files, env and ephemeral env, a
// port reachable from the host through the port-forward of the apply,
// on_exit = "stop" (the Pod deleted after the snapshot, no change
// planned) and the restore by the next apply that runs in it, a Pod deleted behind agentctl's back restored from
// its snapshot without re-running, and a destroy that leaves nothing
// labelled.
func TestKubernetesPipeline(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	ctx := context.Background()
	repo := bareRepo(t)
	dir := t.TempDir()
	const token = "tok-5e4f1d9a7c3b"
	testfiles.WriteTree(t, dir, map[string]string{
		"pipeline.hcl":                    strings.NewReplacer("@REPO@", repo, "@IMAGE@", k8stest.Image, "@KUBECONFIG@", c.kubeconfig, "@NAMESPACE@", c.ns).Replace(pipelineHCL),
		"brief.md":                        "the brief\n",
		"project/src/app.txt":             "name demo\nversion 1\n",
		"project/node_modules/dep/i.js":   "excluded\n",
		"project/scratch.tmp":             "excluded\n",
		"project/docs/readme.txt":         "docs\n",
		"project/docs/node_modules/x.txt": "excluded too\n",
	})
	cl := newCLI(t, dir, "pipeline.hcl", "AGENTCTL_VAR_token="+token)
	cl.destroyOnCleanup()
	cl.OK("validate", "pipeline.hcl")

	out, url1 := applyServing(t, c.p, cl, "apply", "-auto-approve", "pipeline.hcl")
	mustContain(t, "first apply", out, "sandbox.box: Creation complete", "3 runs executed", "pipeline done", `url = "http://127.0.0.1:`)
	st := cl.MustState()
	ss := st.Sandboxes["sandbox.box"]
	if ss.Status != "deleted" || st.Runs["run.pipeline"].Status != "completed" || st.Runs["run.serve"].Status != "completed" || ss.Snapshot == "" {
		t.Fatalf("after apply: sandbox %s (snapshot %q), runs %s/%s", ss.Status, ss.Snapshot, st.Runs["run.pipeline"].Status, st.Runs["run.serve"].Status)
	}
	if ss.URLs["8080"] != url1 {
		t.Fatalf("state URL %q, served at %q", ss.URLs["8080"], url1)
	}
	want := "a,b\n1,2\nthe brief\nname demo\nversion 2\ndocs\nlib from git\ncode\nwritten by the run\nlib from git\nthe brief\n" +
		"dir-ok\nno-git-dir\nproject project/docs project/docs/readme.txt project/src project/src/app.txt \n" +
		fmt.Sprintf("region=eu token-length=%d\n", len(token))
	mustContain(t, "the workspace as the serve run saw it", cl.OK("show", "-config=pipeline.hcl", "run.serve"), strings.Split(strings.TrimSpace(want), "\n")...)
	// on_exit = "stop" deleted the Pod after the snapshot.
	pods, err := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{LabelSelector: selector(st.Lineage, "sandbox.box")})
	if err != nil || len(pods.Items) != 0 {
		t.Fatalf(`on_exit = "stop" left Pods: %d %v`, len(pods.Items), err)
	}
	// Nothing in the cluster holds the ephemeral token, nor does the state.
	all, _ := c.cs.CoreV1().Pods(c.ns).List(ctx, metav1.ListOptions{})
	for _, p := range all.Items {
		if strings.Contains(fmt.Sprint(p.Spec), token) {
			t.Fatalf("Pod %s holds the ephemeral token", p.Name)
		}
	}
	filepath.WalkDir(filepath.Join(dir, ".agentctl"), func(path string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(token)) {
				t.Errorf("%s holds the ephemeral token", path)
			}
		}
		return nil
	})

	// The stopped sandbox (its Pod deleted, its workspace in the
	// snapshot) is left alone by a plan with nothing to run: the
	// unchanged configuration applies as nothing. The apply that re-runs
	// serve restores it and the run sees the files the first apply's runs
	// left.
	out, code := cl.Run("plan", "-detailed-exitcode", "pipeline.hcl")
	if code != 0 {
		t.Fatalf("plan after stop: exit %d, want 0 (no changes)\n%s", code, out)
	}
	out, url2 := applyServing(t, c.p, cl, "apply", "-auto-approve", "-replace=run.serve", "pipeline.hcl")
	mustContain(t, "restoring apply", out, "1 run executed", "served")
	mustContain(t, "the workspace after the restore", cl.OK("show", "-config=pipeline.hcl", "run.serve"), strings.Split(strings.TrimSpace(want), "\n")...)
	if st := cl.MustState(); st.Sandboxes["sandbox.box"].URLs["8080"] != url2 {
		t.Fatalf("after restore: state URL %q, served at %q", st.Sandboxes["sandbox.box"].URLs["8080"], url2)
	}
	t.Logf("port 8080: %s, after restore %s", url1, url2)

	// A Pod deleted behind agentctl's back: plan says restore, apply
	// restores it from its snapshot without running anything.
	st = cl.MustState()
	kept := st.Sandboxes["sandbox.kept"]
	if kept.Status != "running" {
		t.Fatalf("sandbox.kept is %s", kept.Status)
	}
	if got := cl.Exec("sandbox.kept", "cat hello.txt kept.txt"); got != "hello\nkept-by-the-run\n" {
		t.Fatalf("sandbox.kept: %q", got)
	}
	var d sessionData
	if err := json.Unmarshal(kept.Session.Data, &d); err != nil {
		t.Fatal(err)
	}
	if err := c.cs.CoreV1().Pods(c.ns).Delete(ctx, d.Pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	out, code = cl.Run("plan", "-detailed-exitcode", "pipeline.hcl")
	if code != 2 {
		t.Fatalf("plan after the deletion: exit %d\n%s", code, out)
	}
	mustContain(t, "plan after the deletion", out, "# sandbox.kept will be restored from its snapshot", "0 runs to execute, 0 to resume")
	out = cl.OK("apply", "-auto-approve", "-target=sandbox.kept", "pipeline.hcl")
	mustContain(t, "restore apply", out, "0 runs executed, 0 resumed")
	if got := cl.Exec("sandbox.kept", "cat hello.txt kept.txt"); got != "hello\nkept-by-the-run\n" {
		t.Fatalf("restored sandbox.kept: %q", got)
	}

	// Its image changed behind agentctl's back: plan says replace, with
	// the reason.
	st = cl.MustState()
	if err := json.Unmarshal(st.Sandboxes["sandbox.kept"].Session.Data, &d); err != nil {
		t.Fatal(err)
	}
	pod, err := c.cs.CoreV1().Pods(c.ns).Get(ctx, d.Pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Spec.Containers[0].Image = k8stest.UsersImage
	if _, err := c.cs.CoreV1().Pods(c.ns).Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, _ = cl.Run("plan", "-target=sandbox.kept", "pipeline.hcl")
	mustContain(t, "plan after the image change", out, "# sandbox.kept will be replaced", `changed to "`+k8stest.UsersImage+`" outside agentctl`)

	// destroy leaves nothing labelled with the state's lineage.
	cl.OK("destroy", "-auto-approve", "pipeline.hcl")
	if left := c.labelled(t, st.Lineage); len(left) != 0 {
		t.Fatalf("after destroy: %v", left)
	}
}

// examples/kubernetes.hcl applied as a user would, once straight through
// and once killed with SIGKILL during its long step: plan says resume,
// and the resumed apply ends with the same output.
func TestKubernetesExampleResumeAfterKill(t *testing.T) {
	t.Parallel()
	c := testCluster(t)
	example, err := os.ReadFile("../../examples/kubernetes.hcl")
	if err != nil {
		t.Fatal(err)
	}
	setup := func() *cli {
		dir := t.TempDir()
		testfiles.WriteTree(t, dir, map[string]string{"kubernetes.hcl": string(example)})
		cl := newCLI(t, dir, "kubernetes.hcl", "AGENTCTL_VAR_image="+k8stest.Image, "AGENTCTL_VAR_namespace="+c.ns, "KUBECONFIG="+c.kubeconfig)
		cl.destroyOnCleanup()
		return cl
	}

	a := setup()
	outA := a.OK("apply", "-auto-approve", "kubernetes.hcl")
	mustContain(t, "apply", outA, "1 run executed", "token is set")
	answer := a.OK("output", "-config=kubernetes.hcl", "answer")
	mustContain(t, "the run", a.OK("show", "-config=kubernetes.hcl", "run.report"), "14300000", "token is set")
	// The header's second command.
	if got := a.OK("exec", "-config=kubernetes.hcl", "sandbox.box", "--", "cat", "out/report.md"); !strings.Contains(got, "Total: 14300000") {
		t.Fatalf("out/report.md: %q", got)
	}
	a.OK("destroy", "-auto-approve", "kubernetes.hcl")

	b := setup()
	cmdCtx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := b.Command(cmdCtx, "apply", "-auto-approve", "kubernetes.hcl")
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
	out, code := b.Run("plan", "-detailed-exitcode", "kubernetes.hcl")
	if code != 2 {
		t.Fatalf("plan after kill: exit %d\n%s", code, out)
	}
	mustContain(t, "plan after kill", out, "# run.report will be resumed", "interrupted at turn", "0 runs to execute, 1 to resume")
	mustNotContain(t, "plan after kill", out, "sandbox.box will")
	out = b.OK("apply", "-auto-approve", "kubernetes.hcl")
	mustContain(t, "resumed apply", out, "0 runs executed, 1 resumed")
	if got := b.OK("output", "-config=kubernetes.hcl", "answer"); got != answer {
		t.Fatalf("output after resume %q, uninterrupted %q", got, answer)
	}
	mustContain(t, "the resumed run", b.OK("show", "-config=kubernetes.hcl", "run.report"), "14300000", "token is set")
	st := b.MustState()
	b.OK("destroy", "-auto-approve", "kubernetes.hcl")
	if left := c.labelled(t, st.Lineage); len(left) != 0 {
		t.Fatalf("after destroy: %v", left)
	}
}
