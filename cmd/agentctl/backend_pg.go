package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/local"
	"github.com/agentctl/agentctl/state/pgstore"
	"github.com/agentctl/agentctl/state/statefile"
)

// backendRecordFile, in the local state directory, records the backend
// agentctl init set up for it (as .terraform/terraform.tfstate does):
// its type, schema and database (host:port/name), never the connection
// string's user or password. A backend in the configuration that it does
// not record needs agentctl init first.
const backendRecordFile = "backend.json"

type backendRecord struct {
	Type          string    `json:"type"`
	Schema        string    `json:"schema_name"`
	Database      string    `json:"database,omitempty"`
	InitializedAt time.Time `json:"initialized_at"`
}

func backendSchema(be *config.Backend) string {
	if be.Schema != "" {
		return be.Schema
	}
	return pgstore.DefaultSchema
}

func readBackendRecord(dir *local.Dir) (*backendRecord, error) {
	data, err := os.ReadFile(dir.Abs(backendRecordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the backend record: %w", err)
	}
	var r backendRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s is damaged (%v): run agentctl init again", dir.Abs(backendRecordFile), err)
	}
	return &r, nil
}

func writeBackendRecord(dir *local.Dir, r *backendRecord) error {
	if err := dir.Ensure(); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return statefile.WriteFileAtomic(dir.Abs(backendRecordFile), append(data, '\n'), 0o600)
}

// openStore returns the store of a command: the configured backend once
// agentctl init set it up, or the local state directory.
func (m *meta) openStore(cfg *config.Config, dir *local.Dir, sa arguments.State) (state.Store, error) {
	rec, err := readBackendRecord(dir)
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		if rec != nil {
			return nil, fmt.Errorf("the state is in the %s backend (schema %q), and the configuration, which says how to reach it, has errors: fix them first (agentctl validate shows them)", rec.Type, rec.Schema)
		}
		return dir, nil
	}
	be := cfg.Settings.Backend
	if be == nil {
		if rec != nil {
			return nil, fmt.Errorf("the configuration has no backend block, but %s was initialized with the %s backend (schema %q), which holds the state: put the backend block back, or run agentctl init -reconfigure to use the local state directory again (the state in the backend stays there)", dir.Path(), rec.Type, rec.Schema)
		}
		return dir, nil
	}
	if sa.StatePath != "" {
		return nil, fmt.Errorf("-state cannot be used with the %s backend configured at %s: the state is in the backend", be.Type, be.DeclRange)
	}
	schema := backendSchema(be)
	if rec == nil || rec.Type != be.Type || rec.Schema != schema {
		hint := ""
		if dir.Exists() {
			hint = fmt.Sprintf("; a local state is in %s: agentctl init -migrate-state moves it into the backend", dir.StateFile())
		}
		if rec != nil {
			return nil, fmt.Errorf("backend configuration changed: %s was initialized with the %s backend (schema %q), the configuration now says %s (schema %q): run agentctl init (-migrate-state to move a local state into it)%s", dir.Path(), rec.Type, rec.Schema, be.Type, schema, hint)
		}
		return nil, fmt.Errorf("backend initialization required: the configuration keeps the state in the %s backend (schema %q) at %s: run agentctl init%s", be.Type, schema, be.DeclRange, hint)
	}
	if db := pgstore.Target(be.ConnString); rec.Database != "" && db != "" && db != rec.Database {
		return nil, fmt.Errorf("backend configuration changed: %s was initialized with the %s backend in the database %s, the connection string at %s now reaches %s: point it back at %s, or run agentctl init to use the new database (the state in the old one stays there: moving a state between databases is not supported)", dir.Path(), rec.Type, rec.Database, be.DeclRange, db, rec.Database)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := pgstore.Open(ctx, pgConfig(be, dir))
	if err != nil {
		return nil, err
	}
	return s, nil
}

func pgConfig(be *config.Backend, dir *local.Dir) pgstore.Config {
	return pgstore.Config{ConnString: be.ConnString, Schema: backendSchema(be), Version: config.Version, Local: dir, Encryption: dir.Encryption()}
}
