package config

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/internal/skills"
)

// DefaultSkillsPath is where skills go in the workspace, as the Agents
// SDK's Skills capability puts them.
const DefaultSkillsPath = ".agents"

// SkillsCapability is capability "skills": Agent Skills from a directory
// of the configuration or a git repository, materialized into the
// workspace (eager) or indexed with a load_skill tool (lazy).
type SkillsCapability struct {
	// Source is the absolute directory of the skills (source = "...").
	Source string `json:"-"`
	// GitRepo is the repository holding the skills (a git_repo block).
	GitRepo *SkillsGitRepo `json:",omitempty"`
	Lazy    bool
	// Path is the workspace-relative directory the skills go into.
	Path string
	// Skills are the skills of a Source directory, read and checked at
	// load (a git repository's are read by plan). Their contents enter
	// the run digest as an input of their own, not through the agent's.
	Skills []skills.Skill `json:"-"`
}

// SkillsGitRepo is a skills capability's git_repo block.
type SkillsGitRepo struct {
	Repo    string
	Ref     string `json:",omitempty"`
	Subpath string `json:",omitempty"`
}

var skillsSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "source"}, {Name: "lazy"}, {Name: "path"}},
	Blocks:     []hcl.BlockHeaderSchema{{Type: "git_repo"}},
}

var skillsGitSchema = &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "repo", Required: true}, {Name: "ref"}, {Name: "subpath"}}}

func (l *loader) decodeSkills(c *Capability, b *hcl.Block) {
	content, diags := b.Body.Content(skillsSchema)
	l.diags = append(l.diags, diags...)
	if diags.HasErrors() {
		return
	}
	sc := scope{where: "a capability"}
	sk := &SkillsCapability{Path: DefaultSkillsPath}
	c.Skills = sk
	str := func(attrs hcl.Attributes, name string) (string, hcl.Range, bool) {
		v, r, ok := l.settingAttr(attrs, name, sc, nil, "A capability setting")
		if !ok {
			return "", r, false
		}
		s, ok := l.toString(v, r, name)
		return s, r, ok
	}
	if v, r, ok := l.settingAttr(content.Attributes, "lazy", sc, nil, "A capability setting"); ok {
		sk.Lazy, _ = l.toBool(v, r, "lazy")
	}
	if p, r, ok := str(content.Attributes, "path"); ok {
		cp, err := checkWorkspacePath(p)
		if err != nil || cp == "." {
			l.errorf(r, "Invalid skills path", "path is the workspace-relative directory the skills go into, like \".agents\"; %q is not one.", p)
		} else {
			sk.Path = cp
		}
	}
	src, srcRange, hasSource := str(content.Attributes, "source")
	if len(content.Blocks) > 1 {
		l.errorf(content.Blocks[1].DefRange, "Duplicate git_repo block", "A skills capability has one source: a single git_repo block or source = \"DIR\".")
		return
	}
	if len(content.Blocks) == 1 {
		gb := content.Blocks[0]
		if _, ok := content.Attributes["source"]; ok {
			l.errorf(gb.DefRange, "Two skill sources", "capability %q %q sets both source and a git_repo block; keep one.", c.Type, c.Name)
			return
		}
		gc, diags := gb.Body.Content(skillsGitSchema)
		l.diags = append(l.diags, diags...)
		if diags.HasErrors() {
			return
		}
		g := &SkillsGitRepo{}
		var r hcl.Range
		if g.Repo, r, _ = str(gc.Attributes, "repo"); g.Repo == "" {
			l.errorf(r, "Invalid git repository", "repo must be \"owner/name\" (a GitHub repository), a URL git accepts, or an absolute path to a local repository.")
			return
		}
		g.Ref, _, _ = str(gc.Attributes, "ref")
		if sp, r, ok := str(gc.Attributes, "subpath"); ok && sp != "" {
			cp, err := checkWorkspacePath(sp)
			if err != nil {
				l.errorf(r, "Invalid subpath", "%s. subpath is a directory inside the repository.", capitalize(err.Error()))
				return
			}
			g.Subpath = cp
		}
		sk.GitRepo = g
		return
	}
	if !hasSource {
		if _, ok := content.Attributes["source"]; !ok {
			l.errorf(b.DefRange, "Missing skill source", "capability %q %q needs source = \"DIR\" (a directory of skills beside the configuration) or a git_repo { repo = \"...\" } block.", c.Type, c.Name)
		}
		return
	}
	dir := src
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(l.cfg.Dir, dir)
	}
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		l.errorf(srcRange, "Skills directory not found", "source %q is not a directory (resolved against the configuration directory: %s). Point it at a folder holding one folder per skill, each with a SKILL.md.", src, dir)
		return
	}
	sk.Source = dir
	list, err := skills.Load(dir)
	if err != nil {
		l.errorf(srcRange, "Invalid skills", "%s (in %s).", capitalize(err.Error()), dir)
		return
	}
	sk.Skills = list
}

// String describes where the skills come from, for messages.
func (s *SkillsCapability) String() string {
	if s.GitRepo != nil {
		return fmt.Sprintf("skills from git repository %s", s.GitRepo.Repo)
	}
	return fmt.Sprintf("%d skills from %s", len(s.Skills), s.Source)
}
