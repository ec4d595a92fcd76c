package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/local"
	"github.com/agentctl/agentctl/state/pgstore"
)

func initCommand() *command {
	return &command{
		Name:       "init",
		ShortUsage: "agentctl init [options] [PATH]",
		ShortHelp:  "Prepare the configured state backend, moving a local state into it.",
		LongHelp: "  Checks the backend the agentctl block configures (backend \"pg\"), creates\n" +
			"  or upgrades its schema, and records it for this working directory; the\n" +
			"  other commands refuse to run until it has. With -migrate-state it moves\n" +
			"  the local state, its journals and snapshots into the backend (the local\n" +
			"  state file is kept as state.json.migrated); it refuses to overwrite a\n" +
			"  backend that holds another state. With -reconfigure it uses the backend\n" +
			"  as it is, and leaves a local state behind. Without a backend block,\n" +
			"  -reconfigure goes back to the local state directory. See docs/backends.md.",
		Run: leaf(arguments.ParseInit, (*meta).init),
	}
}

func (m *meta) init(ctx context.Context, args *arguments.Init) error {
	m.noColor = args.NoColor
	cfg, diags := m.loadConfig(args.Path, args.Vars)
	if diags.HasErrors() {
		m.view().Diagnostics(diags, files(cfg))
		return errDiagnostics
	}
	sdir, err := stateDirFor(args.Path)
	if err != nil {
		return err
	}
	dir, err := local.OpenDir(sdir, local.WithAgentctlVersion(config.Version), local.WithEncryption(cfg.Settings.Encryption.Keys()))
	if err != nil {
		return err
	}
	rec, err := readBackendRecord(dir)
	if err != nil && !args.Reconfigure {
		return err
	}
	be := cfg.Settings.Backend
	if be == nil {
		if rec != nil {
			if !args.Reconfigure {
				return fmt.Errorf("the configuration has no backend block, but %s was initialized with the %s backend (schema %q): run agentctl init -reconfigure to use the local state directory again (the state stays in the backend; moving it back is not supported), or put the backend block back", dir.Path(), rec.Type, rec.Schema)
			}
			if err := os.Remove(dir.Abs(backendRecordFile)); err != nil {
				return fmt.Errorf("forgetting the backend: %w", err)
			}
			fmt.Fprintf(m.Stdout, "The %s backend (schema %q) is no longer used here; the state is in %s.\n", rec.Type, rec.Schema, dir.Path())
			return nil
		}
		fmt.Fprintf(m.Stdout, "No backend is configured: the state is kept in %s. Nothing to initialize.\n", dir.Path())
		return nil
	}
	schema := backendSchema(be)
	fmt.Fprintf(m.Stdout, "Initializing the %s backend (schema %q)...\n", be.Type, schema)
	if db := pgstore.Target(be.ConnString); rec != nil && rec.Database != "" && db != "" && db != rec.Database {
		fmt.Fprintf(m.Stdout, "The configuration now reaches the database %s; the state in %s stays there (moving a state between databases is not supported).\n", db, rec.Database)
	}
	store, err := pgstore.Connect(ctx, pgConfig(be, dir))
	if err != nil {
		return err
	}
	defer store.Close()
	from, to, err := store.Migrate(ctx)
	if err != nil {
		return err
	}
	switch {
	case from == 0:
		fmt.Fprintf(m.Stdout, "Created the backend's tables (schema version %d).\n", to)
	case from < to:
		fmt.Fprintf(m.Stdout, "Upgraded the backend's schema from version %d to %d.\n", from, to)
	default:
		fmt.Fprintf(m.Stdout, "The backend's schema is up to date (version %d).\n", to)
	}

	local, err := dir.Read(ctx)
	if err != nil {
		return fmt.Errorf("reading the local state to migrate: %w", err)
	}
	if local.Serial > 0 && !args.Reconfigure {
		if !args.MigrateState {
			return fmt.Errorf("a local state is in %s (serial %d, lineage %s): run agentctl init -migrate-state to move it into the backend, or agentctl init -reconfigure to use the backend without it", dir.StateFile(), local.Serial, local.Lineage)
		}
		if err := m.migrateState(ctx, args, dir, store, local); err != nil {
			return err
		}
	} else if local.Serial > 0 {
		fmt.Fprintf(m.Stdout, "The local state in %s (serial %d) is left where it is (-reconfigure).\n", dir.StateFile(), local.Serial)
	}
	if err := writeBackendRecord(dir, &backendRecord{Type: be.Type, Schema: schema, Database: pgstore.Target(be.ConnString), InitializedAt: time.Now().UTC()}); err != nil {
		return fmt.Errorf("recording the backend: %w", err)
	}
	fmt.Fprintf(m.Stdout, "\nagentctl has been initialized: the state is in the %s backend (schema %q).\n", be.Type, schema)
	return nil
}

// migrateState moves the local state, its journals and its snapshots
// into the backend, holding both locks: snapshots and journals first,
// the state last, so that the state the backend holds never refers to
// what it does not hold yet.
func (m *meta) migrateState(ctx context.Context, args *arguments.Init, dir *local.Dir, store *pgstore.Store, local *state.State) error {
	if args.State.Lock {
		ll, err := dir.Lock(ctx, state.LockInfo{Operation: "init"}, args.State.LockTimeout)
		if err != nil {
			return err
		}
		defer ll.Unlock(context.WithoutCancel(ctx))
		rl, err := store.Lock(ctx, state.LockInfo{Operation: "init"}, args.State.LockTimeout)
		if err != nil {
			return err
		}
		defer rl.Unlock(context.WithoutCancel(ctx))
		// Read again under the lock: a command may have changed it.
		if local, err = dir.Read(ctx); err != nil {
			return err
		}
	}
	if _, err := os.Stat(dir.LogFile()); err == nil {
		// A command died with changes in the log: compact them first,
		// so that nothing refers to the state file once it is set aside.
		if err := dir.Write(ctx, local); err != nil {
			return err
		}
	}
	remote, err := store.Read(ctx)
	if err != nil {
		return err
	}
	if remote.Serial > 0 {
		if remote.Lineage != local.Lineage {
			return fmt.Errorf("the %s holds another state (lineage %s, serial %d) than the local one (lineage %s, serial %d); refusing to overwrite it. Use another schema_name for this configuration, or agentctl init -reconfigure to use the backend's state and leave the local one", store.Where(), remote.Lineage, remote.Serial, local.Lineage, local.Serial)
		}
		if remote.Serial >= local.Serial {
			return fmt.Errorf("the %s already holds this state at serial %d, and the local one is at serial %d: nothing newer to move. Run agentctl init -reconfigure to use the backend's state", store.Where(), remote.Serial, local.Serial)
		}
	}
	// Snapshots.
	snaps := 0
	for _, addr := range local.SandboxAddresses() {
		name := local.Sandboxes[addr].Snapshot
		if name == "" {
			continue
		}
		if _, err := os.Stat(dir.Abs(name)); errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintf(m.Stderr, "Warning: %s: its snapshot %s is missing and is not moved; plan reports it\n", addr, dir.Abs(name))
			continue
		}
		if err := store.PutSnapshot(ctx, name); err != nil {
			return fmt.Errorf("moving the snapshot of %s: %w", addr, err)
		}
		snaps++
	}
	// Journals: every journal file of the state directory.
	names, err := localJournals(dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		var recs [][]byte
		if _, err := dir.ReadJournal(ctx, name, func(raw json.RawMessage) error {
			recs = append(recs, []byte(raw))
			return nil
		}); err != nil {
			return fmt.Errorf("moving journal %s: %w", dir.Abs(name), err)
		}
		if err := store.ImportJournal(ctx, local.Lineage, name, recs); err != nil {
			return err
		}
	}
	serial := local.Serial
	if err := store.Write(ctx, local); err != nil {
		return err
	}
	// The local state is kept aside, not used again.
	if err := os.Rename(dir.StateFile(), dir.StateFile()+".migrated"); err != nil {
		return fmt.Errorf("the state is in the backend, but the local state file could not be set aside (remove %s yourself): %w", dir.StateFile(), err)
	}
	for _, name := range names {
		if err := dir.RemoveJournal(ctx, name); err != nil {
			fmt.Fprintf(m.Stderr, "Warning: the journal is in the backend, but the local copy could not be removed: %v\n", err)
		}
	}
	fmt.Fprintf(m.Stdout, "Moved the local state (serial %d, lineage %s, %d runs, %d sandboxes), %d journals and %d snapshots into the backend; the local state file is kept as %s.\n",
		serial, local.Lineage, len(local.Runs), len(local.Sandboxes), len(names), snaps, dir.StateFile()+".migrated")
	return nil
}

// localJournals returns the names of the journal files of dir.
func localJournals(dir *local.Dir) ([]string, error) {
	var names []string
	root := dir.Abs("journals")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == root {
			return filepath.SkipDir
		}
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && strings.HasSuffix(p, ".jsonl") {
			rel, err := filepath.Rel(dir.Path(), p)
			if err != nil {
				return err
			}
			names = append(names, path.Clean(filepath.ToSlash(rel)))
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("listing the local journals: %w", err)
	}
	sort.Strings(names)
	return names, nil
}
