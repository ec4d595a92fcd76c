package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/state"
)

func stateCommand() *command {
	return &command{
		Name:        "state",
		ShortUsage:  "agentctl state <list|show|rm> [options] [ADDR...]",
		ShortHelp:   "Inspect or edit the state.",
		Subcommands: []*command{stateListCommand(), stateShowCommand(), stateRmCommand()},
		Run: func(context.Context, *meta, []string) error {
			return fmt.Errorf("state needs a subcommand: list, show or rm")
		},
	}
}

func stateListCommand() *command {
	return &command{
		Name:       "list",
		ShortUsage: "agentctl state list [options]",
		ShortHelp:  "List the addresses in the state.",
		Run:        leaf(arguments.ParseStateList, (*meta).stateList),
	}
}

func (m *meta) stateList(ctx context.Context, args *arguments.StateList) error {
	m.noColor = args.NoColor
	view := views.NewStateList(args.ViewType, m.view())
	_, st, err := readState(ctx, m.openStateBackend, args.Backend)
	if err != nil {
		return err
	}
	return view.List(append(append(st.SandboxAddresses(), st.RunAddresses()...), st.ChatAddresses()...))
}

func stateShowCommand() *command {
	return &command{
		Name:       "show",
		ShortUsage: "agentctl state show [options] ADDR",
		ShortHelp:  "Show one sandbox or run as stored in the state.",
		Run:        leaf(arguments.ParseStateShow, (*meta).stateShow),
	}
}

func (m *meta) stateShow(ctx context.Context, args *arguments.StateShow) error {
	m.noColor = args.NoColor
	view := views.NewStateShow(m.view())
	_, st, err := readState(ctx, m.openStateBackend, args.Backend)
	if err != nil {
		return err
	}
	addr := args.Address
	if s := st.Sandboxes[addr]; s != nil {
		return view.Object(s)
	}
	if r := st.Runs[addr]; r != nil {
		return view.Object(r)
	}
	if c := st.Chats[addr]; c != nil {
		return view.Object(c)
	}
	return fmt.Errorf("%s is not in the state; agentctl state list shows the addresses it holds", addr)
}

func stateRmCommand() *command {
	return &command{
		Name:       "rm",
		ShortUsage: "agentctl state rm [options] ADDR...",
		ShortHelp:  "Forget sandboxes or runs without destroying them.",
		LongHelp: "  Removes the addresses from the state only: a forgotten sandbox keeps\n" +
			"  running at its provider and is no longer managed; a forgotten run's\n" +
			"  journal (its checkpoints and transcript) is deleted with its record,\n" +
			"  and the next apply executes it again.",
		Run: leaf(arguments.ParseStateRm, (*meta).stateRm),
	}
}

func (m *meta) stateRm(ctx context.Context, args *arguments.StateRm) error {
	m.noColor = args.NoColor
	view := views.NewStateRm(m.view())
	b, err := m.openStateBackend(args.Config, args.Vars, args.State)
	if err != nil {
		return err
	}
	if err := b.takeLock(ctx, args.State, "state rm"); err != nil {
		return err
	}
	defer b.unlock(ctx)
	st, err := b.store.Read(ctx)
	if err != nil {
		return err
	}
	for _, addr := range args.Addresses {
		if st.Sandboxes[addr] == nil && st.Runs[addr] == nil && st.Chats[addr] == nil {
			return fmt.Errorf("%s is not in the state; nothing was removed", addr)
		}
	}
	var journals []string
	for _, addr := range args.Addresses {
		if r := st.Runs[addr]; r != nil {
			journals = append(journals, r.JournalFile())
		}
		if c := st.Chats[addr]; c != nil {
			for _, j := range []string{c.Journal, c.Current} {
				if j != "" {
					journals = append(journals, j)
				}
			}
		}
		delete(st.Sandboxes, addr)
		delete(st.Runs, addr)
		delete(st.Chats, addr)
	}
	if err := b.store.Write(ctx, st); err != nil {
		return err
	}
	// A forgotten run's journal (its checkpoints or transcript) goes with
	// its record, once the state no longer points to it.
	for _, j := range journals {
		if err := b.store.RemoveJournal(ctx, j); err != nil {
			return fmt.Errorf("the state was updated, but a journal was not removed: %w", err)
		}
	}
	view.Removed(len(args.Addresses))
	return nil
}

func forceUnlockCommand() *command {
	return &command{
		Name:       "force-unlock",
		ShortUsage: "agentctl force-unlock [options] LOCK_ID",
		ShortHelp:  "Remove a stale state lock left by a process that died.",
		Run:        leaf(arguments.ParseForceUnlock, (*meta).forceUnlock),
	}
}

func (m *meta) forceUnlock(ctx context.Context, args *arguments.ForceUnlock) error {
	m.noColor = args.NoColor
	view := views.NewForceUnlock(m.view())
	b, err := m.openStateBackend(args.Config, args.Vars, args.State)
	if err != nil {
		return err
	}
	err = b.store.ForceUnlock(ctx, args.LockID)
	if errors.Is(err, state.ErrNotLocked) {
		view.NotLocked(args.LockID)
		return nil
	}
	if err != nil {
		return err
	}
	view.Unlocked()
	return nil
}
