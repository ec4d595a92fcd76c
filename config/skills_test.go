package config

import (
	"strings"
	"testing"
)

func TestSkillsCapability(t *testing.T) {
	skill := "---\nname: s\ndescription: does s\n---\n"
	cfg := mustLoad(t, map[string]string{
		"main.hcl": `
capability "skills" "team" {
  source = "./skills"
}
capability "skills" "remote" {
  git_repo {
    repo    = "acme/skills"
    ref     = "v1"
    subpath = "pack"
  }
  lazy = true
  path = "tools/skills"
}
`,
		"skills/s/SKILL.md": skill,
	}, Options{})
	team := cfg.Capabilities["skills.team"].Skills
	if team == nil || len(team.Skills) != 1 || team.Skills[0].Name != "s" || team.Path != ".agents" || team.Lazy {
		t.Fatalf("team = %+v", team)
	}
	remote := cfg.Capabilities["skills.remote"].Skills
	if remote.GitRepo == nil || remote.GitRepo.Repo != "acme/skills" || remote.GitRepo.Subpath != "pack" || !remote.Lazy || remote.Path != "tools/skills" {
		t.Fatalf("remote = %+v", remote)
	}

	cases := []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"no source", map[string]string{"main.hcl": `capability "skills" "x" {}`}, "needs source"},
		{"missing dir", map[string]string{"main.hcl": `capability "skills" "x" { source = "./nope" }`}, `source "./nope" is not a directory`},
		{"both", map[string]string{"main.hcl": "capability \"skills\" \"x\" {\n  source = \"./skills\"\n  git_repo { repo = \"a/b\" }\n}", "skills/s/SKILL.md": skill}, "sets both source and a git_repo block"},
		{"no front matter", map[string]string{"main.hcl": `capability "skills" "x" { source = "./skills" }`, "skills/s/SKILL.md": "# S\n"}, `Skill folder "s": SKILL.md: no front matter`},
		{"duplicate", map[string]string{"main.hcl": `capability "skills" "x" { source = "./skills" }`, "skills/s/SKILL.md": skill, "skills/t/SKILL.md": skill}, `names the skill "s", as the one in folder "s" does`},
		{"bad path", map[string]string{"main.hcl": "capability \"skills\" \"x\" {\n  source = \"./skills\"\n  path = \"../out\"\n}", "skills/s/SKILL.md": skill}, "Invalid skills path"},
		{"no sandbox", map[string]string{"main.hcl": `
provider "scripted" {
  script "a" {
    reply { text = "x" }
  }
}
capability "skills" "x" { source = "./skills" }
agent "a" {
  provider     = provider.scripted
  capabilities = [capability.skills.x]
}`, "skills/s/SKILL.md": skill}, "runs in a sandbox"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := load(t, tc.files, Options{})
			if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) {
				t.Fatalf("diagnostics %q, want one containing %q", diags.Error(), tc.want)
			}
			for _, d := range diags {
				if d.Subject == nil {
					t.Errorf("diagnostic without a location: %s", d.Error())
				}
			}
		})
	}
}
