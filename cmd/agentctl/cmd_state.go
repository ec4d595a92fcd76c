package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/state"
)

func stateCommand(m *meta) *ffcli.Command {
	return &ffcli.Command{
		Name:       "state",
		ShortUsage: "agentctl state <list|show|rm> [options] [ADDR...]",
		ShortHelp:  "Inspect or edit the state.",
		FlagSet:    flag.NewFlagSet("state", flag.ContinueOnError),
		Subcommands: []*ffcli.Command{
			stateListCommand(m), stateShowCommand(m), stateRmCommand(m),
		},
		Exec: func(ctx context.Context, args []string) error {
			return fmt.Errorf("state needs a subcommand: list, show or rm")
		},
	}
}

func stateListCommand(m *meta) *ffcli.Command {
	args, fs := arguments.NewInspect("state list", m.Stderr)
	return &ffcli.Command{
		Name:       "list",
		ShortUsage: "agentctl state list [options]",
		ShortHelp:  "List the addresses in the state.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, rest []string) error {
			if err := args.Finish(fs, rest); err != nil {
				return err
			}
			_, st, err := readState(m.openStateBackend, args)
			if err != nil {
				return err
			}
			addrs := append(st.SandboxAddresses(), st.RunAddresses()...)
			if args.JSON {
				return writeJSON(m.Stdout, addrs)
			}
			for _, a := range addrs {
				fmt.Fprintln(m.Stdout, a)
			}
			return nil
		},
	}
}

func stateShowCommand(m *meta) *ffcli.Command {
	args, fs := arguments.NewInspect("state show", m.Stderr)
	return &ffcli.Command{
		Name:       "show",
		ShortUsage: "agentctl state show [options] ADDR",
		ShortHelp:  "Show one sandbox or run as stored in the state.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, rest []string) error {
			if err := args.Finish(fs, rest); err != nil {
				return err
			}
			if len(args.Args) != 1 {
				return fmt.Errorf("state show needs exactly one address, such as run.NAME or sandbox.NAME")
			}
			_, st, err := readState(m.openStateBackend, args)
			if err != nil {
				return err
			}
			addr := args.Args[0]
			if s := st.Sandboxes[addr]; s != nil {
				return writeJSON(m.Stdout, s)
			}
			if r := st.Runs[addr]; r != nil {
				return writeJSON(m.Stdout, r)
			}
			return fmt.Errorf("%s is not in the state; agentctl state list shows the addresses it holds", addr)
		},
	}
}

func stateRmCommand(m *meta) *ffcli.Command {
	args, fs := arguments.NewInspect("state rm", m.Stderr)
	return &ffcli.Command{
		Name:       "rm",
		ShortUsage: "agentctl state rm [options] ADDR...",
		ShortHelp:  "Forget sandboxes or runs without destroying them.",
		LongHelp: "  Removes the addresses from the state only: a forgotten sandbox keeps\n" +
			"  running at its provider and is no longer managed; a forgotten run's\n" +
			"  journal (its checkpoints and transcript) is deleted with its record,\n" +
			"  and the next apply executes it again.",
		FlagSet: fs,
		Exec: func(ctx context.Context, rest []string) error {
			if err := args.Finish(fs, rest); err != nil {
				return err
			}
			if len(args.Args) == 0 {
				return fmt.Errorf("state rm needs at least one address")
			}
			b, err := m.openStateBackend(args.Config, args.Vars, args.State)
			if err != nil {
				return err
			}
			if err := b.takeLock(ctx, args.State, "state rm"); err != nil {
				return err
			}
			defer b.unlock()
			st, err := b.dir.Read()
			if err != nil {
				return err
			}
			for _, addr := range args.Args {
				if st.Sandboxes[addr] == nil && st.Runs[addr] == nil {
					return fmt.Errorf("%s is not in the state; nothing was removed", addr)
				}
			}
			var journals []string
			for _, addr := range args.Args {
				if r := st.Runs[addr]; r != nil {
					j := r.Journal
					if j == "" {
						j = state.JournalName(addr)
					}
					journals = append(journals, j)
				}
				delete(st.Sandboxes, addr)
				delete(st.Runs, addr)
			}
			if err := b.dir.Write(st); err != nil {
				return err
			}
			// A forgotten run's journal (its checkpoints or transcript)
			// goes with its record, once the state no longer points to it.
			for _, j := range journals {
				if err := state.RemoveJournal(b.dir.Abs(j)); err != nil {
					return fmt.Errorf("the state was updated, but a journal was not removed: %w", err)
				}
			}
			fmt.Fprintf(m.Stdout, "Removed %d object(s) from the state.\n", len(args.Args))
			return nil
		},
	}
}

func forceUnlockCommand(m *meta) *ffcli.Command {
	args, fs := arguments.NewInspect("force-unlock", m.Stderr)
	return &ffcli.Command{
		Name:       "force-unlock",
		ShortUsage: "agentctl force-unlock [options] LOCK_ID",
		ShortHelp:  "Remove a stale state lock left by a process that died.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, rest []string) error {
			if err := args.Finish(fs, rest); err != nil {
				return err
			}
			if len(args.Args) != 1 {
				return fmt.Errorf("force-unlock needs the lock ID printed in the lock error")
			}
			b, err := m.openStateBackend(args.Config, args.Vars, args.State)
			if err != nil {
				return err
			}
			err = b.dir.ForceUnlock(args.Args[0])
			if errors.Is(err, state.ErrNotLocked) {
				// Nothing is left to remove: the lock was released (its
				// holder exited, and a later command cleared its info).
				fmt.Fprintf(m.Stdout, "The state is not locked: lock %s was already released. Nothing to do.\n", args.Args[0])
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintln(m.Stdout, "agentctl state has been successfully unlocked!")
			return nil
		},
	}
}
