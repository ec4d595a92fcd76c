//go:build unix

package manifest

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/internal/hashpipe"
	"github.com/agentctl/agentctl/internal/testfiles"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

// tarOnly hides a sandbox's optional interfaces, so manifest trees go in
// as tar streams through CopyIn, as on providers whose workspace is not
// a host directory.
type tarOnly struct{ sandbox.Sandbox }

// TestLocalDirDirectCopyMatchesTar: a local_dir copied into a host
// directory workspace directly (sandbox.HostTreeCopier) gives the tree
// and the digest that the tar stream through CopyIn gives, and both
// digests are EntryDigest's.
func TestLocalDirDirectCopyMatchesTar(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	testfiles.WriteTree(t, src, map[string]string{
		"main.go":               "package main\n",
		"run.sh":                "#!/bin/sh\necho hi\n",
		"private.key":           "k",
		"node_modules/x/i.js":   "junk",
		"a.tmp":                 "junk",
		"src/deep/er/file.txt":  strings.Repeat("data ", 100000),
		"src/build/keep.txt":    "kept",
		"empty.txt":             "",
		"spaces in name/x y.md": "x",
	})
	os.Chmod(filepath.Join(src, "run.sh"), 0o750)
	os.Chmod(filepath.Join(src, "private.key"), 0o600)
	os.MkdirAll(filepath.Join(src, "emptydir"), 0o700)
	old := time.Date(2010, 1, 2, 3, 4, 5, 600_000_000, time.UTC)
	os.Chtimes(filepath.Join(src, "main.go"), old, old)
	e := Entry{Kind: EntryLocalDir, Path: "work/repo", Source: src, Exclude: []string{"node_modules", "*.tmp"}}
	m := Manifest{Entries: []Entry{e}}
	want, err := EntryDigest(ctx, e)
	if err != nil {
		t.Fatal(err)
	}

	viaTar := newHostDir(t)
	rt, err := Materialize(ctx, tarOnly{viaTar}, m, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	direct := newHostDir(t)
	if _, ok := sandbox.Sandbox(direct).(sandbox.HostTreeCopier); !ok {
		t.Fatal("a host directory workspace does not take host trees directly")
	}
	rd, err := Materialize(ctx, direct, m, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	if rt.Digests["work/repo"] != want || rd.Digests["work/repo"] != want {
		t.Errorf("digests: tar path %s, direct %s, EntryDigest %s", rt.Digests["work/repo"], rd.Digests["work/repo"], want)
	}
	tarTree, directTree := testfiles.DescribeTree(t, viaTar.Path()), testfiles.DescribeTree(t, direct.Path())
	if diff := cmp.Diff(tarTree, directTree); diff != "" {
		t.Errorf("direct copy differs from the tar path (-tar +direct):\n%s", diff)
	}
	for p, want := range map[string]string{
		"work/repo/run.sh":      "file 755 ",
		"work/repo/private.key": "file 644 ",
		"work/repo/main.go":     "file 644 13 ",
		"work/repo/emptydir":    "dir 755",
	} {
		if !strings.HasPrefix(directTree[p], want) {
			t.Errorf("%s = %q, want %q…", p, directTree[p], want)
		}
	}
	if !strings.HasSuffix(directTree["work/repo/main.go"], "2010-01-02T03:04:05Z") {
		t.Errorf("main.go's time = %q, want its source's, to the second", directTree["work/repo/main.go"])
	}
	for _, p := range []string{"work/repo/node_modules", "work/repo/a.tmp"} {
		if _, ok := directTree[p]; ok {
			t.Errorf("%s was not excluded", p)
		}
	}
}

// TestLocalDirHashedOnce: when a plan has just computed a local_dir's
// digest (remembered in the cache), applying it copies the tree without
// hashing it again: the digest is the remembered one (a marked digest
// shows it). Without a remembered digest, the copy computes it.
func TestLocalDirHashedOnce(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	testfiles.WriteTree(t, src, map[string]string{"a.txt": "alpha", "sub/b.txt": "bravo"})
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{"a.txt", "sub/b.txt", "sub", "."} {
		os.Chtimes(filepath.Join(src, p), old, old)
	}
	e := Entry{Kind: EntryLocalDir, Path: "repo", Source: src}
	real, err := EntryDigest(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	// The change times are recent. The racing copy at the end needs
	// files hostfs copies in the kernel, which it does only once they
	// have settled (hostfs's own settled age, 2s of real time, not the
	// cache's clock): wait it out once, for the caches' racy window too.
	time.Sleep(racyWindow + 100*time.Millisecond)
	for _, sb := range []struct {
		name string
		wrap func(sandbox.Sandbox) sandbox.Sandbox
	}{
		{"direct", func(s sandbox.Sandbox) sandbox.Sandbox { return s }},
		{"tar", func(s sandbox.Sandbox) sandbox.Sandbox { return tarOnly{s} }},
	} {
		t.Run(sb.name, func(t *testing.T) {
			m := Manifest{Entries: []Entry{e}, DigestCache: OpenDigestCache(filepath.Join(t.TempDir(), "digests.json"))}
			// The plan: computed and remembered.
			planned, err := EntryDigests(ctx, m)
			if err != nil || planned["repo"] != real {
				t.Fatalf("plan digests %v, %v", planned, err)
			}
			key := cacheKey(e)
			hit := m.DigestCache.entries[key]
			if hit.Digest != real {
				t.Fatalf("the plan's digest was not remembered: %+v", m.DigestCache.entries)
			}
			hit.Digest = "blake3:from-the-plan"
			m.DigestCache.entries[key] = hit
			h := newHostDir(t)
			res, err := Materialize(ctx, sb.wrap(h), m, nil, 1)
			if err != nil {
				t.Fatal(err)
			}
			if res.Digests["repo"] != "blake3:from-the-plan" {
				t.Errorf("apply hashed the tree again: digest %s", res.Digests["repo"])
			}
			if readWS(t, h, "repo/sub/b.txt") != "bravo" {
				t.Error("the tree was not copied")
			}
			// Without the plan's digest, the copy computes it (and
			// remembers it).
			m.DigestCache = OpenDigestCache(filepath.Join(t.TempDir(), "digests.json"))
			res, err = Materialize(ctx, sb.wrap(newHostDir(t)), m, nil, 1)
			if err != nil || res.Digests["repo"] != real {
				t.Fatalf("digest %v, %v; want %s", res.Digests, err, real)
			}
			if m.DigestCache.entries[key].Digest != real {
				t.Errorf("the copy's digest was not remembered")
			}
			// Under the signature a walk of the tree gives: the next plan
			// does not read it.
			if got, want := m.DigestCache.entries[key].Signature, m.DigestCache.Signature(e); got != want || got == "" {
				t.Errorf("remembered signature %q, a walk's %q", got, want)
			}
		})
	}
	// A file that changes between its copy in the kernel and the digest's
	// read of it: the tree is copied again, hashed as it is copied, and
	// the digest is the tree's. (Last: it changes the source's times.)
	m := Manifest{Entries: []Entry{e}, DigestCache: OpenDigestCache(filepath.Join(t.TempDir(), "digests.json"))}
	racing := &racingCopier{HostDir: newHostDir(t), src: src}
	res, err := Materialize(ctx, racing, m, nil, 1)
	if err != nil || res.Digests["repo"] != real {
		t.Fatalf("digest %v, %v; want %s", res.Digests, err, real)
	}
	if racing.copies != 2 || racing.touched == 0 {
		t.Errorf("%d copies, %d files changed under the digest; want the tree copied again after a change", racing.copies, racing.touched)
	}
	if readWS(t, racing.HostDir, "repo/sub/b.txt") != "bravo" {
		t.Error("the tree was not copied")
	}
}

// racingCopier changes each file of its first tree copy (its times) after
// the copy and before the digest reads it, as a writer racing the copy.
type racingCopier struct {
	*hostfs.HostDir
	src     string
	copies  int
	touched int
}

func (r *racingCopier) CopyTreeIn(ctx context.Context, dir string, t sandbox.HostTree) error {
	r.copies++
	if fd, ok := t.Digest.(hostfs.FileDigest); ok && r.copies == 1 {
		t.Digest = &touchFirst{FileDigest: fd, r: r}
	}
	return r.HostDir.CopyTreeIn(ctx, dir, t)
}

type touchFirst struct {
	hostfs.FileDigest
	r *racingCopier
}

func (d *touchFirst) WriteFile(f hashpipe.File, size int64, check func() error) {
	later := time.Now().Add(time.Minute)
	if os.Chtimes(filepath.Join(d.r.src, f.Name()), later, later) == nil {
		d.r.touched++
	}
	d.FileDigest.WriteFile(f, size, check)
}

// TestLocalDirRefusesWorkspaceSymlinks: a symlink a command left in the
// workspace where a local_dir goes (or beneath it) is never written
// through, on either path, and the error says why.
func TestLocalDirRefusesWorkspaceSymlinks(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	testfiles.WriteTree(t, src, map[string]string{"sub/x.txt": "pwned", "top.txt": "pwned"})
	for _, sb := range []struct {
		name string
		wrap func(sandbox.Sandbox) sandbox.Sandbox
	}{
		{"direct", func(s sandbox.Sandbox) sandbox.Sandbox { return s }},
		{"tar", func(s sandbox.Sandbox) sandbox.Sandbox { return tarOnly{s} }},
	} {
		for _, link := range []struct{ at, target string }{
			{"repo", "../outside"},
			{"repo", "/tmp"},
			{"repo/sub", "../../outside"},
		} {
			t.Run(sb.name+"/"+link.at+"->"+link.target, func(t *testing.T) {
				parent := t.TempDir()
				ws := filepath.Join(parent, "ws")
				outside := filepath.Join(parent, "outside")
				os.MkdirAll(filepath.Join(ws, filepath.Dir(link.at)), 0o755)
				os.MkdirAll(outside, 0o755)
				target := link.target
				if target == "/tmp" {
					target = outside // absolute, out of the workspace
				}
				if err := os.Symlink(target, filepath.Join(ws, link.at)); err != nil {
					t.Fatal(err)
				}
				h := newHostDirAt(t, ws)
				_, err := Materialize(ctx, sb.wrap(h), Manifest{Entries: []Entry{{Kind: EntryLocalDir, Path: "repo", Source: src}}}, nil, 1)
				if !errors.Is(err, sandbox.ErrPathEscape) || !strings.Contains(err.Error(), "symlink") || !strings.Contains(err.Error(), `local_dir "repo"`) {
					t.Errorf("err = %v, want a path escape naming the entry and the symlink", err)
				}
				t.Log(err)
				if ents, _ := os.ReadDir(outside); len(ents) != 0 {
					t.Errorf("written outside the workspace: %v", ents)
				}
			})
		}
	}
}

// TestPlannedTreeNotWalkedAgain: the Materialize that follows a plan in
// the same process takes an unchanged local_dir's digest from that plan
// instead of walking the tree again, once: a tree changed after the plan
// is the plan's view for that apply (unchanged, not copied), and the
// next Materialize without a plan of its own walks it and copies it.
func TestPlannedTreeNotWalkedAgain(t *testing.T) {
	ctx := context.Background()
	src := t.TempDir()
	testfiles.WriteTree(t, src, map[string]string{"a.txt": "alpha"})
	old := time.Now().Add(-time.Hour)
	for _, p := range []string{"a.txt", "."} {
		os.Chtimes(filepath.Join(src, p), old, old)
	}
	m := Manifest{Entries: []Entry{{Kind: EntryLocalDir, Path: "repo", Source: src}}, DigestCache: OpenDigestCache(filepath.Join(t.TempDir(), "digests.json"))}
	m.DigestCache.Now = settle(t)
	h := newHostDir(t)
	first, err := Materialize(ctx, h, m, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	planned, err := EntryDigests(ctx, m) // the plan: the tree is unchanged
	if err != nil || planned["repo"] != first.Digests["repo"] {
		t.Fatalf("plan %v, %v; materialized %v", planned, err, first.Digests)
	}
	testfiles.WriteTree(t, src, map[string]string{"a.txt": "ALPHA!"}) // after the plan
	res, err := Materialize(ctx, h, m, first.Digests, 1)
	if err != nil || len(res.Applied) != 0 || res.Digests["repo"] != planned["repo"] {
		t.Fatalf("the apply after the plan: applied %v, digests %v, %v; want the plan's view", res.Applied, res.Digests, err)
	}
	res, err = Materialize(ctx, h, m, first.Digests, 1)
	if err != nil || len(res.Applied) != 1 || res.Digests["repo"] == planned["repo"] {
		t.Fatalf("a second apply without a plan: applied %v, digests %v, %v; want the change copied", res.Applied, res.Digests, err)
	}
	if got := readWS(t, h, "repo/a.txt"); got != "ALPHA!" {
		t.Errorf("repo/a.txt = %q", got)
	}
}

// TestCopyRemembersWhatItRead: the digest a copy computes is remembered
// under the signature of what the copy read, without a walk after it: the
// same signature a plan's walk takes of the unchanged tree (excludes,
// nested and empty directories, an empty file), on both paths; and a file
// changed while or after the copy read it never leaves a remembered
// digest that a later plan would take for the changed tree.
func TestCopyRemembersWhatItRead(t *testing.T) {
	ctx := context.Background()
	// One tree for the unchanged copies and one for each change below.
	newTree := func() string {
		src := t.TempDir()
		testfiles.WriteTree(t, src, map[string]string{
			"a.txt":             "alpha",
			"b.txt":             "bravo",
			"empty.txt":         "",
			"node_modules/x.js": "junk",
			"sub/deeper/c.txt":  "charlie",
			"sub/d.tmp":         "junk",
		})
		os.MkdirAll(filepath.Join(src, "sub/emptydir"), 0o755)
		return src
	}
	src := newTree()
	changing := map[string]string{}
	for _, name := range []string{"changed after it was read", "emptied after it was observed", "changed while it was read"} {
		changing[name] = newTree()
	}
	// Past the caches' racy window, and settled for hostfs, which copies
	// a file in the kernel (the worker the changes race) only once it
	// has (its own settled age, 2s of real time): one wait for all.
	time.Sleep(racyWindow + 100*time.Millisecond)
	e := Entry{Kind: EntryLocalDir, Path: "repo", Source: src, Exclude: []string{"node_modules", "*.tmp"}}
	key := cacheKey(e)
	for _, sb := range []struct {
		name string
		wrap func(*hostfs.HostDir) sandbox.Sandbox
	}{
		{"direct", func(h *hostfs.HostDir) sandbox.Sandbox { return h }},
		{"tar", func(h *hostfs.HostDir) sandbox.Sandbox { return tarOnly{h} }},
	} {
		t.Run(sb.name, func(t *testing.T) {
			m := Manifest{Entries: []Entry{e}, DigestCache: OpenDigestCache(filepath.Join(t.TempDir(), "digests.json"))}
			res, err := Materialize(ctx, sb.wrap(newHostDir(t)), m, nil, 1)
			if err != nil {
				t.Fatal(err)
			}
			hit, walked := m.DigestCache.entries[key], m.DigestCache.Signature(e)
			if walked == "" || hit.Signature != walked || hit.Digest != res.Digests["repo"] {
				t.Fatalf("remembered %+v; want the walk's signature %q and the digest %s", hit, walked, res.Digests["repo"])
			}
		})
	}
	for _, c := range []struct {
		name string
		// meddle changes a.txt to content: after the copy observed it
		// (the worker may not have copied it yet: emptied, it is
		// shorter than the walk measured), or between the copy's stat
		// of it and its read (through the buffer).
		after, during bool
		content       string
	}{
		{name: "changed after it was read", after: true, content: "ALPHA"},
		{name: "emptied after it was observed", after: true, content: ""},
		{name: "changed while it was read", during: true, content: "ALPHA"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := e
			e.Source = changing[c.name]
			before, err := EntryDigest(ctx, e)
			if err != nil {
				t.Fatal(err)
			}
			m := Manifest{Entries: []Entry{e}, DigestCache: OpenDigestCache(filepath.Join(t.TempDir(), "digests.json"))}
			change := func() {
				if err := os.WriteFile(filepath.Join(e.Source, "a.txt"), []byte(c.content), 0o644); err != nil {
					t.Error(err)
				}
			}
			md := &meddler{HostDir: newHostDir(t)}
			if c.after {
				md.afterObserved = func(rel string) {
					if rel == "a.txt" {
						change()
					}
				}
			} else {
				md.duringRead = func(p []byte) {
					// a.txt's name goes to the digest after its status
					// is taken, before its bytes are read.
					if string(p) == "a.txt" {
						change()
					}
				}
			}
			res, err := Materialize(ctx, md, m, nil, 1)
			if err != nil {
				t.Fatal(err)
			}
			now, err := EntryDigest(ctx, e)
			if err != nil || now == before {
				t.Fatalf("digest after the change %s, %v", now, err)
			}
			// The digest is the one of the tree copied: a.txt as the
			// copy read it (the direct copy reads a file changed between
			// its copy and its hashing again, changed).
			want := map[string]string{"alpha": before, c.content: now}[readWS(t, md.HostDir, "repo/a.txt")]
			if res.Digests["repo"] != want {
				t.Fatalf("digest %s; want the copied tree's %s", res.Digests["repo"], want)
			}
			planned, err := EntryDigests(ctx, m)
			if err != nil || planned["repo"] != now {
				t.Errorf("the plan after the copy: %v, %v; want the changed tree's %s", planned, err, now)
			}
		})
	}
}

// meddler changes the source tree during a direct copy: after the copy
// observed an entry (afterObserved), or as the copy feeds the digest
// (duringRead; the digest is wrapped so the copy reads every file
// through its buffer).
type meddler struct {
	*hostfs.HostDir
	afterObserved func(rel string)
	duringRead    func(p []byte)
}

func (m *meddler) CopyTreeIn(ctx context.Context, dir string, t sandbox.HostTree) error {
	if obs := t.Observe; obs != nil && m.afterObserved != nil {
		t.Observe = func(rel string, st sandbox.EntryStat) {
			obs(rel, st)
			m.afterObserved(rel)
		}
	}
	if t.Digest != nil && m.duringRead != nil {
		t.Digest = readHook{t.Digest, m.duringRead}
	}
	return m.HostDir.CopyTreeIn(ctx, dir, t)
}

type readHook struct {
	w    io.Writer
	hook func([]byte)
}

func (r readHook) Write(p []byte) (int, error) {
	r.hook(p)
	return r.w.Write(p)
}
