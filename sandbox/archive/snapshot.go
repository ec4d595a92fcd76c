//go:build unix

package archive

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/internal/hashpipe"
	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// SnapshotInfo describes a written snapshot.
type SnapshotInfo struct {
	// Path is the snapshot file on the host.
	Path string `json:"path"`
	// Size is its size in bytes (of the tar when it is encrypted).
	Size int64 `json:"size"`
	// Digest is the digest of the file (of the tar when it is
	// encrypted), with SnapshotOptions.Digest: "blake3:<hex>", or the
	// bare hex SHA-256 as states with SHA-256 digests record it.
	Digest string `json:"digest"`
	// Members is the number of tar members.
	Members int `json:"members"`
}

// DefaultSnapshotMaxBytes is the most a snapshot file may hold when
// SnapshotOptions.MaxBytes is zero: the content a restore (Extract)
// accepts, so every snapshot written can be restored.
const DefaultSnapshotMaxBytes = hostfs.DefaultExtractMaxBytes

// ErrSnapshotTooLarge is returned (wrapped) when a snapshot would exceed
// its limits; the message names the limit and the largest files.
var ErrSnapshotTooLarge = errors.New("snapshot too large")

// SnapshotOptions tune SnapshotWith.
type SnapshotOptions struct {
	// Exclude are gitignore-like patterns (see Matcher) of entries left
	// out.
	Exclude []string
	// MaxBytes caps the snapshot file's size in bytes; 0 means
	// DefaultSnapshotMaxBytes.
	MaxBytes int64
	// Key, when not nil, encrypts the file (a sealed stream of chunks,
	// internal/seal): the tar is never on disk in plaintext. Size and
	// Digest are then those of the tar, which a restore checks after
	// decrypting.
	Key *seal.Key
	// Digest is the algorithm of SnapshotInfo.Digest (the state's,
	// state.State.DigestAlgorithm); empty is digest.BLAKE3.
	Digest digest.Algorithm
}

// Snapshot is SnapshotWith with the given exclude patterns and the
// default limits.
func Snapshot(ctx context.Context, sb sandbox.Sandbox, dir string, exclude []string, dst string) (SnapshotInfo, error) {
	return SnapshotWith(ctx, sb, dir, dst, SnapshotOptions{Exclude: exclude})
}

// SnapshotWith writes a plain (uncompressed) tar of directory dir of the
// sandbox workspace ("" for the whole workspace) to the host file dst,
// leaving out entries matched by opts.Exclude. Nothing sensitive is in a
// workspace by construction (ephemeral env lives only in exec
// environments), so nothing else is filtered. Plain tar, not gzip:
// archiving is then bound by the disk, not by a single compressing core.
//
// A workspace that is a host directory (HostWorkspace: the local
// provider, HostDir) is archived directly, sparse-aware: a file's holes
// take no room in the snapshot (PAX sparse format 1.0) and Restore
// writes them back as holes. Other providers' archives hold holes as
// zeros. FIFOs, sockets and devices are left out for every provider.
//
// The snapshot is bounded by what a restore accepts: at most
// opts.MaxBytes bytes (DefaultSnapshotMaxBytes, 16 GiB), 1,048,576
// entries, 1 TiB of sparse files and paths of MaxArchivePath bytes. Past
// a limit it fails with ErrSnapshotTooLarge (or ErrPathTooLong) naming
// the limit and the largest files, and leaves dst as it was.
//
// The file appears atomically: on Linux it is written as an unnamed
// O_TMPFILE file, so a crash leaves nothing behind, then linked beside dst
// and renamed over it, and the directory is synced. Where O_TMPFILE is
// not available a named temporary file is used; RemoveSnapshotTemps
// removes what a crash left of either.
func SnapshotWith(ctx context.Context, sb sandbox.Sandbox, dir, dst string, opts SnapshotOptions) (SnapshotInfo, error) {
	m, err := sandbox.CompileExclude(opts.Exclude)
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot: %w", err)
	}
	tmp, err := createSnapshotTemp(filepath.Dir(dst), filepath.Base(dst))
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot: %w", err)
	}
	defer tmp.discard()
	h := hashpipe.New(opts.Digest.New())
	defer h.Close()
	// Written through a buffer: the archive's headers and paddings are
	// 512-byte writes, one system call each without it. A plain snapshot
	// is buffered in the hash's own buffers (hashpipe.Tee: each byte
	// copied once), and on Linux a file's content goes from the
	// workspace into the snapshot in the kernel, its digest read back
	// from the snapshot (hostfs.FileAppender); an encrypted one hashes
	// the tar before it is sealed.
	// flush writes what is buffered, before the digest is taken.
	var out io.Writer
	var flush func() error
	if opts.Key == nil {
		out, flush = tmp.teeWriter(h)
	} else {
		bw := bufio.NewWriterSize(tmp.writer(), 256<<10)
		sw, err := opts.Key.NewStreamWriter(bw)
		if err != nil {
			return SnapshotInfo{}, fmt.Errorf("snapshot: %w", err)
		}
		out = io.MultiWriter(sw, h)
		flush = func() error {
			if err := sw.Close(); err != nil {
				return err
			}
			return bw.Flush()
		}
	}
	cw := &countWriter{w: out}
	b := newSnapshotBudget(opts.MaxBytes, cw)
	var n int
	if hw, ok := sb.(HostWorkspace); ok {
		err = hostfs.Archive(ctx, hw.WorkspaceDir(), dir, cw, hostfs.ArchiveOptions{Exclude: m.Match, Sparse: true, Reserve: b.reserve})
		n = b.members
	} else {
		var rc io.ReadCloser
		rc, err = sb.CopyOut(ctx, dir)
		if err != nil {
			return SnapshotInfo{}, fmt.Errorf("snapshot %s: read workspace: %w", sb.ID(), err)
		}
		n, err = filterTar(ctx, rc, cw, m, b)
		rc.Close()
	}
	if err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot %s: %w", sb.ID(), err)
	}
	// The digest, before commit closes the file it may read back.
	if err := flush(); err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot: writing %s: %w", dst, err)
	}
	sum := h.Sum()
	if err := h.Err(); err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot: reading %s back for its digest: %w", dst, err)
	}
	if err := tmp.commit(dst); err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot: %w", err)
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return SnapshotInfo{}, fmt.Errorf("snapshot: %w", err)
	}
	return SnapshotInfo{Path: dst, Size: cw.n, Digest: formatSnapshotDigest(opts.Digest, sum), Members: n}, nil
}

// formatSnapshotDigest is a snapshot's digest as a state records it:
// "blake3:<hex>", or for SHA-256 the bare hex, as agentctl recorded it
// before digests named their algorithm (so a state that keeps SHA-256
// digests stays readable by those versions).
func formatSnapshotDigest(alg digest.Algorithm, sum []byte) string {
	if alg.Name() == digest.SHA256 {
		return hex.EncodeToString(sum)
	}
	return alg.Format(sum)
}

// HostWorkspace is implemented by sandboxes whose workspace is a host
// directory; SnapshotWith archives it directly, sparse-aware.
type HostWorkspace interface {
	WorkspaceDir() *hostfs.Dir
}

// SnapshotFileName is a new file name for a snapshot of the sandbox
// whose file-safe address is base (state.SafeName): base, "@", a unique
// id and ".tar". Every snapshot gets its own file, so the one the state
// points to is never overwritten.
func SnapshotFileName(base string) string {
	return base + "@" + strconv.FormatInt(time.Now().UnixNano(), 36) + strconv.FormatUint(rand.Uint64()%1296, 36) + ".tar"
}

// RemoveOldSnapshots removes from dir the snapshot files of the sandbox
// whose file-safe address is base (named by SnapshotFileName, or base +
// ".tar" as earlier versions named them), except keep ("" keeps none). A
// missing dir is fine.
func RemoveOldSnapshots(dir, base, keep string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("removing old snapshots: %w", err)
	}
	var errs []error
	for _, e := range ents {
		n := e.Name()
		if n == keep || !e.Type().IsRegular() || !(n == base+".tar" || strings.HasPrefix(n, base+"@") && strings.HasSuffix(n, ".tar")) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing an old snapshot: %w", err))
		}
	}
	return errors.Join(errs...)
}

// snapshotTempInfix marks the temporary files snapshots are written to:
// "." + the snapshot's name + snapshotTempInfix + a random suffix.
const snapshotTempInfix = ".tmp-"

// snapshotTemp is a snapshot file being written.
type snapshotTemp struct {
	f *os.File
	// name is the named temporary file ("" for an unnamed O_TMPFILE one
	// until it is linked).
	name string
	dir  string
	base string
}

// commit syncs the file, whose writer was flushed, and puts it in place
// at dst.
func (t *snapshotTemp) commit(dst string) error {
	if err := t.f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dst, err)
	}
	if t.name == "" {
		name, err := linkTemp(t.f, t.dir, t.base)
		if err != nil {
			return err
		}
		t.name = name
	}
	if err := t.f.Close(); err != nil {
		return err
	}
	t.f = nil
	if err := os.Rename(t.name, dst); err != nil {
		return err
	}
	t.name = ""
	return nil
}

// discard removes what commit did not put in place.
func (t *snapshotTemp) discard() {
	if t.f != nil {
		t.f.Close()
	}
	if t.name != "" {
		os.Remove(t.name)
	}
}

// tempName is a fresh temporary file name for the snapshot base in dir.
func tempName(dir, base string) string {
	return filepath.Join(dir, "."+base+snapshotTempInfix+strconv.FormatUint(rand.Uint64(), 36))
}

// isSnapshotTemp reports whether a file name is one of a snapshot's
// temporary files.
func isSnapshotTemp(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, snapshotTempInfix)
}

// RemoveSnapshotTemps removes the temporary files that snapshots
// interrupted by a crash left in directory dir (a missing dir is fine)
// and returns their names. Only call it while holding the state lock, so
// that no snapshot is being written there.
func RemoveSnapshotTemps(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("snapshots: %w", err)
	}
	var removed []string
	var errs []error
	for _, e := range ents {
		if !e.Type().IsRegular() || !isSnapshotTemp(e.Name()) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing an interrupted snapshot: %w", err))
			continue
		}
		removed = append(removed, e.Name())
	}
	return removed, errors.Join(errs...)
}

// snapshotBudget enforces a snapshot's limits as it is written and
// remembers the largest files for the message.
type snapshotBudget struct {
	max        int64
	cw         *countWriter
	members    int
	sparse     int64
	largest    []sizedFile // by stored bytes, largest first
	sparsest   []sizedFile // sparse files by logical size
	maxMembers int
	maxSparse  int64
}

type sizedFile struct {
	name string
	size int64
}

// largestKept is how many of the largest files an error names.
const largestKept = 5

func newSnapshotBudget(max int64, cw *countWriter) *snapshotBudget {
	if max <= 0 {
		max = DefaultSnapshotMaxBytes
	}
	return &snapshotBudget{max: max, cw: cw, maxMembers: hostfs.DefaultExtractMaxMembers, maxSparse: hostfs.DefaultExtractMaxSparseBytes}
}

func keepLargest(list []sizedFile, f sizedFile) []sizedFile {
	i := len(list)
	for i > 0 && list[i-1].size < f.size {
		i--
	}
	if i >= largestKept {
		return list
	}
	list = slices.Insert(list, i, f)
	if len(list) > largestKept {
		list = list[:largestKept]
	}
	return list
}

func listFiles(list []sizedFile) string {
	parts := make([]string, len(list))
	for i, f := range list {
		parts[i] = fmt.Sprintf("%s (%s)", f.name, FormatBytes(f.size))
	}
	return strings.Join(parts, ", ")
}

// reserve is called before each member with the content bytes it adds
// and, for a sparse file, its logical size.
func (b *snapshotBudget) reserve(name string, stored, sparseSize int64) error {
	b.members++
	if b.members > b.maxMembers {
		return fmt.Errorf("the workspace has more than %d entries, the most a snapshot can restore: %w", b.maxMembers, ErrSnapshotTooLarge)
	}
	if stored > 0 {
		b.largest = keepLargest(b.largest, sizedFile{name, stored})
	}
	if sparseSize > 0 {
		b.sparsest = keepLargest(b.sparsest, sizedFile{name, sparseSize})
		if b.sparse += sparseSize; b.sparse > b.maxSparse {
			return fmt.Errorf("its sparse files would exceed %s of logical size, the most a snapshot can restore; the largest sparse files: %s; delete them or move them out of the workspace: %w",
				FormatBytes(b.maxSparse), listFiles(b.sparsest), ErrSnapshotTooLarge)
		}
	}
	// A header takes a few blocks besides the name (written up to three
	// times for a long sparse file's name).
	if b.cw.n+stored+3*int64(len(name))+3072 > b.max {
		return fmt.Errorf("the snapshot would exceed its limit of %s at %s; the largest files so far: %s; delete them or move them out of the workspace: %w",
			FormatBytes(b.max), name, listFiles(b.largest), ErrSnapshotTooLarge)
	}
	return nil
}

// FormatBytes renders a byte count for messages: "512 bytes", "3.0 KiB",
// "16 GiB".
func FormatBytes(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	if n < 1024 {
		return fmt.Sprintf("%d bytes", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d %s", int64(v), units[u])
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}

// Restore extracts the snapshot file src into the sandbox's workspace
// root through CopyIn, so the provider's safe extraction applies.
func Restore(ctx context.Context, sb sandbox.Sandbox, src string) error {
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
// excluded directories) that m matches, and FIFOs, sockets and devices,
// which no extractor accepts, within budget b. It returns the members
// written.
func filterTar(ctx context.Context, r io.Reader, w io.Writer, m *sandbox.Matcher, b *snapshotBudget) (int, error) {
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
		switch hdr.Typeflag {
		case tar.TypeFifo, tar.TypeChar, tar.TypeBlock:
			continue
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
			if len(name) > hostfs.MaxArchivePath {
				return n, fmt.Errorf("archive %s…: the path is %d bytes long, %d directories deep; archives keep paths up to %d bytes: move or remove the deeply nested directories: %w",
					name[:64], len(name), strings.Count(name, "/"), hostfs.MaxArchivePath, hostfs.ErrPathTooLong)
			}
		}
		stored := int64(0)
		if hdr.Typeflag == tar.TypeReg {
			stored = hdr.Size
		}
		if err := b.reserve(name, stored, 0); err != nil {
			return n, err
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

// AppendRange is c.w's (hostfs.FileAppender), counted; false when c.w
// has none.
func (c *countWriter) AppendRange(size int64) (hostfs.FileRange, bool, error) {
	fa, ok := c.w.(hostfs.FileAppender)
	if !ok {
		return hostfs.FileRange{}, false, nil
	}
	rg, ok, err := fa.AppendRange(size)
	if ok {
		c.n += size
	}
	return rg, ok, err
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
