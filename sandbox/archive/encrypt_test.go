//go:build unix

package archive

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/internal/seal/sealtest"
	"github.com/agentctl/agentctl/internal/testfiles"
	"github.com/agentctl/agentctl/sandbox"
)

func newKey(t *testing.T) *seal.Key {
	t.Helper()
	k, _ := sealtest.NewKey(t)
	return k
}

func TestEncryptedSnapshot(t *testing.T) {
	ctx := context.Background()
	const canary = "canary-snapshot-91c2"
	h := newHostDir(t)
	big := strings.Repeat("0123456789abcdef", 20000) // several chunks
	testfiles.WriteTree(t, h.Path(), map[string]string{"notes.txt": canary + "\n", "big.txt": big, "d/secret.env": "TOKEN=s3cr3t-value\n"})
	key := newKey(t)
	dst := filepath.Join(t.TempDir(), "snapshots", "sandbox.a.tar")
	info, err := SnapshotWith(ctx, h, "", dst, SnapshotOptions{Key: key})
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, []byte(canary)) || bytes.Contains(data, []byte("notes.txt")) || !seal.IsStream(data) {
		t.Fatal("the snapshot file holds plaintext")
	}
	// Found through the encryption, without the holes or the file read whole.
	hits, err := SensitiveMembersWith(ctx, dst, key, sandbox.NewScrubber([]string{"s3cr3t-value"}))
	if err != nil || len(hits) != 1 || hits[0] != "d/secret.env" {
		t.Errorf("SensitiveMembersWith = %q, %v", hits, err)
	}
	h2 := newHostDir(t)
	if err := RestoreSnapshotWith(ctx, h2, dst, info.Digest, key); err != nil {
		t.Fatal(err)
	}
	if got := readWS(t, h2, "notes.txt"); got != canary+"\n" {
		t.Errorf("notes.txt = %q", got)
	}
	if got := readWS(t, h2, "big.txt"); got != big {
		t.Errorf("big.txt differs (%d bytes)", len(got))
	}
	if err := RestoreSnapshotWith(ctx, newHostDir(t), dst, info.Digest, nil); !errors.Is(err, seal.ErrNoKey) {
		t.Errorf("without the key: %v", err)
	}
	if err := RestoreSnapshotWith(ctx, newHostDir(t), dst, info.Digest, newKey(t)); !errors.Is(err, seal.ErrWrongKey) {
		t.Errorf("with another key: %v", err)
	}
	// Cut short, even at a chunk boundary: refused as corrupt.
	for _, cut := range []int{len(data) - 1, len(data) - (len(data)-100)%(seal.ChunkSize+16)} {
		short := filepath.Join(t.TempDir(), "short.tar")
		os.WriteFile(short, data[:cut], 0o600)
		if err := RestoreSnapshotWith(ctx, newHostDir(t), short, info.Digest, key); !errors.Is(err, ErrSnapshotCorrupt) {
			t.Errorf("cut at %d of %d: %v", cut, len(data), err)
		}
	}
	// An unencrypted snapshot (written before the key was set) is read
	// with the key configured.
	plain := filepath.Join(t.TempDir(), "plain.tar")
	pinfo, err := Snapshot(ctx, h, "", nil, plain)
	if err != nil {
		t.Fatal(err)
	}
	if pinfo.Digest != info.Digest {
		t.Errorf("the digest is the tar's: %s, encrypted %s", pinfo.Digest, info.Digest)
	}
	if err := RestoreSnapshotWith(ctx, newHostDir(t), plain, pinfo.Digest, key); err != nil {
		t.Errorf("unencrypted snapshot with a key: %v", err)
	}
}
