package main

import (
	"context"
	"fmt"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
)

func importCommand() *command {
	return &command{
		Name:       "import",
		ShortUsage: "agentctl import [options] ADDR ID",
		ShortHelp:  "Adopt an existing sandbox as a sandbox of the configuration.",
		LongHelp: "  Finds the existing sandbox ID (a container id or name, a local\n" +
			"  sandbox directory, a hosted sandbox's id) through the provider of the\n" +
			"  sandbox at ADDR, checks it matches the configuration (image, network,\n" +
			"  ports, user, resources, labels) or says what differs, records it in\n" +
			"  the state and writes the manifest into it. An import block in the\n" +
			"  configuration does the same through plan and apply.",
		Run: leaf(arguments.ParseImport, (*meta).importSandbox),
	}
}

func (m *meta) importSandbox(ctx context.Context, args *arguments.Import) error {
	m.noColor = args.NoColor
	b, err := m.openBackend(args.Config, args.Vars, args.State)
	if err != nil {
		return err
	}
	if err := b.takeLock(ctx, args.State, "import"); err != nil {
		return err
	}
	defer b.unlock(ctx)
	st, err := b.store.Read(ctx)
	if err != nil {
		return err
	}
	view := views.NewApply(arguments.ViewHuman, m.view())
	e := b.engine(0, view.Event, nil)
	if err := e.Import(ctx, st, args.Address, args.ID); err != nil {
		m.printErr(err, b.cfg)
		return errDiagnostics
	}
	fmt.Fprintf(m.Stdout, "\nImport successful! %s is now managed by agentctl; the next plan compares it with the configuration.\n", args.Address)
	return nil
}
