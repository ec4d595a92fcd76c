//go:build unix

package archive

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/agentctl/agentctl/internal/seal"
)

// ConvertSnapshot rewrites the snapshot file path encrypted with
// writeKey (nil: in plaintext) when it is not already so, reading it
// with readKey; the tar, and so its digest, is unchanged. The new file
// replaces the old one atomically; a crash leaves a temporary file that
// RemoveSnapshotTemps removes.
func ConvertSnapshot(path string, readKey, writeKey *seal.Key) (err error) {
	file, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("converting snapshot: %w", err)
	}
	defer file.Close()
	prefix := make([]byte, seal.StreamMagicLen)
	n, _ := file.ReadAt(prefix, 0)
	if seal.IsStream(prefix[:n]) == (writeKey != nil) {
		return nil
	}
	r, err := openSnapshot(file, readKey)
	if err != nil {
		return fmt.Errorf("converting snapshot: %w", err)
	}
	tmp, err := os.OpenFile(tempName(filepath.Dir(path), filepath.Base(path)), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("converting snapshot: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 256<<10)
	var w io.Writer = bw
	var sw *seal.StreamWriter
	if writeKey != nil {
		if sw, err = writeKey.NewStreamWriter(bw); err != nil {
			return fmt.Errorf("converting snapshot %s: %w", path, err)
		}
		w = sw
	}
	if _, err = io.Copy(w, r); err != nil {
		return fmt.Errorf("converting snapshot %s: %w", path, err)
	}
	if sw != nil {
		if err = sw.Close(); err != nil {
			return fmt.Errorf("converting snapshot %s: %w", path, err)
		}
	}
	if err = bw.Flush(); err != nil {
		return fmt.Errorf("converting snapshot %s: %w", path, err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("converting snapshot %s: fsync: %w", path, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("converting snapshot %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("converting snapshot %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}
