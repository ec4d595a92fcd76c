package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/state"
)

func queryCommand() *command {
	return &command{
		Name:       "query",
		ShortUsage: "agentctl query [options]",
		ShortHelp:  "List the sandboxes the providers hold for agentctl, and reap the orphans.",
		LongHelp: "  Asks each configured sandbox provider for the sandboxes agentctl\n" +
			"  created (those carrying its labels), of every configuration, and marks\n" +
			"  each: managed (the state records it), orphan (created for this\n" +
			"  configuration, but no state records it: an apply stopped while\n" +
			"  creating it, or its record was removed) or foreign (another\n" +
			"  configuration's). With -reap, deletes the orphans after asking for\n" +
			"  \"yes\" (-auto-approve: without asking); foreign sandboxes are never\n" +
			"  deleted. Holds the state lock, so no apply is creating a sandbox\n" +
			"  meanwhile.",
		Run: leaf(arguments.ParseQuery, (*meta).query),
	}
}

func (m *meta) query(ctx context.Context, args *arguments.Query) error {
	m.noColor = args.NoColor
	if args.Reap && !args.AutoApprove {
		switch {
		case args.ViewType == arguments.ViewJSON:
			return errors.New("query -reap -json cannot ask for approval: add -auto-approve")
		case !views.IsTerminal(os.Stdin):
			return errors.New("query -reap cannot ask for approval: standard input is not a terminal; add -auto-approve to delete the orphans without asking")
		}
	}
	b, err := m.openBackend(args.Config, args.Vars, args.State)
	if err != nil {
		return err
	}
	if err := b.takeLock(ctx, args.State, "query"); err != nil {
		return err
	}
	defer b.unlock(ctx)
	st, err := b.store.Read(ctx)
	if err != nil {
		return err
	}
	e := b.engine(0, nil, nil)
	res, err := e.Query(ctx, []*state.State{st}, engine.QueryOptions{})
	if err != nil {
		return err
	}
	view := views.NewQuery(args.ViewType, m.view())
	if err := view.Result(res, args.Reap); err != nil {
		return err
	}
	if !args.Reap {
		return view.Done(nil)
	}
	orphans := res.Orphans()
	reaped := []engine.Found{}
	if len(orphans) > 0 && !args.AutoApprove && !m.confirmReap(len(orphans)) {
		fmt.Fprintln(m.Stderr, "\nQuery -reap cancelled: nothing was deleted.")
		return exitCode(exitError)
	}
	reapErr := e.Reap(ctx, orphans, func(f engine.Found) {
		reaped = append(reaped, f)
		view.Reaped(f)
	})
	if err := view.Done(reaped); err != nil {
		return errors.Join(reapErr, err)
	}
	return reapErr
}

// confirmReap asks for "yes" before n orphans are deleted.
func (m *meta) confirmReap(n int) bool {
	fmt.Fprintf(m.Stdout, "\nDo you want to delete %s?\n  agentctl will delete %s with everything in %s.\n  There is no undo. Only 'yes' will be accepted to confirm.\n\n  Enter a value: ",
		plural(n, "this orphan", fmt.Sprintf("these %d orphans", n)), plural(n, "it", "them"), plural(n, "it", "them"))
	line, err := m.stdinReader().ReadString('\n')
	if err != nil && line == "" {
		fmt.Fprintln(m.Stdout)
		return false
	}
	return strings.TrimSpace(line) == "yes"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
