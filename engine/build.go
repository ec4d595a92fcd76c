package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/engine/agentmemory"
	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/manifest"
)

// sandboxManifest converts a sandbox instance's manifest to the sandbox
// layer's form.
func sandboxManifest(cfg *config.Config, sb *config.SandboxInstance) manifest.Manifest {
	m := manifest.Manifest{Root: manifestRoot(cfg, sb)}
	cm := cfg.Manifests[sb.Manifest]
	if cm == nil {
		return m
	}
	m.Env = cm.Env
	m.EphemeralEnv = cm.EphemeralEnv
	for _, e := range cm.Entries {
		m.Entries = append(m.Entries, manifest.Entry{
			Kind:    manifest.EntryKind(e.Kind),
			Path:    e.Path,
			Content: []byte(e.Content),
			Mode:    e.Mode,
			Source:  e.Source,
			Exclude: e.Exclude,
			Repo:    e.Repo,
			Ref:     e.Ref,
			Subpath: e.Subpath,
		})
	}
	return m
}

// sandboxSpec is what the provider needs to create the instance.
func (e *Engine) sandboxSpec(sb *config.SandboxInstance, lineage string) sandbox.Spec {
	return sandbox.Spec{
		Address: sb.Addr,
		Lineage: lineage,
		Root:    manifestRoot(e.Config, sb),
		Image:   sb.Image,
		Network: sb.Network,
		Ports:   sb.Ports,
		Resources: sandbox.Resources{
			CPUs: sb.Resources.CPUs, MemoryMB: sb.Resources.MemoryMB, DiskGB: sb.Resources.DiskGB,
			PIDs: sb.Resources.PIDs, GPUs: sb.Resources.GPUs,
		},
		Settings: sb.Settings,
		StateDir: e.State.Abs("sandboxes"),
		Accounts: sandboxAccounts(e.Config, sb),
	}
}

// sandboxAccounts are the users and groups of the instance's manifest.
func sandboxAccounts(cfg *config.Config, sb *config.SandboxInstance) sandbox.Accounts {
	if m := cfg.Manifests[sb.Manifest]; m != nil {
		return m.Accounts
	}
	return sandbox.Accounts{}
}

// buildAgents resolves the run's agent closure into runtime agents, each
// with its tools bound to its own workspace.
//
// sessions are the run's interactive sessions, which its shell tools
// start and write_stdin drives; nil runs every command to completion.
func (e *Engine) buildAgents(ctx context.Context, ri *config.RunInstance, workspaces map[string]*sandbox.Workspace, sessions *tools.Sessions) (map[string]*agentloop.Agent, error) {
	agents := map[string]*agentloop.Agent{}
	for _, name := range e.Config.AgentClosure(ri.Agent) {
		a := e.Config.Agents[name]
		if a == nil {
			return nil, fmt.Errorf("agent %q is not declared", name)
		}
		m, modelName, err := e.provs().model(e, a, ri.Name)
		if err != nil {
			return nil, err
		}
		ra := &agentloop.Agent{
			Name:          a.Name,
			Model:         m,
			ModelName:     modelName,
			Provider:      e.modelProviderType(a),
			Settings:      modelSettings(a.Settings),
			ModelFallback: a.ModelFallback,
			HostedTools:   hostedTools(a.HostedTools),
			OutputSchema:  a.OutputSchema,
			MaxTurns:      a.MaxTurns,
			Budget:        loopBudget(a.Budget),
			Guardrails:    loopGuardrails(e.Config, a.Guardrails),
		}
		sb := ri.AgentSandbox(a)
		ws := workspaces[sb]
		var capInstr []string
		for _, addr := range a.Capabilities {
			c := e.Config.Capabilities[capKey(addr)]
			if c == nil {
				return nil, fmt.Errorf("agent %q: capability %s is not declared", name, addr)
			}
			if c.Compaction != nil {
				ra.Compaction = &model.Compaction{Threshold: c.Compaction.Threshold}
				continue
			}
			if ws == nil {
				return nil, fmt.Errorf("agent %q uses %s but has no sandbox: set sandbox = sandbox.NAME on the agent or its run", name, addr)
			}
			if c.Memory != nil {
				if c.Memory.Read != nil {
					instr, err := agentmemory.Instructions(ctx, ws, c.Memory.Read)
					if err != nil {
						return nil, fmt.Errorf("agent %q: %s: reading the memory summary: %w", name, addr, err)
					}
					if instr != "" {
						capInstr = append(capInstr, instr)
					}
				}
				continue
			}
			if c.Skills != nil {
				ts, instr, err := e.skillsTools(ctx, ws, c)
				if err != nil {
					return nil, fmt.Errorf("agent %q: %s: %w", name, addr, err)
				}
				ra.Tools = append(ra.Tools, ts...)
				capInstr = append(capInstr, instr)
				continue
			}
			ts, instr, err := capabilityTools(ws, c, manifestRoot(e.Config, e.Config.SandboxInstances[sb]), sessions)
			if err != nil {
				return nil, fmt.Errorf("agent %q: %s: %w", name, addr, err)
			}
			ra.Tools = append(ra.Tools, ts...)
			addApprovals(ra, c, ts)
			if instr != "" {
				capInstr = append(capInstr, instr)
			}
		}
		for _, h := range a.Handoffs {
			desc := ""
			if ha := e.Config.Agents[h]; ha != nil {
				desc = firstLine(ha.Instructions)
			}
			ra.Handoffs = append(ra.Handoffs, agentloop.Handoff{Agent: h, Description: desc, InputFilter: inputFilter(a, h)})
		}
		for _, t := range a.Tools {
			ra.AgentTools = append(ra.AgentTools, agentloop.AgentTool{Name: t.Name, Agent: t.Agent, Description: t.Description})
			setApproval(ra, tools.FunctionName(t.Name), t.NeedsApproval)
		}
		if ws == nil {
			ra.Instructions = a.Instructions
		} else {
			root := manifestRoot(e.Config, e.Config.SandboxInstances[sb])
			tree, err := tools.RenderTree(ctx, ws, root, 200)
			if err != nil {
				return nil, fmt.Errorf("agent %q: rendering the workspace for its instructions: %w", name, err)
			}
			ra.Instructions = tools.BuildInstructions(a.Instructions, capInstr, tree)
		}
		agents[name] = ra
	}
	if err := e.addJudges(ri, agents); err != nil {
		return nil, err
	}
	return agents, nil
}

// addApprovals gives ra the approval policy of capability c for the
// tools ts it gave: exec_command (shell), apply_patch (filesystem; viewing
// an image never asks) and a command tool.
func addApprovals(ra *agentloop.Agent, c *config.Capability, ts []tools.Tool) {
	for _, t := range ts {
		name := t.Definition().Name
		switch {
		case c.Shell != nil && name == "write_stdin":
			// Input goes to a session whose command was approved when it
			// started; only a policy of true guards every write.
			if v, constant := c.Shell.NeedsApproval.Constant(); constant && v {
				setApproval(ra, name, c.Shell.NeedsApproval)
			}
		case c.Shell != nil:
			setApproval(ra, name, c.Shell.NeedsApproval)
		case c.Filesystem != nil && name == "apply_patch":
			setApproval(ra, name, c.Filesystem.NeedsApproval)
		case c.Command != nil:
			setApproval(ra, name, c.Command.NeedsApproval)
		}
	}
}

// setApproval sets the policy of the tool the model calls as name, unless
// it never asks.
func setApproval(ra *agentloop.Agent, name string, p config.ApprovalPolicy) {
	if v, constant := p.Constant(); constant && !v {
		return
	}
	if ra.Approvals == nil {
		ra.Approvals = map[string]agentloop.ApprovalPolicy{}
	}
	ra.Approvals[name] = func(c agentloop.PolicyCall) (bool, error) {
		return p.NeedsApproval(config.Call{Tool: c.Tool, Arguments: c.Arguments, Argv: c.Invocation.Argv, Simple: c.Invocation.Simple, Words: c.Invocation.Words})
	}
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func modelSettings(s config.AgentSettings) model.Settings {
	return model.Settings{
		ReasoningEffort:      s.ReasoningEffort,
		ReasoningSummary:     s.ReasoningSummary,
		Verbosity:            s.Verbosity,
		Temperature:          s.Temperature,
		TopP:                 s.TopP,
		MaxOutputTokens:      s.MaxOutputTokens,
		ParallelToolCalls:    s.ParallelToolCalls,
		ToolChoice:           s.ToolChoice,
		FrequencyPenalty:     s.FrequencyPenalty,
		PresencePenalty:      s.PresencePenalty,
		Truncation:           s.Truncation,
		Store:                s.Store,
		Metadata:             s.Metadata,
		PromptCacheRetention: s.PromptCacheRetention,
		PromptCacheMode:      s.PromptCacheMode,
		PromptCacheTTL:       s.PromptCacheTTL,
		Include:              s.Include,
	}
}

// hostedTools are an agent's hosted tools as its model is given them.
func hostedTools(ts []config.HostedTool) []model.HostedTool {
	var out []model.HostedTool
	for _, t := range ts {
		out = append(out, model.HostedTool{Type: t.Type, Config: t.Config})
	}
	return out
}

// inputFilter is the input filter of a's handoff to target, nil for none.
func inputFilter(a *config.Agent, target string) *agentloop.InputFilter {
	f, ok := a.HandoffFilters[target]
	if !ok {
		return nil
	}
	return &agentloop.InputFilter{RemoveToolCalls: f.RemoveToolCalls, KeepLast: f.KeepLast}
}

// capabilityTools returns the tools and instructions one capability gives
// an agent.
func capabilityTools(ws *sandbox.Workspace, c *config.Capability, root string, sessions *tools.Sessions) ([]tools.Tool, string, error) {
	switch {
	case c.Shell != nil:
		opts := tools.ExecOptions{Timeout: c.Shell.Timeout, MaxOutputTokens: c.Shell.MaxOutputTokens, Root: root, User: c.Shell.RunAs}
		if sessions == nil || !tools.Interactive(ws) {
			return []tools.Tool{tools.NewExecCommand(ws, opts, nil)}, tools.ShellInstructions, nil
		}
		return []tools.Tool{tools.NewExecCommand(ws, opts, sessions), tools.NewWriteStdin(sessions, opts)}, tools.ShellInstructionsInteractive, nil
	case c.Filesystem != nil:
		fo := tools.FilesystemOptions{Root: root, MaxImageBytes: c.Filesystem.MaxImageBytes}
		return []tools.Tool{tools.NewApplyPatch(ws, fo), tools.NewViewImage(ws, fo)}, tools.FilesystemInstructions, nil
	case c.Command != nil:
		t, err := tools.NewCommandTool(ws, c.Name, c.Command.Description, c.Command.Parameters, c.Command.Command, c.Command.Timeout)
		if err != nil {
			return nil, "", err
		}
		return []tools.Tool{t.RunAs(c.Command.RunAs)}, "", nil
	}
	return nil, "", fmt.Errorf("capability type %q has no tools", c.Type)
}
