//go:build unix

package manifest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/internal/hashpipe"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// MaterializeResult reports what Materialize did.
type MaterializeResult struct {
	// Digests holds the content digest of every entry, by entry path.
	Digests map[string]string
	// Applied lists the entries written this time, in declaration order:
	// new or changed ones, and later entries overlapping a written one.
	Applied []string
	// Unchanged lists the entries whose digest matched prev.
	Unchanged []string
	// Removed lists entry paths in prev that the manifest no longer has.
	// Their files are left in the workspace.
	Removed []string
}

// DefaultParallel is the materialization concurrency when none is given.
const DefaultParallel = 4

// Materialize writes the manifest's entries into the sandbox workspace
// and returns their content digests. prev holds the digests recorded by
// the previous materialization (nil for a new sandbox): an entry whose
// digest is unchanged is skipped, unless an earlier overlapping entry
// was written this time. Entries apply in declaration order; entries
// whose paths do not overlap (neither is a prefix of the other) apply
// concurrently, at most parallel at a time (<= 0: DefaultParallel).
// Trees (local_dir, git_repo) go in file by file where the sandbox can
// take a host tree directly (sandbox.HostTreeCopier: the local provider),
// otherwise as tar streams through Sandbox.CopyIn; either way with the
// safe-extraction rules and the same result. A local_dir is read and
// hashed at most once: its digest comes from the cache when its tree is
// unchanged since a plan hashed it, or is computed by the copy.
//
// On error the returned result holds what was done so far.
func Materialize(ctx context.Context, sb sandbox.Sandbox, m Manifest, prev map[string]string, parallel int) (MaterializeResult, error) {
	res := MaterializeResult{Digests: map[string]string{}}
	if err := Validate(m); err != nil {
		return res, err
	}
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	n := len(m.Entries)
	paths := make([]string, n)
	for i, e := range m.Entries {
		paths[i], _ = sandbox.CheckEntryPath(e.Path)
	}
	done := make([]chan struct{}, n)
	applied := make([]bool, n)
	digests := make([]string, n)
	for i := range done {
		done[i] = make(chan struct{})
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallel)
	for i := range m.Entries {
		g.Go(func() error {
			defer close(done[i])
			force := false
			for j := range i {
				if overlaps(paths[j], paths[i]) {
					select {
					case <-done[j]:
					case <-gctx.Done():
						return gctx.Err()
					}
					force = force || applied[j]
				}
			}
			e := m.Entries[i]
			e.Path, e.alg = paths[i], m.Digests
			old, had := prev[e.Path]
			var d string
			var err error
			if had && !force {
				// The plan of this apply has just digested the tree: its
				// digest is not taken again (once).
				var ok bool
				if d, ok = m.DigestCache.confirmedDigest(e); !ok {
					d, err = entryDigest(gctx, e, m.DigestCache)
				}
				if err != nil {
					return err
				}
				if d == old {
					digests[i] = d
					return nil
				}
			}
			d, err = applyEntry(gctx, sb, e, m.DigestCache)
			if err != nil {
				return err
			}
			digests[i], applied[i] = d, true
			return nil
		})
	}
	err := g.Wait()
	for i, p := range paths {
		if digests[i] == "" {
			continue
		}
		res.Digests[p] = digests[i]
		if applied[i] {
			res.Applied = append(res.Applied, p)
		} else {
			res.Unchanged = append(res.Unchanged, p)
		}
	}
	res.Removed = RemovedEntries(m, prev)
	return res, err
}

// RemovedEntries lists, sorted, the entry paths of prev that m no longer
// declares.
func RemovedEntries(m Manifest, prev map[string]string) []string {
	have := map[string]bool{}
	for _, e := range m.Entries {
		p, _ := sandbox.CheckEntryPath(e.Path)
		have[p] = true
	}
	var out []string
	for _, p := range slices.Sorted(maps.Keys(prev)) {
		if !have[p] {
			out = append(out, p)
		}
	}
	return out
}

// overlaps reports whether one workspace path is the other or lies
// beneath it.
func overlaps(a, b string) bool {
	return a == b || a == "." || b == "." || strings.HasPrefix(b, a+"/") || strings.HasPrefix(a, b+"/")
}

// Validate checks entry paths and required fields.
func Validate(m Manifest) error {
	seen := map[string]int{}
	for i, e := range m.Entries {
		p, err := sandbox.CheckEntryPath(e.Path)
		if err != nil {
			return fmt.Errorf("manifest entry %s %q: %w", e.Kind, e.Path, err)
		}
		if j, dup := seen[p]; dup {
			return fmt.Errorf("manifest entry %s %q: the same path as entry %d (%s); give each entry its own path", e.Kind, e.Path, j+1, m.Entries[j].Kind)
		}
		seen[p] = i
		switch e.Kind {
		case EntryFile, EntryDir:
		case EntryLocalFile, EntryLocalDir:
			if e.Source == "" {
				return fmt.Errorf("manifest entry %s %q: source is required", e.Kind, e.Path)
			}
		case EntryGitRepo:
			if e.Repo == "" {
				return fmt.Errorf("manifest entry %s %q: repo is required", e.Kind, e.Path)
			}
			if e.Subpath != "" {
				if _, err := sandbox.CheckEntryPath(e.Subpath); err != nil {
					return fmt.Errorf("manifest entry %s %q: subpath: %w", e.Kind, e.Path, err)
				}
			}
		default:
			return fmt.Errorf("manifest entry %q: unknown kind %q (want file, dir, local_file, local_dir or git_repo)", e.Path, e.Kind)
		}
		if p == "." && e.Kind != EntryDir && e.Kind != EntryLocalDir && e.Kind != EntryGitRepo {
			return fmt.Errorf("manifest entry %s %q: a file cannot be the workspace root; give it a name", e.Kind, e.Path)
		}
	}
	return nil
}

// digester builds a canonical, length-prefixed encoding of fields and
// hashes it: h receives the encoding, directly or, for a tree's content,
// through a hashpipe.Writer that hashes on a goroutine of its own while
// the tree is read. Declarations (file, dir, git_repo, the manifest) are
// hashed with SHA-256; what is read from the host (local_file,
// local_dir) with the manifest's content digest algorithm
// (Manifest.Digests).
type digester struct {
	h    io.Writer
	hash hash.Hash
	pipe *hashpipe.Writer
	alg  digest.Algorithm
}

func newDigester(kind EntryKind, p string) *digester {
	return newDigesterWith(digest.SHA256, kind, p)
}

func newDigesterWith(alg digest.Algorithm, kind EntryKind, p string) *digester {
	h := alg.New()
	d := &digester{h: h, hash: h, alg: alg}
	d.entry(kind, p)
	return d
}

// newTreeDigester is the digester of e's content (a tree), hashed
// concurrently with the reading; close it when done.
func newTreeDigester(e Entry) *digester {
	pipe := hashpipe.New(e.alg.New())
	d := &digester{h: pipe, pipe: pipe, alg: e.alg}
	d.entry(e.Kind, e.Path)
	return d
}

func (d *digester) entry(kind EntryKind, p string) {
	d.str("agentctl-entry-v1")
	d.str(string(kind))
	d.str(p)
}

func (d *digester) str(s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	d.h.Write(n[:])
	d.h.Write([]byte(s))
}

// sum is the digest; a tree digester cannot be used afterwards.
func (d *digester) sum() string {
	if d.pipe != nil {
		return d.alg.Format(d.pipe.Sum())
	}
	return d.alg.Format(d.hash.Sum(nil))
}

// close releases a tree digester's goroutine (after sum, or instead of
// it on an error).
func (d *digester) close() {
	if d.pipe != nil {
		d.pipe.Close()
	}
}

// EntryDigest computes an entry's content digest without writing
// anything: for file its path, mode and content; for dir its path; for
// local_file and local_dir the source's names, sanitized modes and
// contents (not timestamps), after excludes; for git_repo the repository
// URL, ref, resolved commit and subpath (one `git ls-remote`).
func EntryDigest(ctx context.Context, e Entry) (string, error) {
	return entryDigest(ctx, e, nil)
}

// entryDigest is EntryDigest with a local_dir's digest taken from cache
// when its tree is unchanged.
func entryDigest(ctx context.Context, e Entry, cache *DigestCache) (string, error) {
	p, err := sandbox.CheckEntryPath(e.Path)
	if err != nil {
		return "", fmt.Errorf("manifest entry %s %q: %w", e.Kind, e.Path, err)
	}
	e.Path = p
	switch e.Kind {
	case EntryFile:
		return fileDigest(e), nil
	case EntryDir:
		return newDigester(e.Kind, e.Path).sum(), nil
	case EntryLocalFile:
		return localFileDigest(e)
	case EntryLocalDir:
		return cache.localDirDigest(func(seen *signer) (string, error) {
			dg := newTreeDigester(e)
			defer dg.close()
			if err := localDirTar(ctx, e, io.Discard, dg, seen); err != nil {
				return "", err
			}
			return dg.sum(), nil
		}, e)
	case EntryGitRepo:
		url, err := gitURL(e)
		if err != nil {
			return "", err
		}
		commit, err := gitResolve(ctx, e, url)
		if err != nil {
			return "", err
		}
		return gitDigest(e, url, commit), nil
	}
	return "", fmt.Errorf("manifest entry %q: unknown kind %q", e.Path, e.Kind)
}

func fileMode(m uint32) fs.FileMode {
	if m == 0 {
		return 0o644
	}
	return fs.FileMode(hostfs.SanitizeMode(int64(m)))
}

func fileDigest(e Entry) string {
	d := newDigester(e.Kind, e.Path)
	d.str(strconv.FormatUint(uint64(fileMode(e.Mode)), 8))
	d.str(string(e.Content))
	return d.sum()
}

func gitDigest(e Entry, url, commit string) string {
	d := newDigester(e.Kind, e.Path)
	d.str(url)
	d.str(e.Ref)
	d.str(commit)
	d.str(e.Subpath)
	return d.sum()
}

// applyEntry writes one entry and returns its digest.
func applyEntry(ctx context.Context, sb sandbox.Sandbox, e Entry, cache *DigestCache) (string, error) {
	wrap := func(err error) error {
		if err == nil {
			return nil
		}
		return fmt.Errorf("manifest entry %s %q: %w", e.Kind, e.Path, err)
	}
	switch e.Kind {
	case EntryFile:
		// Through CopyIn like every other entry, so an existing file is
		// replaced with the declared mode.
		err := copyInFile(ctx, sb, e.Path, int64(len(e.Content)), int64(fileMode(e.Mode)), time.Now(), bytes.NewReader(e.Content))
		if err != nil {
			return "", wrap(err)
		}
		return fileDigest(e), nil
	case EntryDir:
		if err := sb.Mkdir(ctx, e.Path); err != nil {
			return "", wrap(err)
		}
		return newDigester(e.Kind, e.Path).sum(), nil
	case EntryLocalFile:
		return applyLocalFile(ctx, sb, e)
	case EntryLocalDir:
		return applyLocalDir(ctx, sb, e, cache)
	case EntryGitRepo:
		return applyGitRepo(ctx, sb, e)
	}
	return "", wrap(errors.New("unknown kind"))
}

// applyLocalDir copies a local_dir into the workspace and returns its
// digest. The tree is hashed at most once and walked once by the copy:
// when the cache holds the digest of the tree as it is now (a plan just
// computed it), the copy does not hash it and checks that what it copied
// still has that signature (a tree that changed meanwhile is copied
// again, hashed); otherwise the copy hashes what it copies, and the
// digest is remembered under the signature of what it read (remember),
// so the next plan does not read it.
func applyLocalDir(ctx context.Context, sb sandbox.Sandbox, e Entry, cache *DigestCache) (string, error) {
	sig := cache.signatureBefore(e)
	if d, ok := cache.lookup(e, sig); ok {
		seen := cache.signer()
		if err := copyLocalDir(ctx, sb, e, nil, seen); err != nil {
			return "", err
		}
		if seen.is(sig) {
			return d, nil
		}
	}
	seen := cache.signer()
	d, err := copyLocalDirHashed(ctx, sb, e, true, seen)
	if errors.Is(err, hostfs.ErrChangedWhileCopied) {
		// A file changed between its copy and its hashing: copy the tree
		// again, hashing exactly the bytes copied.
		seen = cache.signer()
		d, err = copyLocalDirHashed(ctx, sb, e, false, seen)
	}
	if err != nil {
		return "", err
	}
	cache.remember(e, d, seen)
	return d, nil
}

// copyLocalDirHashed copies a local_dir and returns the digest of what it
// copied. With kernel, a sandbox that takes host trees copies files in
// the kernel and the digest's goroutine reads them again to hash them
// (hostfs.FileDigest): a file that changed in between is
// hostfs.ErrChangedWhileCopied.
func copyLocalDirHashed(ctx context.Context, sb sandbox.Sandbox, e Entry, kernel bool, seen *signer) (string, error) {
	dg := newTreeDigester(e)
	defer dg.close()
	if !kernel {
		// Hidden from the copy: it hashes what it reads and writes.
		dg.h = struct{ io.Writer }{dg.h}
	}
	if err := copyLocalDir(ctx, sb, e, dg, seen); err != nil {
		return "", err
	}
	d := dg.sum()
	if err := dg.pipe.Err(); err != nil {
		return "", fmt.Errorf("manifest entry %s %q: hashing %s: %w", e.Kind, e.Path, e.Source, err)
	}
	return d, nil
}

// copyLocalDir copies a local_dir source (excludes applied, symlinks and
// special files refused) into the workspace, feeding dg and seen when
// they are set: directly where the sandbox takes host trees, as a tar
// stream otherwise.
func copyLocalDir(ctx context.Context, sb sandbox.Sandbox, e Entry, dg *digester, seen *signer) error {
	tc, ok := sb.(sandbox.HostTreeCopier)
	if !ok {
		err := copyInStream(ctx, sb, e.Path, func(w io.Writer) error {
			return localDirTar(ctx, e, w, dg, seen)
		})
		if err != nil {
			return fmt.Errorf("manifest entry %s %q: %w", e.Kind, e.Path, err)
		}
		return nil
	}
	if _, err := checkSource(e, true); err != nil {
		return err
	}
	m, err := sandbox.CompileExclude(e.Exclude)
	if err != nil {
		return fmt.Errorf("manifest entry %s %q: %w", e.Kind, e.Path, err)
	}
	t := sandbox.HostTree{Root: e.Source, Exclude: m.Match, Strict: true}
	if dg != nil {
		t.Digest = dg.h
	}
	if seen != nil {
		t.Observe = seen.record
	}
	if err := tc.CopyTreeIn(ctx, e.Path, t); err != nil {
		if errors.Is(err, hostfs.ErrSpecialFile) {
			return specialFileErr(e, err)
		}
		return fmt.Errorf("manifest entry %s %q: copying %s into the workspace: %w", e.Kind, e.Path, e.Source, err)
	}
	return nil
}

// specialFileErr is the error for a symlink or special file in a
// local_dir source.
func specialFileErr(e Entry, err error) error {
	return fmt.Errorf("manifest entry %s %q: source %s: %w; only regular files and directories are copied: exclude it or replace it with a copy", e.Kind, e.Path, e.Source, err)
}

// errCopyInStopped is what the producer of a CopyIn stream gets when
// CopyIn stopped reading.
var errCopyInStopped = errors.New("copy in stopped")

// copyInStream runs produce into a pipe that sb.CopyIn consumes. The
// error is the producer's, or CopyIn's when the producer only failed
// because CopyIn stopped reading (a refused member).
func copyInStream(ctx context.Context, sb sandbox.Sandbox, dir string, produce func(io.Writer) error) error {
	pr, pw := io.Pipe()
	var perr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		perr = produce(pw)
		pw.CloseWithError(perr)
	}()
	err := sb.CopyIn(ctx, dir, pr)
	pr.CloseWithError(errCopyInStopped)
	wg.Wait()
	if perr != nil && (err == nil || !errors.Is(perr, errCopyInStopped)) {
		return perr
	}
	return err
}

// checkSource refuses a local source that is a symlink or of the wrong type.
func checkSource(e Entry, wantDir bool) (fs.FileInfo, error) {
	st, err := os.Lstat(e.Source)
	if err != nil {
		return nil, fmt.Errorf("manifest entry %s %q: source: %w", e.Kind, e.Path, err)
	}
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		return nil, fmt.Errorf("manifest entry %s %q: source %s is a symlink; point source at the real path", e.Kind, e.Path, e.Source)
	case wantDir && !st.IsDir():
		return nil, fmt.Errorf("manifest entry %s %q: source %s is not a directory; use local_file for a single file", e.Kind, e.Path, e.Source)
	case !wantDir && !st.Mode().IsRegular():
		return nil, fmt.Errorf("manifest entry %s %q: source %s is not a regular file", e.Kind, e.Path, e.Source)
	}
	return st, nil
}

// openSource opens a local_file source, refusing at once (without
// blocking on a FIFO) anything that is not a regular file, even if the
// source changed since checkSource looked.
func openSource(e Entry) (*os.File, fs.FileInfo, error) {
	if _, err := checkSource(e, false); err != nil {
		return nil, nil, err
	}
	f, err := os.OpenFile(e.Source, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("manifest entry %s %q: %w", e.Kind, e.Path, err)
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		err = fmt.Errorf("source %s is %s, not a regular file", e.Source, sandbox.FileTypeName(st.Mode()))
	}
	if err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("manifest entry %s %q: %w", e.Kind, e.Path, err)
	}
	return f, st, nil
}

func localFileDigest(e Entry) (string, error) {
	f, st, err := openSource(e)
	if err != nil {
		return "", err
	}
	defer f.Close()
	d := newDigesterWith(e.alg, e.Kind, e.Path)
	d.str(strconv.FormatUint(uint64(hostfs.SanitizeMode(int64(st.Mode().Perm()))), 8))
	h := e.alg.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("manifest entry %s %q: read %s: %w", e.Kind, e.Path, e.Source, err)
	}
	d.str(hex.EncodeToString(h.Sum(nil)))
	return d.sum(), nil
}

func applyLocalFile(ctx context.Context, sb sandbox.Sandbox, e Entry) (string, error) {
	digest, err := localFileDigest(e)
	if err != nil {
		return "", err
	}
	f, st, err := openSource(e)
	if err != nil {
		return "", err
	}
	defer f.Close()
	err = copyInFile(ctx, sb, e.Path, st.Size(), int64(fileMode(uint32(st.Mode().Perm()))), st.ModTime(), f)
	if err != nil {
		return "", fmt.Errorf("manifest entry %s %q: %w", e.Kind, e.Path, err)
	}
	return digest, nil
}

// copyInFile writes one file into the workspace as a one-member tar
// stream through CopyIn.
func copyInFile(ctx context.Context, sb sandbox.Sandbox, p string, size, mode int64, mtime time.Time, r io.Reader) error {
	return copyInStream(ctx, sb, path.Dir(p), func(w io.Writer) error {
		tw := tar.NewWriter(w)
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: path.Base(p), Size: size, Mode: mode, ModTime: mtime.Truncate(time.Second)}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if n, err := io.CopyN(tw, r, size); err != nil {
			return fmt.Errorf("read %d of %d bytes: %w", n, size, err)
		}
		return tw.Close()
	})
}

// localDirTar archives a local_dir source (excludes applied, symlinks and
// special files refused) to w, feeding the digest and the signer when
// they are set.
func localDirTar(ctx context.Context, e Entry, w io.Writer, dg *digester, seen *signer) error {
	if _, err := checkSource(e, true); err != nil {
		return err
	}
	m, err := sandbox.CompileExclude(e.Exclude)
	if err != nil {
		return fmt.Errorf("manifest entry %s %q: %w", e.Kind, e.Path, err)
	}
	d, err := hostfs.OpenRoot(e.Source)
	if err != nil {
		return fmt.Errorf("manifest entry %s %q: %w", e.Kind, e.Path, err)
	}
	defer d.Close()
	opts := hostfs.ArchiveOptions{Exclude: m.Match, Strict: true, SanitizeModes: true}
	if dg != nil {
		opts.Digest = dg.h
	}
	if seen != nil {
		opts.Observe = seen.record
	}
	err = hostfs.Archive(ctx, d, ".", w, opts)
	if errors.Is(err, hostfs.ErrSpecialFile) {
		return specialFileErr(e, err)
	}
	if err != nil {
		return fmt.Errorf("manifest entry %s %q: source %s: %w", e.Kind, e.Path, e.Source, err)
	}
	return nil
}

// Digest combines the root, the entries in declaration order
// (kind, path and content digest from entryDigests) and the persisted env
// into the manifest digest that sandbox plans and run digests use.
// EphemeralEnv never enters it. An entry missing from entryDigests
// contributes its declaration only.
func Digest(m Manifest, entryDigests map[string]string) string {
	sha := sha256.New()
	d := &digester{h: sha, hash: sha, alg: digest.SHA256}
	d.str("agentctl-manifest-v1")
	d.str(m.Root)
	d.str(strconv.Itoa(len(m.Entries)))
	for _, e := range m.Entries {
		p, err := sandbox.CheckEntryPath(e.Path)
		if err != nil {
			p = e.Path
		}
		d.str(string(e.Kind))
		d.str(p)
		d.str(entryDigests[p])
		if entryDigests[p] == "" {
			d.str(e.Source)
			d.str(strings.Join(e.Exclude, "\x00"))
			d.str(e.Repo)
			d.str(e.Ref)
			d.str(e.Subpath)
			if e.Kind == EntryFile {
				d.str(fileDigest(e))
			}
		}
	}
	keys := slices.Sorted(maps.Keys(m.Env))
	d.str(strconv.Itoa(len(keys)))
	for _, k := range keys {
		d.str(k)
		d.str(m.Env[k])
	}
	return d.sum()
}

// PlanDigests is EntryDigests for a sandbox that apply creates, where no
// digest decides anything before the copy: a local_dir whose digest the
// cache does not hold is not read (the copy hashes it as it copies, once)
// but walked, as the copy walks it, to check now what the copy would
// refuse; its path is in deferred and not in the digests. A tree the walk
// finds fault with is hashed as EntryDigests does, which reports why.
//
// With copyChecks (a plan that is applied at once), a local_dir the cache
// holds no digest for under its source, path and excludes is not walked
// either, only its source and excludes checked: the copy refuses what the
// walk would have, as it reads the tree, and the tree is walked once.
func PlanDigests(ctx context.Context, m Manifest, copyChecks bool) (digests map[string]string, deferred []string, err error) {
	if err := Validate(m); err != nil {
		return nil, nil, err
	}
	digests = make(map[string]string, len(m.Entries))
	for _, e := range m.Entries {
		p, _ := sandbox.CheckEntryPath(e.Path)
		e.Path = p // as Materialize names it (the cache's key)
		e.alg = m.Digests
		if e.Kind == EntryLocalDir {
			if _, err := checkSource(e, true); err != nil {
				return nil, nil, err
			}
			if copyChecks && !m.DigestCache.holds(e) {
				if _, err := sandbox.CompileExclude(e.Exclude); err != nil {
					return nil, nil, fmt.Errorf("manifest entry %s %q: %w", e.Kind, e.Path, err)
				}
				deferred = append(deferred, p)
				continue
			}
			if sig, cacheable := walkSignature(e, true, m.DigestCache.now()); sig != "" {
				if d, ok := m.DigestCache.lookup(e, sig); ok && cacheable {
					digests[p] = d
				} else {
					deferred = append(deferred, p)
					if cacheable {
						m.DigestCache.notePlanned(e, sig)
					}
				}
				continue
			}
		}
		d, err := entryDigest(ctx, e, m.DigestCache)
		if err != nil {
			return nil, nil, err
		}
		digests[p] = d
	}
	return digests, deferred, nil
}

// EntryDigests computes every entry's content digest (see EntryDigest),
// for a plan that must say which entries changed.
func EntryDigests(ctx context.Context, m Manifest) (map[string]string, error) {
	if err := Validate(m); err != nil {
		return nil, err
	}
	out := make(map[string]string, len(m.Entries))
	for _, e := range m.Entries {
		e.alg, e.byPlan = m.Digests, true
		d, err := entryDigest(ctx, e, m.DigestCache)
		if err != nil {
			return nil, err
		}
		p, _ := sandbox.CheckEntryPath(e.Path)
		out[p] = d
	}
	return out, nil
}
