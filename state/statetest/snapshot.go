package statetest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentctl/agentctl/sandbox/archive"
	"github.com/agentctl/agentctl/state"
)

// putSnapshot writes data as the snapshot name on s's machine (at
// Abs(name), as the engine does) and stores it.
func putSnapshot(t *testing.T, s state.Store, name string, data []byte) {
	t.Helper()
	path := s.Abs(name)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.PutSnapshot(ctx(t), name); err != nil {
		t.Fatalf("PutSnapshot %s: %v", name, err)
	}
}

// Snapshot names of the tests: two of one sandbox, one of another whose
// file-safe address starts the same.
const (
	snapBase  = "sandbox.dev-0123456789ab"
	snapOld   = "snapshots/" + snapBase + "@1.tar"
	snapNew   = snapBase + "@2.tar"
	snapOther = "snapshots/sandbox.devx-0123456789ab@1.tar"
)

var snapshotTests = []subtest{
	{"a stored snapshot is fetched byte for byte by another client", func(t *testing.T, h Harness) {
		data := make([]byte, 3<<20+12345) // more than a few chunks of any size
		rand.Read(data)
		putSnapshot(t, h.Open(t, nil), snapOld, data)
		other := h.Open(t, nil)
		if err := other.CheckSnapshot(ctx(t), snapOld); err != nil {
			t.Fatalf("CheckSnapshot from another client: %v", err)
		}
		if err := other.FetchSnapshot(ctx(t), snapOld); err != nil {
			t.Fatalf("FetchSnapshot: %v", err)
		}
		got, err := os.ReadFile(other.Abs(snapOld))
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("the fetched snapshot differs (%d bytes of %d, %v)", len(got), len(data), err)
		}
	}},
	{"a snapshot never stored is missing", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		if err := s.CheckSnapshot(ctx(t), snapOld); !errors.Is(err, archive.ErrSnapshotMissing) {
			t.Fatalf("CheckSnapshot: %v, want archive.ErrSnapshotMissing", err)
		}
		if err := s.FetchSnapshot(ctx(t), snapOld); !errors.Is(err, archive.ErrSnapshotMissing) {
			t.Fatalf("FetchSnapshot: %v, want archive.ErrSnapshotMissing", err)
		}
	}},
	{"removing a sandbox's snapshots keeps the one kept and other sandboxes'", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		putSnapshot(t, s, snapOld, []byte("one"))
		putSnapshot(t, s, "snapshots/"+snapNew, []byte("two"))
		putSnapshot(t, s, snapOther, []byte("other sandbox"))
		other := h.Open(t, nil)
		if err := other.RemoveSnapshots(ctx(t), snapBase, snapNew, ""); err != nil {
			t.Fatal(err)
		}
		if err := s.CheckSnapshot(ctx(t), snapOld); !errors.Is(err, archive.ErrSnapshotMissing) {
			t.Fatalf("the removed snapshot: %v, want archive.ErrSnapshotMissing", err)
		}
		for _, name := range []string{"snapshots/" + snapNew, snapOther} {
			if err := s.CheckSnapshot(ctx(t), name); err != nil {
				t.Fatalf("%s was to be kept: %v", name, err)
			}
		}
	}},
	{"a snapshot recorded under another name is removed by that name", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		putSnapshot(t, s, "snapshots/"+snapNew, []byte("two"))
		if err := h.Open(t, nil).RemoveSnapshots(ctx(t), "sandbox.elsewhere-0123456789ab", "", "snapshots/"+snapNew); err != nil {
			t.Fatal(err)
		}
		if err := s.CheckSnapshot(ctx(t), "snapshots/"+snapNew); !errors.Is(err, archive.ErrSnapshotMissing) {
			t.Fatalf("the snapshot removed by name: %v, want archive.ErrSnapshotMissing", err)
		}
	}},
}
