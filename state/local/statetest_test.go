package local

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/statetest"
)

// TestStore holds the local directory to the behaviour of every store.
func TestStore(t *testing.T) {
	statetest.TestStore(t, func(t *testing.T) statetest.Harness {
		dir := filepath.Join(t.TempDir(), ".agentctl")
		return statetest.Harness{
			// Every client opens the same directory, as the commands do.
			Open: func(t *testing.T, keys *seal.Keys) state.Store {
				d, err := OpenDir(dir, WithEncryption(keys), WithAgentctlVersion("test"))
				if err != nil {
					t.Fatal(err)
				}
				return d
			},
			// Removing the lock file by hand loses the lock: the next
			// locker locks a new file, and the holder's info stays.
			LoseLock: func(t *testing.T, s state.Store, _ state.Lease) {
				if err := os.Remove(s.(*Dir).LockPath()); err != nil {
					t.Fatal(err)
				}
			},
			Raw: func(t *testing.T) []byte {
				var all bytes.Buffer
				err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
					if err != nil || e.IsDir() {
						return err
					}
					data, err := os.ReadFile(p)
					all.Write(data)
					return err
				})
				if err != nil {
					t.Fatal(err)
				}
				return all.Bytes()
			},
			// A crash during an append leaves part of its line.
			TearJournal: func(t *testing.T, name string) {
				path := filepath.Join(dir, filepath.FromSlash(name))
				fi, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(path, fi.Size()-5); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}
