//go:build unix

package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// racyWindow is how recent a file's change may be for its tree's digest
// to be remembered: a file written within the file system's timestamp
// granularity of the stat could change again without its stat changing
// (git's "racily clean" entries).
const racyWindow = 2 * time.Second

// DigestCache remembers the content digests of local_dir sources by their
// trees' stat signatures (every file's and directory's name, mode, size,
// modification and change times, inode and device, after excludes), as
// git's index does: a tree whose signature is unchanged is not read
// again. A tree changed within the last two seconds is not remembered.
// It is kept in a file; a missing or unreadable file starts it empty.
type DigestCache struct {
	// Now is the clock the racy window is measured on; nil is time.Now.
	// Tests set it past the window instead of waiting it out. It is set
	// before the cache is used.
	Now func() time.Time

	path string

	mu      sync.Mutex
	entries map[string]cachedDigest
	dirty   bool
	// planned holds the signatures PlanDigests took of trees it left to
	// the copy, so the copy that follows in this process does not walk
	// the tree again to look its digest up (the copy's own observation
	// is what remember records).
	planned map[string]string
	// confirmed holds the digests a plan found (or computed) for trees
	// whose signature held, once, for the Materialize of the same apply:
	// it does not walk a tree the plan has just walked (a tree changed
	// in between is the plan's view, as every plan decision is, and the
	// next plan sees the change).
	confirmed map[string]string
}

type cachedDigest struct {
	Signature string `json:"signature"`
	Digest    string `json:"digest"`
}

// OpenDigestCache reads the cache kept at path.
func OpenDigestCache(path string) *DigestCache {
	c := &DigestCache{path: path, entries: map[string]cachedDigest{}}
	if b, err := os.ReadFile(path); err == nil {
		var m map[string]cachedDigest
		if json.Unmarshal(b, &m) == nil {
			c.entries = m
		}
	}
	return c
}

// Save writes the cache when it changed (atomically: a temporary file
// renamed over the old one).
func (c *DigestCache) Save() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dirty {
		return nil
	}
	b, err := json.Marshal(c.entries)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(c.path), 0o700); err != nil {
		return err
	}
	tmp := c.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, c.path); err != nil {
		os.Remove(tmp)
		return err
	}
	c.dirty = false
	return nil
}

// now reads the cache's clock (Now); time.Now without a cache.
func (c *DigestCache) now() time.Time {
	if c == nil || c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// cacheKey is e's key in the cache: its source, path and excludes, and
// the algorithm of its digest (none for SHA-256, as the cache had it
// before BLAKE3), so that states of both algorithms beside one
// configuration each keep theirs.
func cacheKey(e Entry) string {
	k := strings.Join([]string{e.Source, e.Path, strings.Join(e.Exclude, "\x00")}, "\x00\x00")
	if a := e.alg.Name(); a != digest.SHA256 {
		k += "\x00\x00" + string(a)
	}
	return k
}

// localDirDigest is a local_dir's digest, from the cache when its tree's
// signature is the one remembered. A digest computed now (compute gets
// the signer that observes what it reads, nil without a cache) is
// remembered under the signature of what it read.
func (c *DigestCache) localDirDigest(compute func(seen *signer) (string, error), e Entry) (string, error) {
	if c == nil {
		return compute(nil)
	}
	if sig, _ := treeSignature(e, c.now()); sig != "" {
		c.mu.Lock()
		hit, ok := c.entries[cacheKey(e)]
		c.mu.Unlock()
		if ok && hit.Signature == sig {
			c.confirm(e, hit.Digest)
			return hit.Digest, nil
		}
	}
	seen := c.signer()
	d, err := compute(seen)
	if err == nil && c.remember(e, d, seen) {
		c.confirm(e, d)
	}
	return d, err
}

// confirm keeps d, the digest of e's tree while its signature held, for
// the Materialize that follows the plan (only a plan's entries, byPlan).
func (c *DigestCache) confirm(e Entry, d string) {
	if !e.byPlan {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.confirmed == nil {
		c.confirmed = map[string]string{}
	}
	c.confirmed[cacheKey(e)] = d
}

// confirmedDigest is the digest the latest localDirDigest found for e's
// tree while its signature held, once; ok is false when there is none.
func (c *DigestCache) confirmedDigest(e Entry) (d string, ok bool) {
	if c == nil || e.Kind != EntryLocalDir {
		return "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok = c.confirmed[cacheKey(e)]
	delete(c.confirmed, cacheKey(e))
	return d, ok
}

// Signature is a local_dir tree's stat signature before it is read, for
// remember ("" when it cannot be remembered).
func (c *DigestCache) Signature(e Entry) string {
	if c == nil || e.Kind != EntryLocalDir {
		return ""
	}
	if sig, cacheable := treeSignature(e, c.now()); cacheable {
		return sig
	}
	return ""
}

// notePlanned records sig, a plan's signature of e's tree, for
// signatureBefore.
func (c *DigestCache) notePlanned(e Entry, sig string) {
	if c == nil || sig == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.planned == nil {
		c.planned = map[string]string{}
	}
	c.planned[cacheKey(e)] = sig
}

// signatureBefore is the signature of e's tree before a copy reads it,
// to look its digest up with: the one the plan took, once, else
// Signature's; "" without a walk when the cache holds no digest for e.
func (c *DigestCache) signatureBefore(e Entry) string {
	if c == nil {
		return ""
	}
	c.mu.Lock()
	sig, ok := c.planned[cacheKey(e)]
	delete(c.planned, cacheKey(e))
	c.mu.Unlock()
	if ok {
		return sig
	}
	if !c.holds(e) {
		return ""
	}
	return c.Signature(e)
}

// holds reports whether the cache has a digest for e's key, whatever its
// signature.
func (c *DigestCache) holds(e Entry) bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.entries[cacheKey(e)]
	return ok
}

// lookup is the digest remembered for e's tree when its signature is sig
// (from Signature, taken now).
func (c *DigestCache) lookup(e Entry, sig string) (string, bool) {
	if c == nil || sig == "" {
		return "", false
	}
	c.mu.Lock()
	hit, ok := c.entries[cacheKey(e)]
	c.mu.Unlock()
	return hit.Digest, ok && hit.Signature == sig
}

// signer is a signer for a copy or a digest to observe the tree it
// reads with (hostfs's Observe), nil without a cache.
func (c *DigestCache) signer() *signer {
	if c == nil {
		return nil
	}
	return newSigner(c.now())
}

// remember records d as the digest of e's tree, computed from what seen
// observed: under the signature of the tree as it was read, each file's
// status taken after its bytes were read, each directory's before its
// names were. A later walk that finds the same signature finds the same
// content (any change moves a change time forward), so the tree is not
// walked again to confirm it. Nothing is remembered when an entry changed
// within the racy window before the copy or during it (its change time
// is then recent). It reports whether it remembered d.
func (c *DigestCache) remember(e Entry, d string, seen *signer) bool {
	if c == nil || seen == nil || !seen.cacheable {
		return false
	}
	c.mu.Lock()
	c.entries[cacheKey(e)] = cachedDigest{Signature: seen.sum(), Digest: d}
	c.dirty = true
	c.mu.Unlock()
	return true
}

// signer hashes a tree's stat signature entry by entry, in walk order:
// every entry's path, mode, size, modification and change times, inode
// and device. cacheable is cleared by an entry changed within racyWindow
// before now, the signer's creation, or since.
type signer struct {
	// w receives the encoding: h, or a buffer (buffered) hashed later.
	w         io.Writer
	h         hash.Hash
	recent    int64
	cacheable bool
	buf       [8]byte
}

func newSigner(now time.Time) *signer {
	h := sha256.New()
	return &signer{w: h, h: h, recent: now.Add(-racyWindow).UnixNano(), cacheable: true}
}

// buffered is a signer with s's racy window that keeps the encoding in a
// bytes.Buffer, for s to hash in its place.
func (s *signer) buffered() *signer {
	return &signer{w: &bytes.Buffer{}, recent: s.recent, cacheable: true}
}

func (s *signer) num(v int64) {
	binary.BigEndian.PutUint64(s.buf[:], uint64(v))
	s.w.Write(s.buf[:])
}

// record adds one entry (rel "." for the tree's top).
func (s *signer) record(rel string, st sandbox.EntryStat) {
	s.w.Write([]byte(rel))
	s.w.Write([]byte{0})
	s.num(int64(st.Mode))
	s.num(st.Size)
	s.num(st.Mtime)
	s.num(st.Ctime)
	s.num(int64(st.Ino))
	s.num(int64(st.Dev))
	if st.Mtime >= s.recent || st.Ctime >= s.recent {
		s.cacheable = false
	}
}

func (s *signer) sum() string { return hex.EncodeToString(s.h.Sum(nil)) }

// is reports whether the tree observed has signature sig.
func (s *signer) is(sig string) bool {
	return s != nil && sig != "" && s.cacheable && s.sum() == sig
}

// treeSignature walks a local_dir source as the archive does (sorted,
// excludes applied, symlinks not followed) and hashes every entry's stat;
// "" when the tree cannot be walked or holds what the archive refuses
// (the full digest then reports it), cacheable false when something in
// it changed within the racy window before now, too recently to be
// remembered.
func treeSignature(e Entry, now time.Time) (sig string, cacheable bool) {
	return walkSignature(e, false, now)
}

// walkSignature is treeSignature, also checking, when readable is set,
// that every file can be opened for reading ("" when one cannot): what a
// plan checks of a tree it does not read (PlanDigests).
//
// The subtrees of the source's top directory are walked concurrently,
// each into a buffer of its own (walkWorkers at a time), and the buffers
// are hashed in order: the signature is the one a walk in order gives.
func walkSignature(e Entry, readable bool, now time.Time) (sig string, cacheable bool) {
	m, err := sandbox.CompileExclude(e.Exclude)
	if err != nil {
		return "", false
	}
	// The order and the bytes are those of a filepath.WalkDir of the
	// source (each directory's entries sorted by name, parents first),
	// as the signature was first taken: a cache written then stays
	// valid. Each entry is stat'ed relative to its directory's
	// descriptor, so the kernel resolves one name, not the whole path.
	var st unix.Stat_t
	if err := unix.Fstatat(unix.AT_FDCWD, e.Source, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return "", false
	}
	fd, err := unix.Open(e.Source, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", false
	}
	top := os.NewFile(uintptr(fd), e.Source)
	defer top.Close()
	s := newSigner(now)
	s.record(".", hostfs.EntryStat(&st))
	w := treeWalker{m: m, readable: readable}
	ents, err := w.list(fd, "")
	if err != nil {
		return "", false
	}
	// One job per subdirectory of the top, in order.
	type job struct {
		name string
		out  *signer
		err  error
		done chan struct{}
	}
	var jobs []*job
	for _, d := range ents {
		if d.isDir {
			jobs = append(jobs, &job{name: d.name, out: s.buffered(), done: make(chan struct{})})
		}
	}
	next := make(chan *job, len(jobs))
	for _, j := range jobs {
		next <- j
	}
	close(next)
	for range min(len(jobs), walkWorkers()) {
		go func() {
			for j := range next {
				j.err = w.subtree(fd, j.name, j.name+"/", j.out)
				close(j.done)
			}
		}()
	}
	failed := false
	k := 0
	for _, d := range ents {
		s.record(d.rel, d.st)
		if !d.isDir {
			continue
		}
		j := jobs[k]
		k++
		<-j.done
		if j.err != nil {
			failed = true
			continue // the other jobs still finish before the top closes
		}
		s.h.Write(j.out.w.(*bytes.Buffer).Bytes())
		s.cacheable = s.cacheable && j.out.cacheable
	}
	if failed {
		return "", false
	}
	return s.sum(), s.cacheable
}

// walkWorkers is how many subtrees walkSignature walks at a time.
func walkWorkers() int { return min(runtime.GOMAXPROCS(0), 4) }

// treeWalker lists and stats a local_dir source's directories as the
// archive walks them (sorted, excludes applied, symlinks and special files
// refused).
type treeWalker struct {
	m        *sandbox.Matcher
	readable bool
}

// walkedEntry is one entry of a directory: its path from the top, its
// status, whether it is a directory.
type walkedEntry struct {
	name, rel string
	st        sandbox.EntryStat
	isDir     bool
}

// list reads directory dirfd (prefix is its path from the top, "" or
// ending in "/") and stats its entries, in order.
func (w treeWalker) list(dirfd int, prefix string) ([]walkedEntry, error) {
	dup, err := unix.Dup(dirfd)
	if err != nil {
		return nil, err
	}
	dir := os.NewFile(uintptr(dup), prefix)
	defer dir.Close()
	ents, err := dir.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	out := make([]walkedEntry, 0, len(ents))
	var st unix.Stat_t
	for _, d := range ents {
		name, rel := d.Name(), prefix+d.Name()
		if w.m.Match(rel, d.IsDir()) {
			continue
		}
		if !d.IsDir() && !d.Type().IsRegular() {
			return nil, errSpecial
		}
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, err
		}
		if w.readable && !d.IsDir() {
			if err := unix.Faccessat(dirfd, name, unix.R_OK, 0); err != nil {
				return nil, err
			}
		}
		out = append(out, walkedEntry{name: name, rel: rel, st: hostfs.EntryStat(&st), isDir: d.IsDir()})
	}
	return out, nil
}

// subtree records directory name of parentfd (prefix is its path from
// the top, ending in "/") and everything beneath it, depth first, in s.
func (w treeWalker) subtree(parentfd int, name, prefix string, s *signer) error {
	fd, err := unix.Openat(parentfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ents, err := w.list(fd, prefix)
	if err != nil {
		return err
	}
	for _, d := range ents {
		s.record(d.rel, d.st)
		if d.isDir {
			if err := w.subtree(fd, d.name, d.rel+"/", s); err != nil {
				return err
			}
		}
	}
	return nil
}

var errSpecial = errors.New("not a regular file or directory")
