package engine

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/internal/fakeopenai"
	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/providers/builtin"
	"github.com/agentctl/agentctl/state/local"
)

// writeSkills writes two skills into dir.
func writeSkills(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		"csv-summary/SKILL.md":            "---\nname: csv-summary\ndescription: Summarize a CSV file.\n---\nRun scripts/sum.sh.\n",
		"csv-summary/scripts/sum.sh":      "#!/bin/sh\necho summed\n",
		"release-notes/SKILL.md":          "---\nname: release-notes\ndescription: >\n  Write release notes,\n  grouped.\n---\nGroup the changes.\n",
		"release-notes/references/ex.txt": "an example\n",
	}
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(c), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// skillsConfig is a pipeline whose agent has skills from source (the
// body of the capability) and a shell, on the OpenAI fake at url; its
// workspace is dir/ws.
func skillsConfig(url, source string) string {
	return fmt.Sprintf(`
provider "openai" {
  base_url    = %q
  max_retries = 0
}
provider "local" { isolation = "none" }
sandbox "s" {
  provider = provider.local
}
capability "shell" "default" {}
capability "skills" "team" {
  %s
}
agent "a" {
  model        = "gpt-test"
  sandbox      = sandbox.s
  capabilities = [capability.shell.default, capability.skills.team]
}
run "r" {
  agent = agent.a
  input = "go"
}
`, url, source)
}

// workspaceFile finds the file whose path ends in rel under dir (the
// local sandbox's workspace lives in the state directory).
func workspaceFile(dir, rel string) (os.FileInfo, error) {
	var found os.FileInfo
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(filepath.ToSlash(p), "/"+rel) {
			found, _ = d.Info()
		}
		return nil
	})
	if found == nil {
		return nil, fmt.Errorf("%s not found under %s", rel, dir)
	}
	return found, nil
}

func instructionsOf(t *testing.T, r fakeopenai.Request) string {
	t.Helper()
	s, _ := r.JSON["instructions"].(string)
	return s
}

func TestSkillsEagerAndLazy(t *testing.T) {
	git, gitErr := exec.LookPath("git")
	sources := map[string]func(t *testing.T, dir string) string{
		"directory": func(t *testing.T, dir string) string {
			writeSkills(t, filepath.Join(dir, "skills"))
			return `source = "./skills"`
		},
		"git": func(t *testing.T, dir string) string {
			if gitErr != nil {
				testenv.Missing(t, "git is not installed")
			}
			repo := filepath.Join(t.TempDir(), "repo")
			writeSkills(t, filepath.Join(repo, "pack"))
			for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "skills"}} {
				if out, err := exec.Command(git, append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
					t.Fatalf("git %v: %v\n%s", args, err, out)
				}
			}
			return fmt.Sprintf("git_repo {\n    repo    = %q\n    ref     = \"main\"\n    subpath = \"pack\"\n  }", repo)
		},
	}
	for name, source := range sources {
		for _, lazy := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/lazy=%v", name, lazy), func(t *testing.T) {
				srv := fakeopenai.New(t)
				if lazy {
					srv.Enqueue(fakeopenai.Calls(fakeopenai.FunctionCall("call_l", "load_skill", `{"skill_name":"release-notes"}`)))
				}
				srv.Enqueue(fakeopenai.Text("done"))
				dir := t.TempDir()
				ws := filepath.Join(dir, ".agentctl")
				src := source(t, dir)
				if lazy {
					src += "\n  lazy = true"
				}
				cfg := skillsConfig(srv.URL, src)
				if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(cfg), 0o644); err != nil {
					t.Fatal(err)
				}
				e := reloadDir(t, dir)
				e.Environ = []string{"OPENAI_API_KEY=sk-test-not-a-real-key"}
				st := planApply(t, e, PlanOptions{})
				if r := st.Runs["run.r"]; r == nil || r.Status != RunCompleted {
					t.Fatalf("run.r = %+v", r)
				}
				reqs := srv.Requests()
				instr := instructionsOf(t, reqs[0])
				for _, want := range []string{
					"- csv-summary: Summarize a CSV file. (file: .agents/csv-summary/SKILL.md)",
					"- release-notes: Write release notes, grouped. (file: .agents/release-notes/SKILL.md)",
				} {
					if !strings.Contains(instr, want) {
						t.Errorf("instructions lack %q:\n%s", want, instr)
					}
				}
				tools := fmt.Sprint(reqs[0].JSON["tools"])
				if strings.Contains(tools, "load_skill") != lazy {
					t.Errorf("load_skill offered = %v, want %v: %s", !lazy, lazy, tools)
				}
				_, errCSV := workspaceFile(ws, ".agents/csv-summary/scripts/sum.sh")
				_, errNotes := workspaceFile(ws, ".agents/release-notes/references/ex.txt")
				if lazy {
					if errCSV == nil || errNotes != nil {
						t.Errorf("lazy: csv-summary present %v (want absent), release-notes present %v (want loaded)", errCSV == nil, errNotes == nil)
					}
					out := fmt.Sprint(reqs[1].JSON["input"])
					if !strings.Contains(out, `"status":"loaded"`) || !strings.Contains(out, "Group the changes.") {
						t.Errorf("load_skill output not sent back: %s", out)
					}
				} else {
					if errCSV != nil || errNotes != nil {
						t.Fatalf("eager skills not in the workspace: %v, %v", errCSV, errNotes)
					}
					if st, _ := workspaceFile(ws, ".agents/csv-summary/scripts/sum.sh"); st.Mode()&0o111 == 0 {
						t.Error("the script lost its execute bit")
					}
				}
				// Unchanged skills: nothing to do; an edited SKILL.md re-runs.
				if a := planActions(t, e)["run.r"]; a != ActionNoop {
					t.Fatalf("unchanged skills plan %s", a)
				}
				if name == "directory" {
					f := filepath.Join(dir, "skills/csv-summary/SKILL.md")
					b, _ := os.ReadFile(f)
					os.WriteFile(f, append(b, "Be brief.\n"...), 0o644)
					e = reloadDir(t, dir)
					if a := planActions(t, e)["run.r"]; a != ActionRerun {
						t.Fatalf("an edited SKILL.md plans %s", a)
					}
				}
			})
		}
	}
}

// reloadDir loads the configuration in dir with its state in dir/.agentctl.
func reloadDir(t testing.TB, dir string) *Engine {
	t.Helper()
	cfg, diags := config.Load(dir, config.Options{Registry: builtin.Registry()})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	sd, err := local.OpenDir(filepath.Join(dir, ".agentctl"))
	if err != nil {
		t.Fatal(err)
	}
	return &Engine{Config: cfg, State: sd, Version: "test", Registry: builtin.Registry(), Environ: []string{"OPENAI_API_KEY=sk-test-not-a-real-key"}}
}
