package pgstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
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

func TestStateWriteAppendRead(t *testing.T) {
	s, cfg := newStore(t)
	st, err := s.Read(context.Background())
	if err != nil || st.Serial != 0 {
		t.Fatalf("empty backend: %+v, %v", st, err)
	}
	st.Runs["run.a"] = &state.Run{Agent: "agent.x", Status: "running"}
	if err := s.Write(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	if st.Serial != 1 {
		t.Fatalf("serial after the first write: %d", st.Serial)
	}
	st.Runs["run.a"].Status = "completed"
	st.Sandboxes["sandbox.b"] = &state.Sandbox{Provider: "provider.local"}
	if err := s.Append(context.Background(), st, state.RunRef("run.a"), state.SandboxRef("sandbox.b")); err != nil {
		t.Fatal(err)
	}
	delete(st.Sandboxes, "sandbox.b")
	if err := s.Append(context.Background(), st, state.SandboxRef("sandbox.b")); err != nil {
		t.Fatal(err)
	}
	other := another(t, cfg)
	back, err := other.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if back.Serial != 3 || back.Lineage != st.Lineage || back.Runs["run.a"].Status != "completed" || len(back.Sandboxes) != 0 {
		t.Fatalf("read back serial %d lineage %s runs %+v sandboxes %v; want serial 3 of %s", back.Serial, back.Lineage, back.Runs["run.a"], back.Sandboxes, st.Lineage)
	}
	// A stale writer is refused, whole or change.
	stale := back.Clone()
	if err := s.Append(context.Background(), st, state.RunRef("run.a")); err != nil {
		t.Fatal(err)
	}
	if err := other.Append(context.Background(), stale, state.RunRef("run.a")); err == nil || !strings.Contains(err.Error(), "another agentctl wrote it") {
		t.Fatalf("append on a stale state: %v", err)
	}
	if err := other.Write(context.Background(), stale); err == nil || !strings.Contains(err.Error(), "another agentctl wrote it") {
		t.Fatalf("write of a stale state: %v", err)
	}
	if stale.Serial != 3 {
		t.Fatalf("a refused write changed the serial to %d", stale.Serial)
	}
	// Compaction leaves one version and no changes.
	if err := s.compact(context.Background()); err != nil {
		t.Fatal(err)
	}
	if pending, err := s.pendingChanges(context.Background()); err != nil || pending {
		t.Fatalf("changes left after the compaction: %v %v", pending, err)
	}
	back, err = other.Read(context.Background())
	if err != nil || back.Serial != 5 || back.Runs["run.a"].Status != "completed" {
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

func TestLock(t *testing.T) {
	s, cfg := newStore(t)
	other := another(t, cfg)
	ctx := context.Background()
	l, err := s.Lock(ctx, state.LockInfo{Operation: "apply", Who: "alice@a"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = other.Lock(ctx, state.LockInfo{Operation: "plan"}, 200*time.Millisecond)
	var le *state.LockedError
	if !errors.As(err, &le) || le.Info == nil || le.Info.ID != l.Info().ID || !strings.Contains(err.Error(), "alice@a") || !strings.Contains(err.Error(), "advisory lock") {
		t.Fatalf("second lock: %v", err)
	}
	if time.Since(start) < 200*time.Millisecond {
		t.Errorf("lock timeout not waited")
	}
	if err := other.ForceUnlock(context.Background(), "wrong"); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("force-unlock of a wrong ID: %v", err)
	}
	if err := other.ForceUnlock(context.Background(), l.Info().ID); err == nil || !strings.Contains(err.Error(), "still holds") {
		t.Fatalf("force-unlock of a live lock: %v", err)
	}
	if err := l.Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if info, err := other.ReadLockInfo(context.Background()); err != nil || info != nil {
		t.Fatalf("lock info after unlock: %v %v", info, err)
	}
	l2, err := other.Lock(ctx, state.LockInfo{Operation: "apply"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Unlock(context.Background())
	if err := other.ForceUnlock(context.Background(), "x"); err == nil {
		t.Fatal("force-unlock with a wrong ID succeeded")
	}
}

// TestLockDeadHolder: the session of a holder that died ends, which
// releases the lock; its info stays for force-unlock, and writes the
// dead lease would make are refused.
func TestLockDeadHolder(t *testing.T) {
	s, cfg := newStore(t)
	other := another(t, cfg)
	ctx := context.Background()
	st, _ := s.Read(context.Background())
	if err := s.Write(context.Background(), st); err != nil {
		t.Fatal(err)
	}
	l, err := s.Lock(ctx, state.LockInfo{Operation: "apply"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := other.lockHolder(ctx)
	if err != nil || pid == 0 {
		t.Fatalf("lock holder: %d %v", pid, err)
	}
	if _, err := other.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if pid, _ := other.lockHolder(ctx); pid == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lock outlived its session")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := l.Check(context.Background()); err == nil || !strings.Contains(err.Error(), "state lock lost") {
		t.Fatalf("Check after the session ended: %v", err)
	}
	st.Runs["run.x"] = &state.Run{Status: "running"}
	if err := s.Append(context.Background(), st, state.RunRef("run.x")); err == nil || !strings.Contains(err.Error(), "state lock lost") {
		t.Fatalf("Append after the lock was lost: %v", err)
	}
	if err := other.ForceUnlock(context.Background(), l.Info().ID); err != nil {
		t.Fatalf("force-unlock of a dead holder's info: %v", err)
	}
	if err := other.ForceUnlock(context.Background(), l.Info().ID); !errors.Is(err, state.ErrNotLocked) {
		t.Fatalf("second force-unlock: %v", err)
	}
	l2, err := other.Lock(ctx, state.LockInfo{Operation: "apply"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	l2.Unlock(context.Background())
	l.Unlock(context.Background())
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

func TestJournal(t *testing.T) {
	s, cfg := newStore(t)
	if _, err := s.ReadJournal(context.Background(), "journals/none.jsonl", nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("reading a missing journal: %v", err)
	}
	j, err := s.OpenJournal(context.Background(), "journals/a.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.ReadJournal(context.Background(), "journals/a.jsonl", nil); n != 0 || err != nil {
		t.Fatalf("empty journal: %d %v", n, err)
	}
	for i := range 5 {
		if err := j.Append(map[string]int{"step": i + 1}); err != nil {
			t.Fatal(err)
		}
	}
	j.Close()
	other := another(t, cfg)
	j2, err := other.OpenJournal(context.Background(), "journals/a.jsonl")
	if err != nil || j2.Len() != 5 {
		t.Fatalf("reopened journal: len %d, %v", j2.Len(), err)
	}
	if err := j2.Append(map[string]int{"step": 6}); err != nil {
		t.Fatal(err)
	}
	var steps []int
	n, err := s.ReadJournal(context.Background(), "journals/a.jsonl", func(raw json.RawMessage) error {
		var r struct{ Step int }
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		steps = append(steps, r.Step)
		return nil
	})
	if err != nil || n != 6 || fmt.Sprint(steps) != "[1 2 3 4 5 6]" {
		t.Fatalf("read %d %v %v", n, steps, err)
	}
	// A writer that fell behind another is stopped, not interleaved.
	if err := j.Append(map[string]int{"step": 7}); err != nil {
		// j is closed: it refuses.
		if !strings.Contains(err.Error(), "closed") {
			t.Fatal(err)
		}
	}
	j3, _ := s.OpenJournal(context.Background(), "journals/a.jsonl")
	j4, _ := other.OpenJournal(context.Background(), "journals/a.jsonl")
	if err := j3.Append(map[string]int{"step": 7}); err != nil {
		t.Fatal(err)
	}
	if err := j4.Append(map[string]int{"step": 70}); err == nil || !strings.Contains(err.Error(), "another agentctl") {
		t.Fatalf("a second writer's append: %v", err)
	}
	if err := s.RemoveJournal(context.Background(), "journals/a.jsonl"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadJournal(context.Background(), "journals/a.jsonl", nil); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("reading a removed journal: %v", err)
	}
	if err := s.RemoveJournal(context.Background(), "journals/a.jsonl"); err != nil {
		t.Fatal(err)
	}
}

func TestSnapshots(t *testing.T) {
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
	if err := other.CheckSnapshot(ctx, name); err != nil {
		t.Fatal(err)
	}
	if err := other.FetchSnapshot(ctx, name); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(other.Abs(name))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("fetched snapshot differs (%d bytes, %v)", len(got), err)
	}
	// A damaged chunk is found on fetch.
	if _, err := s.pool.Exec(ctx, `UPDATE `+s.t.chunks+` SET data = 'x' WHERE name = $1 AND seq = 2`, name); err != nil {
		t.Fatal(err)
	}
	os.Remove(other.Abs(name))
	if err := other.FetchSnapshot(ctx, name); !errors.Is(err, archive.ErrSnapshotCorrupt) {
		t.Fatalf("fetching a damaged snapshot: %v", err)
	}
	if _, err := os.Stat(other.Abs(name)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a damaged fetch left %s: %v", other.Abs(name), err)
	}
	// Removal keeps keep and drops the others of the sandbox.
	keep := "sandbox.dev-0123456789ab@2.tar"
	os.WriteFile(s.Abs("snapshots/"+keep), []byte("two"), 0o600)
	os.WriteFile(s.Abs("snapshots/sandbox.devx-0123456789ab@1.tar"), []byte("other sandbox"), 0o600)
	for _, n := range []string{"snapshots/" + keep, "snapshots/sandbox.devx-0123456789ab@1.tar"} {
		if err := s.PutSnapshot(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.RemoveSnapshots(ctx, "sandbox.dev-0123456789ab", keep, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckSnapshot(ctx, name); !errors.Is(err, archive.ErrSnapshotMissing) {
		t.Fatalf("removed snapshot still there: %v", err)
	}
	for _, n := range []string{"snapshots/" + keep, "snapshots/sandbox.devx-0123456789ab@1.tar"} {
		if err := s.CheckSnapshot(ctx, n); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
	if err := s.RemoveSnapshots(ctx, "sandbox.dev-0123456789ab", "", "snapshots/"+keep); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckSnapshot(ctx, "snapshots/"+keep); !errors.Is(err, archive.ErrSnapshotMissing) {
		t.Fatalf("snapshot removed by name still there: %v", err)
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
