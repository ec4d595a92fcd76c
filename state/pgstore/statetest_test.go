package pgstore

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/statetest"
)

// TestStore holds the PostgreSQL store to the behaviour of every store.
func TestStore(t *testing.T) {
	statetest.TestStore(t, func(t *testing.T) statetest.Harness {
		admin, cfg := newStore(t)
		return statetest.Harness{
			// Every client is another machine: a store of its own on
			// the same schema, with a local state directory of its own.
			Open: func(t *testing.T, keys *seal.Keys) state.Store {
				c := cfg
				c.Encryption = keys
				return another(t, c)
			},
			// The server ends the session holding the lock, as when the
			// holder's machine goes away.
			LoseLock: func(t *testing.T, _ state.Store, _ state.Lease) {
				ctx := context.Background()
				pid, err := admin.lockHolder(ctx)
				if err != nil || pid == 0 {
					t.Fatalf("the lock's session: %d, %v", pid, err)
				}
				if _, err := admin.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
					t.Fatal(err)
				}
				for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
					if pid, _ := admin.lockHolder(ctx); pid == 0 {
						return
					}
					if time.Now().After(deadline) {
						t.Fatal("the lock outlived its session")
					}
				}
			},
			Raw: func(t *testing.T) []byte {
				var all bytes.Buffer
				for _, q := range []string{
					`SELECT data FROM ` + admin.t.versions, `SELECT record FROM ` + admin.t.changes,
					`SELECT record FROM ` + admin.t.records, `SELECT data FROM ` + admin.t.chunks,
					`SELECT info FROM ` + admin.t.lockInfo,
				} {
					rows, err := admin.pool.Query(context.Background(), q)
					if err != nil {
						t.Fatal(err)
					}
					for rows.Next() {
						var b []byte
						if err := rows.Scan(&b); err != nil {
							t.Fatal(err)
						}
						all.Write(b)
					}
					if err := rows.Err(); err != nil {
						t.Fatal(err)
					}
				}
				return all.Bytes()
			},
			// A record is a row committed whole: a crash cannot tear it.
			TearJournal: nil,
		}
	})
}
