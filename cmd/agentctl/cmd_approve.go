package main

import (
	"context"
	"fmt"
	"os/user"
	"slices"
	"strings"
	"time"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/state"
)

func approveCommand() *command {
	return &command{
		Name:       "approve",
		ShortUsage: "agentctl approve [options] run.NAME [CALL_ID...] [-all] [-tool NAME [-revoke]] [-reason TEXT]",
		ShortHelp:  "Approve tool calls a run awaits; the next apply runs them.",
		LongHelp: "  Records the decision in the state (who, when, why). agentctl show\n" +
			"  run.NAME lists the pending calls and their ids. -tool NAME approves\n" +
			"  every pending and later call of the tool in the run without asking\n" +
			"  (the prompt's always); -tool NAME -revoke withdraws that.",
		Run: leaf(arguments.ParseApprove, (*meta).decide),
	}
}

func rejectCommand() *command {
	return &command{
		Name:       "reject",
		ShortUsage: "agentctl reject [options] run.NAME [CALL_ID...] [-tool NAME [-revoke]] [-reason TEXT]",
		ShortHelp:  "Reject tool calls a run awaits; the model is told why.",
		LongHelp: "  Records the decision in the state (who, when, why). On the next\n" +
			"  apply the model sees \"rejected by the reviewer: REASON\" as the\n" +
			"  call's output and the run goes on. -tool NAME rejects every pending\n" +
			"  and later call of the tool in the run without asking (the prompt's\n" +
			"  never); -tool NAME -revoke withdraws that.",
		Run: leaf(arguments.ParseReject, (*meta).decide),
	}
}

// decide records approve's or reject's decisions under the state lock.
func (m *meta) decide(ctx context.Context, args *arguments.Approve) error {
	m.noColor = args.NoColor
	view := views.NewApprove(args.ViewType, m.view())
	op, decision := "approve", state.ApprovalApproved
	if args.Reject {
		op, decision = "reject", state.ApprovalRejected
	}
	b, err := m.openStateBackend(args.Config, args.Vars, args.State)
	if err != nil {
		return err
	}
	if err := b.takeLock(ctx, args.State, op); err != nil {
		return err
	}
	defer b.unlock(ctx)
	st, err := b.store.Read(ctx)
	if err != nil {
		return err
	}
	r := st.Runs[args.Run]
	if r == nil {
		return fmt.Errorf("%s is not in the state; agentctl state list shows the runs it holds", args.Run)
	}
	if args.Revoke {
		return m.revokeTools(ctx, b, st, r, args, decision, view)
	}
	var decided []*state.Approval
	if len(args.CallIDs) > 0 || args.All {
		if decided, err = r.Decide(args.CallIDs, args.All, decision, m.reviewer(), args.Reason, time.Now()); err != nil {
			return err
		}
	}
	// The tools seen asking before this decision, to tell a typo.
	asked := askedTools(r)
	for _, tool := range args.Tools {
		calls, err := r.DecideTool(tool, decision, m.reviewer(), args.Reason, time.Now())
		if err != nil {
			return err
		}
		decided = append(decided, calls...)
	}
	if err := b.store.Write(ctx, st); err != nil {
		return err
	}
	for _, tool := range args.Tools {
		view.ToolDecided(args.Run, tool, r.ToolDecisions[tool], asked)
	}
	if len(decided) > 0 || r.Status == state.RunAwaitingApproval {
		view.Decided(args.Run, decided, len(r.Pending()))
	}
	return nil
}

// revokeTools withdraws the standing decisions on args.Tools.
func (m *meta) revokeTools(ctx context.Context, b *backend, st *state.State, r *state.Run, args *arguments.Approve, decision string, view views.Approve) error {
	revoked := make([]state.ToolDecision, len(args.Tools))
	for i, tool := range args.Tools {
		d, err := r.RevokeTool(tool, decision)
		if err != nil {
			return err
		}
		revoked[i] = d
	}
	if err := b.store.Write(ctx, st); err != nil {
		return err
	}
	for i, tool := range args.Tools {
		view.ToolRevoked(args.Run, tool, revoked[i])
	}
	return nil
}

// askedTools are the tools of r's calls that needed approval, sorted.
func askedTools(r *state.Run) []string {
	var tools []string
	for _, a := range r.Approvals {
		if !slices.Contains(tools, a.Tool) {
			tools = append(tools, a.Tool)
		}
	}
	for tool := range r.ToolDecisions {
		if !slices.Contains(tools, tool) {
			tools = append(tools, tool)
		}
	}
	slices.Sort(tools)
	return tools
}

// reviewer names who decides: $USER, else the OS account.
func (m *meta) reviewer() string {
	for _, kv := range m.Environ {
		if v, ok := strings.CutPrefix(kv, "USER="); ok && v != "" {
			return v
		}
	}
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return "unknown"
}
