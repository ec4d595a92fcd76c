package main

import (
	"context"
	"fmt"
	"os/user"
	"strings"
	"time"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/state"
)

func approveCommand() *command {
	return &command{
		Name:       "approve",
		ShortUsage: "agentctl approve [options] run.NAME [CALL_ID...] [-all] [-reason TEXT]",
		ShortHelp:  "Approve tool calls a run awaits; the next apply runs them.",
		LongHelp: "  Records the decision in the state (who, when, why). agentctl show\n" +
			"  run.NAME lists the pending calls and their ids.",
		Run: leaf(arguments.ParseApprove, (*meta).decide),
	}
}

func rejectCommand() *command {
	return &command{
		Name:       "reject",
		ShortUsage: "agentctl reject [options] run.NAME CALL_ID... [-reason TEXT]",
		ShortHelp:  "Reject tool calls a run awaits; the model is told why.",
		LongHelp: "  Records the decision in the state (who, when, why). On the next\n" +
			"  apply the model sees \"rejected by the reviewer: REASON\" as the\n" +
			"  call's output and the run goes on.",
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
	defer b.unlock()
	st, err := b.store.Read()
	if err != nil {
		return err
	}
	r := st.Runs[args.Run]
	if r == nil {
		return fmt.Errorf("%s is not in the state; agentctl state list shows the runs it holds", args.Run)
	}
	decided, err := r.Decide(args.CallIDs, args.All, decision, m.reviewer(), args.Reason, time.Now())
	if err != nil {
		return err
	}
	if err := b.store.Write(st); err != nil {
		return err
	}
	view.Decided(args.Run, decided, len(r.Pending()))
	return nil
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
