package testfiles

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// DescribeTree describes every entry under root (not root itself), by
// its path relative to root, with what a copy or an extraction must
// reproduce: "dir MODE", "symlink TARGET", or "file MODE SIZE HASH
// MTIME" (the first 8 bytes of the content's SHA-256, the modification
// time in RFC 3339 with nanoseconds, UTC).
func DescribeTree(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		st, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case st.IsDir():
			out[rel] = fmt.Sprintf("dir %o", st.Mode().Perm())
		case st.Mode()&fs.ModeSymlink != 0:
			tgt, _ := os.Readlink(p)
			out[rel] = "symlink " + tgt
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			out[rel] = fmt.Sprintf("file %o %d %s %s", st.Mode().Perm(), st.Size(), hex.EncodeToString(sum[:8]), st.ModTime().UTC().Format(time.RFC3339Nano))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
