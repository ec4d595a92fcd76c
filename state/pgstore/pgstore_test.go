package pgstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/pgtest"
	"github.com/agentctl/agentctl/sandbox/archive"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/local"
)

var pg pgtest.Shared

func TestMain(m *testing.M) {
	code := m.Run()
	if err := pg.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

var schemaSeq atomic.Int64

// newStore returns an initialized store in a schema of its own.
func newStore(tb testing.TB) (*Store, Config) {
	tb.Helper()
	srv := pg.Server(tb)
	local, err := local.OpenDir(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	cfg := Config{ConnString: srv.ConnString, Schema: fmt.Sprintf("t%d_%d", os.Getpid(), schemaSeq.Add(1)), Version: "test", Local: local}
	s, err := Connect(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	if _, _, err := s.Migrate(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return s, cfg
}

// another opens a second store on the same backend, as a second
// machine would.
func another(tb testing.TB, cfg Config) *Store {
	tb.Helper()
	local, err := local.OpenDir(tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Local = local
	s, err := Open(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(s.Close)
	return s
}

func TestOpenNotInitialized(t *testing.T) {
	srv := pg.Server(t)
	local, _ := local.OpenDir(t.TempDir())
	_, err := Open(context.Background(), Config{ConnString: srv.ConnString, Schema: "never_initialized", Local: local})
	if !errors.Is(err, ErrNotInitialized) || !strings.Contains(err.Error(), "agentctl init") {
		t.Fatalf("Open of a schema init never created: %v; want ErrNotInitialized telling to run agentctl init", err)
	}
}

func TestMigrateTwice(t *testing.T) {
	s, _ := newStore(t)
	from, to, err := s.Migrate(context.Background())
	if err != nil || from != schemaVersion || to != schemaVersion {
		t.Fatalf("second Migrate: %d -> %d, %v", from, to, err)
	}
}

func TestConnStringNeverInErrors(t *testing.T) {
	local, _ := local.OpenDir(t.TempDir())
	conn := "postgres://alice:s3cret-pw@127.0.0.1:1/db?sslmode=disable&connect_timeout=2"
	_, err := Open(context.Background(), Config{ConnString: conn, Local: local})
	if err == nil {
		t.Fatal("connecting to a closed port succeeded")
	}
	if strings.Contains(err.Error(), "s3cret-pw") || strings.Contains(err.Error(), conn) {
		t.Fatalf("error shows the connection string: %v", err)
	}
	if !strings.Contains(err.Error(), "could not be reached") {
		t.Errorf("error does not say the database could not be reached: %v", err)
	}
	_, err = Open(context.Background(), Config{ConnString: "postgres://bob:0ther-pw@[::1", Local: local})
	if err == nil || strings.Contains(err.Error(), "0ther-pw") {
		t.Fatalf("invalid connection string: %v", err)
	}
}

// TestStaleWriterRefused: a client whose state is older than the
// backend's (another agentctl wrote meanwhile, -lock=false) is refused,
// whole or change, and its serial stays; the compaction leaves one
// version and no changes.
func TestStaleWriterRefused(t *testing.T) {
	s, cfg := newStore(t)
	ctx := context.Background()
	st, err := s.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Runs["run.a"] = &state.Run{Agent: "agent.x", Status: "running"}
	if err := s.Write(ctx, st); err != nil {
		t.Fatal(err)
	}
	other := another(t, cfg)
	stale, err := other.Read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Runs["run.a"].Status = "completed"
	if err := s.Append(ctx, st, state.RunRef("run.a")); err != nil {
		t.Fatal(err)
	}
	if err := other.Append(ctx, stale, state.RunRef("run.a")); err == nil || !strings.Contains(err.Error(), "another agentctl wrote it") {
		t.Fatalf("append on a stale state: %v", err)
	}
	if err := other.Write(ctx, stale); err == nil || !strings.Contains(err.Error(), "another agentctl wrote it") {
		t.Fatalf("write of a stale state: %v", err)
	}
	if stale.Serial != 1 {
		t.Fatalf("a refused write changed the serial to %d", stale.Serial)
	}
	if err := s.compact(ctx); err != nil {
		t.Fatal(err)
	}
	if pending, err := s.pendingChanges(ctx); err != nil || pending {
		t.Fatalf("changes left after the compaction: %v %v", pending, err)
	}
	back, err := other.Read(ctx)
	if err != nil || back.Serial != 3 || back.Runs["run.a"].Status != "completed" {
		t.Fatalf("after compaction: %+v %v", back, err)
	}
}

func TestNewerFormatRefused(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.pool.Exec(ctx, `INSERT INTO `+s.t.versions+` (serial, lineage, agentctl_version, data) VALUES (1, 'l', 'v9', $1)`,
		[]byte(`{"format_version": 99, "lineage": "l", "serial": 1}`)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Read(context.Background())
	var nf *state.NewerFormatError
	if !errors.As(err, &nf) || nf.Format != 99 {
		t.Fatalf("reading a newer format: %v", err)
	}
}

// TestLockedWrites: a write under the lock checks the lock info.
func TestLockedWritesCheckInfo(t *testing.T) {
	s, _ := newStore(t)
	ctx := context.Background()
	st, _ := s.Read(context.Background())
	l, err := s.Lock(ctx, state.LockInfo{Operation: "apply"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	if err := s.Write(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `DELETE FROM `+s.t.lockInfo); err != nil {
		t.Fatal(err)
	}
	st.Runs["run.x"] = &state.Run{Status: "running"}
	if err := s.Append(context.Background(), st, state.RunRef("run.x")); err == nil || !strings.Contains(err.Error(), "state lock lost") {
		t.Fatalf("Append without the lock info: %v", err)
	}
	if err := s.Write(context.Background(), st); err == nil || !strings.Contains(err.Error(), "state lock lost") {
		t.Fatalf("Write without the lock info: %v", err)
	}
}

// TestJournalSecondWriterStopped: a writer that fell behind another on
// the same journal is stopped, not interleaved.
func TestJournalSecondWriterStopped(t *testing.T) {
	s, cfg := newStore(t)
	other := another(t, cfg)
	ctx := context.Background()
	j3, err := s.OpenJournal(ctx, "journals/a.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	j4, err := other.OpenJournal(ctx, "journals/a.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := j3.Append(map[string]int{"step": 1}); err != nil {
		t.Fatal(err)
	}
	if err := j4.Append(map[string]int{"step": 10}); err == nil || !strings.Contains(err.Error(), "another agentctl") {
		t.Fatalf("a second writer's append: %v", err)
	}
	if err := j4.Append(map[string]int{"step": 11}); err == nil {
		t.Fatal("the stopped writer appended again")
	}
	if n, err := s.ReadJournal(ctx, "journals/a.jsonl", nil); n != 1 || err != nil {
		t.Fatalf("the journal holds %d records (%v), want the first writer's one", n, err)
	}
}

// TestSnapshotDamagedChunk: a snapshot written on this machine but not
// stored is missing for the backend; a damaged chunk is found on fetch,
// which leaves no file behind.
func TestSnapshotDamagedChunk(t *testing.T) {
	s, cfg := newStore(t)
	ctx := context.Background()
	name := "snapshots/sandbox.dev-0123456789ab@1.tar"
	data := make([]byte, 2*chunkSize+12345)
	rand.Read(data)
	if err := os.MkdirAll(filepath.Dir(s.Abs(name)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Abs(name), data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckSnapshot(ctx, name); !errors.Is(err, archive.ErrSnapshotMissing) {
		t.Fatalf("check before put: %v", err)
	}
	if err := s.PutSnapshot(ctx, name); err != nil {
		t.Fatal(err)
	}
	other := another(t, cfg)
	if _, err := s.pool.Exec(ctx, `UPDATE `+s.t.chunks+` SET data = 'x' WHERE name = $1 AND seq = 2`, name); err != nil {
		t.Fatal(err)
	}
	if err := other.FetchSnapshot(ctx, name); !errors.Is(err, archive.ErrSnapshotCorrupt) {
		t.Fatalf("fetching a damaged snapshot: %v", err)
	}
	if _, err := os.Stat(other.Abs(name)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a damaged fetch left %s: %v", other.Abs(name), err)
	}
}

// TestDatabaseRestart: the database restarting while a journal is
// written: the append in flight is retried (bounded) and nothing
// committed is lost; the lock's session is gone, so the lease refuses
// state writes.
func TestDatabaseRestart(t *testing.T) {
	s, cfg := newStore(t)
	ls := another(t, cfg) // holds the lock; s writes the journal
	ctx := context.Background()
	st, _ := s.Read(context.Background())
	if err := s.Write(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	l, err := ls.Lock(ctx, state.LockInfo{Operation: "apply"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	j, err := s.OpenJournal(context.Background(), "journals/r.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(map[string]int{"step": 1}); err != nil {
		t.Fatal(err)
	}
	if err := pg.Server(t).Restart(ctx, 100*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(map[string]int{"step": 2}); err != nil {
		t.Fatalf("append after a restart: %v", err)
	}
	st.Runs["run.r"] = &state.Run{Status: "running"}
	err = ls.Append(context.Background(), st, state.RunRef("run.r"))
	if err == nil || !strings.Contains(err.Error(), "state lock lost") {
		t.Fatalf("state append on the lock's lost connection: %v", err)
	}
	if n, err := s.ReadJournal(context.Background(), "journals/r.jsonl", nil); n != 2 || err != nil {
		t.Fatalf("journal after the restart: %d records, %v", n, err)
	}
	if info, err := s.ReadLockInfo(context.Background()); err != nil || info == nil {
		t.Fatalf("lock info after the restart: %v %v", info, err)
	}
	if pid, err := s.lockHolder(ctx); pid != 0 || err != nil {
		t.Fatalf("the lock is held after the restart by %d (%v)", pid, err)
	}
	// The watchdog finds the lost lock; the holder's journal appends
	// then stop.
	jl, err := ls.OpenJournal(context.Background(), "journals/r.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * watchInterval)
	for ls.leaseLost() == nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if err := jl.Append(map[string]int{"step": 3}); err == nil || !strings.Contains(err.Error(), "state lock lost") {
		t.Fatalf("journal append after the lock was lost: %v", err)
	}
}
