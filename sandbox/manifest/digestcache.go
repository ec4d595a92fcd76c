//go:build unix

package manifest

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
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
	if sig, _ := treeSignature(e); sig != "" {
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
	if sig, cacheable := treeSignature(e); cacheable {
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
	return newSigner()
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
// before the signer's creation or since.
type signer struct {
	h         hash.Hash
	recent    int64
	cacheable bool
	buf       [8]byte
}

func newSigner() *signer {
	return &signer{h: sha256.New(), recent: time.Now().Add(-racyWindow).UnixNano(), cacheable: true}
}

func (s *signer) num(v int64) {
	binary.BigEndian.PutUint64(s.buf[:], uint64(v))
	s.h.Write(s.buf[:])
}

// record adds one entry (rel "." for the tree's top).
func (s *signer) record(rel string, st sandbox.EntryStat) {
	s.h.Write([]byte(rel))
	s.h.Write([]byte{0})
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
// it changed too recently to be remembered.
func treeSignature(e Entry) (sig string, cacheable bool) {
	return walkSignature(e, false)
}

// walkSignature is treeSignature, also checking, when readable is set,
// that every file can be opened for reading ("" when one cannot): what a
// plan checks of a tree it does not read (PlanDigests).
func walkSignature(e Entry, readable bool) (sig string, cacheable bool) {
	m, err := sandbox.CompileExclude(e.Exclude)
	if err != nil {
		return "", false
	}
	s := newSigner()
	record := func(rel string, st *unix.Stat_t) { s.record(rel, hostfs.EntryStat(st)) }
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
	record(".", &st)
	var walk func(dirfd int, prefix string) error
	walk = func(dirfd int, prefix string) error {
		dir := os.NewFile(uintptr(dirfd), prefix)
		defer dir.Close()
		ents, err := dir.ReadDir(-1)
		if err != nil {
			return err
		}
		slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		for _, d := range ents {
			name, rel := d.Name(), prefix+d.Name()
			if m.Match(rel, d.IsDir()) {
				continue
			}
			if !d.IsDir() && !d.Type().IsRegular() {
				return errSpecial
			}
			if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return err
			}
			if readable && !d.IsDir() {
				if err := unix.Faccessat(dirfd, name, unix.R_OK, 0); err != nil {
					return err
				}
			}
			record(rel, &st)
			if d.IsDir() {
				sub, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					return err
				}
				if err := walk(sub, rel+"/"); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk(fd, ""); err != nil {
		return "", false
	}
	return s.sum(), s.cacheable
}

var errSpecial = errors.New("not a regular file or directory")
