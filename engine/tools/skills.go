package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/agentctl/agentctl/internal/skills"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
)

// LoadSkillToolName is the lazy skills capability's tool.
const LoadSkillToolName = "load_skill"

// SkillsInstructions is the skills capability's instruction fragment: the
// index of skills (name, description, workspace path) and how to use
// them. lazy says the skills are loaded on demand with load_skill.
func SkillsInstructions(list []skills.Skill, dir string, lazy bool) string {
	var b strings.Builder
	b.WriteString("## Skills\n")
	b.WriteString("A skill is a packaged procedure: a folder whose `SKILL.md` holds the instructions to follow, with any `scripts/`, `references/` and `assets/` it needs beside it.\n\n")
	b.WriteString("### Available skills\n")
	for _, s := range list {
		fmt.Fprintf(&b, "- %s: %s (file: %s)\n", s.Name, oneLine(s.Description), path.Join(dir, s.Name, "SKILL.md"))
	}
	b.WriteString("\n### How to use skills\n")
	if lazy {
		b.WriteString("- The skills above are not in the workspace yet: call `load_skill` with the skill's name to copy it in, then read its `SKILL.md`.\n")
	} else {
		b.WriteString("- The skills above are in the workspace at the listed paths.\n")
	}
	b.WriteString("- Use a skill when the task names it or clearly matches its description; read its `SKILL.md` before acting and follow it.\n")
	b.WriteString("- Resolve paths a `SKILL.md` mentions (scripts/, references/, assets/) against the skill's folder, and open only the files the task needs.\n")
	b.WriteString("- Prefer running a skill's scripts over retyping them. Write task outputs outside the skill's folder.\n")
	b.WriteString("- If a skill is missing or cannot be applied, say so briefly and continue with the best alternative.")
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// MaterializeSkill writes a skill's files into the workspace under
// dir/NAME.
func MaterializeSkill(ctx context.Context, ws *sandbox.Workspace, dir string, s skills.Skill) error {
	paths := make([]string, 0, len(s.Files))
	for p := range s.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		mode := fs.FileMode(0o644)
		if s.Modes[p]&0o111 != 0 {
			mode = 0o755
		}
		if err := ws.Sandbox.WriteFile(ctx, path.Join(dir, s.Name, p), s.Files[p], mode); err != nil {
			return fmt.Errorf("writing skill %s (%s): %w", s.Name, p, ws.Unavailable(ctx, err))
		}
	}
	return nil
}

// LoadSkill is the load_skill tool of a lazy skills capability: it copies
// one skill into the workspace and returns where it is and its SKILL.md.
type LoadSkill struct {
	ws     *sandbox.Workspace
	dir    string
	skills []skills.Skill
}

// NewLoadSkill returns the load_skill tool for list, copied under dir.
func NewLoadSkill(ws *sandbox.Workspace, dir string, list []skills.Skill) *LoadSkill {
	return &LoadSkill{ws: ws, dir: dir, skills: list}
}

func (t *LoadSkill) Definition() model.Tool {
	return model.Tool{
		Name:        LoadSkillToolName,
		Description: "Load a skill into the workspace by name, so its SKILL.md, scripts, references and assets can be read and run there. Returns the skill's path and its SKILL.md.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"skill_name":{"type":"string","description":"The skill's name, as the skills index lists it."}},"required":["skill_name"],"additionalProperties":false}`),
	}
}

func (t *LoadSkill) Call(ctx context.Context, arguments string) (Output, error) {
	var args struct {
		SkillName string `json:"skill_name"`
	}
	if err := decodeArgs(LoadSkillToolName, arguments, &args); err != nil {
		return Output{}, err
	}
	if args.SkillName == "" {
		return Output{}, fmt.Errorf("load_skill needs {\"skill_name\": \"NAME\"}")
	}
	var names []string
	for _, s := range t.skills {
		names = append(names, s.Name)
		if s.Name != args.SkillName {
			continue
		}
		if err := MaterializeSkill(ctx, t.ws, t.dir, s); err != nil {
			return Output{}, err
		}
		out, _ := json.Marshal(map[string]string{
			"status":     "loaded",
			"skill_name": s.Name,
			"path":       path.Join(t.dir, s.Name),
			"skill_md":   t.ws.Scrub.String(string(s.Files["SKILL.md"])),
		})
		return Output{Text: string(out)}, nil
	}
	return Output{}, fmt.Errorf("no skill named %q; the skills are: %s", args.SkillName, strings.Join(names, ", "))
}
