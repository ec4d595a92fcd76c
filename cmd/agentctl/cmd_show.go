package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/engine/chat"
)

func showCommand() *command {
	return &command{
		Name:       "show",
		ShortUsage: "agentctl show [options] [ADDR | PLANFILE]",
		ShortHelp:  "Show the state, one run's transcript, one sandbox, or a saved plan.",
		Run:        leaf(arguments.ParseShow, (*meta).show),
	}
}

func (m *meta) show(ctx context.Context, args *arguments.Show) error {
	m.noColor = args.NoColor
	view := views.NewShow(args.ViewType, m.view())
	if args.Target != "" {
		pf, err := m.readSavedPlan(args.Target, args.Vars)
		if err != nil {
			return err
		}
		if pf != nil {
			return view.SavedPlan(pf)
		}
	}
	b, st, err := readState(ctx, m.openStateBackend, args.Backend)
	if err != nil {
		return err
	}
	if args.Target == "" {
		return view.State(st)
	}
	addr := args.Target
	switch {
	case st.Runs[addr] != nil:
		e := b.engine(0, nil, nil)
		steps, err := e.Transcript(ctx, st.Runs[addr])
		var lost *engine.JournalLostError
		if errors.As(err, &lost) {
			return err // it names the run and what was lost
		}
		if err != nil {
			return fmt.Errorf("%s: reading its transcript: %w", addr, err)
		}
		return view.Run(st.Runs[addr], steps)
	case st.Chats[addr] != nil:
		e := b.engine(0, nil, nil)
		history, err := chat.History(ctx, e, st.Chats[addr])
		if err != nil {
			return err
		}
		return view.Chat(st.Chats[addr], history)
	case st.Sandboxes[addr] != nil:
		return view.Sandbox(st.Sandboxes[addr])
	}
	return fmt.Errorf("%s is not in the state; agentctl state list shows the addresses it holds", addr)
}
