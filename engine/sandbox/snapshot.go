package sandbox

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// SnapshotInfo describes a written snapshot.
type SnapshotInfo struct {
	// Path is the snapshot file on the host.
	Path string `json:"path"`
	// Size is its size in bytes.
	Size int64 `json:"size"`
	// SHA256 is the hex digest of the file.
	SHA256 string `json:"sha256"`
	// Members is the number of tar members.
	Members int `json:"members"`
}

// Snapshot writes a plain (uncompressed) tar of directory dir of the
// sandbox workspace ("" for the whole workspace) to the host file dst,
// leaving out entries matched by the exclude patterns (gitignore-like,
// see Matcher). The file appears atomically: it is written to a
// temporary file beside dst, synced, renamed over dst, and the directory
// is synced. Nothing sensitive is in a workspace by construction
// (ephemeral env lives only in exec environments), so nothing else is
// filtered. Plain tar, not gzip: archiving is then bound by the disk, not
// by a single compressing core.
func Snapshot(ctx context.Context, sb Sandbox, dir string, exclude []string, dst string) (SnapshotInfo, error) {
	m, err := CompileExclude(exclude)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot: %w", err)
	}
	rc, err := sb.CopyOut(ctx, dir)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot %s: read workspace: %w", sb.ID(), err)
	}
	defer rc.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot: %w", err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot: %w", err)
	}
	defer func() {
		if tmp != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(tmp, h)}
	n, err := filterTar(ctx, rc, cw, m)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot %s: %w", sb.ID(), err)
	}
	if err := tmp.Sync(); err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot: sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot: %w", err)
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot: %w", err)
	}
	tmp = nil
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot: %w", err)
	}
	return SnapshotInfo{Path: dst, Size: cw.n, SHA256: hex.EncodeToString(h.Sum(nil)), Members: n}, nil
}

// Restore extracts the snapshot file src into the sandbox's workspace
// root through CopyIn, so the provider's safe extraction applies.
func Restore(ctx context.Context, sb Sandbox, src string) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("restore %s: %w", sb.ID(), err)
	}
	defer f.Close()
	if err := sb.CopyIn(ctx, "", f); err != nil {
		return fmt.Errorf("restore %s from %s: %w", sb.ID(), src, err)
	}
	return nil
}

// filterTar copies a tar stream, dropping members (and everything below
// excluded directories) that m matches. It returns the members written.
func filterTar(ctx context.Context, r io.Reader, w io.Writer, m *Matcher) (int, error) {
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	var excludedDirs []string
	n := 0
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return n, tw.Close()
		}
		if err != nil {
			return n, fmt.Errorf("read archive: %w", err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "./"), "/")
		if name != "" && name != "." {
			if under(name, excludedDirs) {
				continue
			}
			isDir := hdr.Typeflag == tar.TypeDir
			if m.Match(name, isDir) {
				if isDir {
					excludedDirs = append(excludedDirs, name)
				}
				continue
			}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return n, err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return n, err
		}
		n++
	}
}

func under(name string, dirs []string) bool {
	for _, d := range dirs {
		if strings.HasPrefix(name, d+"/") {
			return true
		}
	}
	return false
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n += int64(k)
	return k, err
}

// syncDir fsyncs a directory so a rename in it is durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}
