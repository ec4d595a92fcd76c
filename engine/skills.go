package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/internal/skills"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/manifest"
)

// skillSets caches the skills of git-sourced skills capabilities: plan
// clones each repository once, apply reuses what plan read.
type skillSets struct {
	mu   sync.Mutex
	sets map[string][]skills.Skill
}

// skillsOf returns the skills of capability c: read at load for a
// directory, cloned and read (once per engine) for a git repository.
func (e *Engine) skillsOf(ctx context.Context, c *config.Capability) ([]skills.Skill, error) {
	sk := c.Skills
	if sk.GitRepo == nil {
		return sk.Skills, nil
	}
	e.skills.mu.Lock()
	defer e.skills.mu.Unlock()
	if list, ok := e.skills.sets[c.Addr]; ok {
		return list, nil
	}
	co, err := manifest.CloneGitRepo(ctx, manifest.Entry{
		Kind: manifest.EntryGitRepo, Repo: sk.GitRepo.Repo, Ref: sk.GitRepo.Ref, Subpath: sk.GitRepo.Subpath,
		Label: c.Addr + " git_repo",
	})
	if err != nil {
		return nil, err
	}
	defer co.Close()
	list, err := skills.Load(filepath.Join(co.Path, filepath.FromSlash(co.Sub)))
	if err != nil {
		return nil, fmt.Errorf("%s: %s at %s: %w", c.Addr, co.URL, co.Commit[:min(12, len(co.Commit))], err)
	}
	if e.skills.sets == nil {
		e.skills.sets = map[string][]skills.Skill{}
	}
	e.skills.sets[c.Addr] = list
	return list, nil
}

// runSkills lists the skills capabilities of a run's agents.
func runSkills(cfg *config.Config, ri *config.RunInstance) []*config.Capability {
	if !hasCapability(cfg, func(c *config.Capability) bool { return c.Skills != nil }) {
		return nil // plan's hot path: no agent closure to walk
	}
	seen := map[string]bool{}
	var out []*config.Capability
	for _, name := range cfg.AgentClosure(ri.Agent) {
		a := cfg.Agents[name]
		if a == nil {
			continue
		}
		for _, addr := range a.Capabilities {
			if c := cfg.Capabilities[capKey(addr)]; c != nil && c.Skills != nil && !seen[addr] {
				seen[addr] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// resolveSkills reads the skills of every skills capability the runs (or
// one run, when ri is set) use, so their digests are known.
func (e *Engine) resolveSkills(ctx context.Context, ri *config.RunInstance) error {
	var caps []*config.Capability
	if ri != nil {
		caps = runSkills(e.Config, ri)
	} else {
		seen := map[string]bool{}
		for _, r := range e.Config.RunInstances {
			for _, c := range runSkills(e.Config, r) {
				if !seen[c.Addr] {
					seen[c.Addr] = true
					caps = append(caps, c)
				}
			}
		}
	}
	for _, c := range caps {
		if _, err := e.skillsOf(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// skillsInputs adds to a run's digest inputs the contents of its skills:
// an input per skills capability, with each skill's digest as an
// attribute so plan names the skill that changed.
func (e *Engine) skillsInputs(ri *config.RunInstance, inputs map[string]string, attrs *attributes) {
	for _, c := range runSkills(e.Config, ri) {
		list := c.Skills.Skills
		if c.Skills.GitRepo != nil {
			e.skills.mu.Lock()
			list = e.skills.sets[c.Addr]
			e.skills.mu.Unlock()
		}
		digests := map[string]string{}
		for _, s := range list {
			digests[s.Name] = s.Digest()
			attrs.set(c.Addr+".skills."+s.Name, s.Digest()[:12])
		}
		inputs[c.Addr+".skills"] = digestJSON(digests)
	}
}

// skillsTools gives an agent a skills capability: eager skills are
// written into the workspace now; lazy ones get the load_skill tool.
// Both are indexed in the instructions.
func (e *Engine) skillsTools(ctx context.Context, ws *sandbox.Workspace, c *config.Capability) ([]tools.Tool, string, error) {
	list, err := e.skillsOf(ctx, c)
	if err != nil {
		return nil, "", err
	}
	instr := tools.SkillsInstructions(list, c.Skills.Path, c.Skills.Lazy)
	if c.Skills.Lazy {
		return []tools.Tool{tools.NewLoadSkill(ws, c.Skills.Path, list)}, instr, nil
	}
	for _, s := range list {
		if err := tools.MaterializeSkill(ctx, ws, c.Skills.Path, s); err != nil {
			return nil, "", err
		}
	}
	return nil, instr, nil
}

// hasCapability reports whether is holds for any capability of cfg.
func hasCapability(cfg *config.Config, is func(*config.Capability) bool) bool {
	for _, c := range cfg.Capabilities {
		if is(c) {
			return true
		}
	}
	return false
}
