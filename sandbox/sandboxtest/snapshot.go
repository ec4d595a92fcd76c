package sandboxtest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/archive"
)

// snapshotTree makes a workspace with what a snapshot must keep: modes,
// symlinks inside and out, a hard link, an empty and a private
// directory, odd names, a deep path, a sparse and a random file; and a
// FIFO, which snapshots leave out.
const snapshotTree = `set -e
mkdir -p dir/sub empty locked 'with space'
echo plain > plain.txt
printf secret > private.txt && chmod 600 private.txt
printf '#!/bin/sh\necho ran\n' > run.sh && chmod 755 run.sh
echo x > locked/f && chmod 700 locked
echo s > dir/sub/f && chmod 750 dir/sub
echo u > 'with space/ünï.txt'
ln -s plain.txt link && ln -s /usr/bin/python3 abslink && ln -s ../../../etc uplink
echo h > hard1 && ln hard1 hard2
mkfifo fifo
d=deep; i=0; while [ $i -lt 60 ]; do d=$d/$i; i=$((i+1)); done; mkdir -p $d && echo bottom > $d/leaf
dd if=/dev/zero of=sparse bs=1 count=0 seek=16777216 2>/dev/null && echo x >> sparse
head -c 300000 /dev/urandom > random.bin
`

// testSnapshot: a snapshot holds the workspace as it is (modes, links,
// contents; no FIFO), restores into a new sandbox, and a snapshot of the
// restored sandbox is byte for byte the first.
func (s *suite) testSnapshot(t *testing.T) {
	sb, _ := s.create(t, sandbox.Spec{})
	c := ctx(t)
	sh(t, sb, "making the workspace to snapshot", snapshotTree)
	dir := t.TempDir()
	first := filepath.Join(dir, "first.tar")
	info, err := archive.Snapshot(c, sb, "", nil, first)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	a := readTar(t, first)
	checkSnapshotHolds(t, a)

	fresh, _ := s.create(t, sandbox.Spec{})
	if err := archive.RestoreSnapshot(c, fresh, first, info.Digest); err != nil {
		t.Fatalf("RestoreSnapshot into a new sandbox: %v", err)
	}
	if got := sh(t, fresh, "running a restored file", "./run.sh && cat private.txt"); got != "ran\nsecret" {
		t.Errorf("the restored workspace does not run and read as the first: %q", got)
	}
	second := filepath.Join(dir, "second.tar")
	if _, err := archive.Snapshot(c, fresh, "", nil, second); err != nil {
		t.Fatalf("Snapshot of the restored sandbox: %v", err)
	}
	b := readTar(t, second)
	for _, d := range diffTars(a, b) {
		t.Error(d)
	}
	ab, _ := os.ReadFile(first)
	bb, _ := os.ReadFile(second)
	if !bytes.Equal(ab, bb) && !t.Failed() {
		t.Errorf("snapshot and restore are not byte-identical: the snapshot of the restored sandbox (%d bytes) differs from the first (%d bytes) from offset %d", len(bb), len(ab), firstDiff(ab, bb))
	}
}

// member is one tar member as a snapshot comparison sees it.
type member struct {
	typ     byte
	mode    fs.FileMode
	size    int64
	mtime   int64
	target  string
	content string // the content's SHA-256 (short) for regular files
}

func (m member) String() string {
	return fmt.Sprintf("type %q mode %v size %d mtime %d target %q content %s", m.typ, m.mode, m.size, m.mtime, m.target, m.content)
}

// tarMembers are a tar's members by name (without "./" or a trailing
// slash), and their order.
type tarMembers struct {
	byName map[string]member
	order  []string
}

func readTar(t *testing.T, file string) tarMembers {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tm := tarMembers{byName: map[string]member{}}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return tm
		}
		if err != nil {
			t.Fatalf("reading the snapshot %s: %v", filepath.Base(file), err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		m := member{typ: h.Typeflag, mode: fs.FileMode(h.Mode).Perm(), size: h.Size, mtime: h.ModTime.Unix(), target: h.Linkname}
		if h.Typeflag == tar.TypeReg {
			sum := sha256.New()
			io.Copy(sum, tr)
			m.content = fmt.Sprintf("%x", sum.Sum(nil)[:8])
		}
		tm.byName[name] = m
		tm.order = append(tm.order, name)
	}
}

// checkSnapshotHolds: the first snapshot holds the workspace as made.
func checkSnapshotHolds(t *testing.T, a tarMembers) {
	t.Helper()
	deep := "deep"
	for i := range 60 {
		deep += fmt.Sprintf("/%d", i)
	}
	for name, want := range map[string]string{
		"private.txt": "mode 0600", "run.sh": "mode 0755", "locked": "dir mode 0700", "dir/sub": "dir mode 0750", "empty": "dir",
		"link": "link plain.txt", "abslink": "link /usr/bin/python3", "uplink": "link ../../../etc",
		"hard2": "file", "with space/ünï.txt": "file", deep + "/leaf": "file", "sparse": "file", "random.bin": "file",
	} {
		m, ok := a.byName[name]
		var got string
		switch {
		case !ok:
			t.Errorf("the snapshot lacks %s", name)
			continue
		case m.typ == tar.TypeDir && strings.HasPrefix(want, "dir mode"):
			got = fmt.Sprintf("dir mode %04o", m.mode)
		case m.typ == tar.TypeDir:
			got = "dir"
		case m.typ == tar.TypeSymlink:
			got = "link " + m.target
		case m.typ == tar.TypeReg && strings.HasPrefix(want, "mode"):
			got = fmt.Sprintf("mode %04o", m.mode)
		case m.typ == tar.TypeReg:
			got = "file"
		default:
			got = fmt.Sprintf("type %q", m.typ)
		}
		if got != want {
			t.Errorf("the snapshot holds %s as %s, want %s", name, got, want)
		}
	}
	if _, ok := a.byName["fifo"]; ok {
		t.Error("the snapshot holds a FIFO: special files must be left out")
	}
	if m := a.byName["sparse"]; m.size != 16<<20+2 {
		t.Errorf("the snapshot holds the sparse file with %d bytes, want %d", m.size, 16<<20+2)
	}
}

// diffTars names what the restore changed, member by member.
func diffTars(a, b tarMembers) []string {
	var out []string
	for _, name := range a.order {
		ma := a.byName[name]
		mb, ok := b.byName[name]
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("restore lost %s (%v)", name, ma))
		case ma.typ != mb.typ:
			out = append(out, fmt.Sprintf("restore changed the type of %s from %q to %q", name, ma.typ, mb.typ))
		case ma.mode != mb.mode:
			out = append(out, fmt.Sprintf("restore lost the mode of %s: %04o became %04o", name, ma.mode, mb.mode))
		case ma.target != mb.target:
			out = append(out, fmt.Sprintf("restore changed the target of the symlink %s from %q to %q", name, ma.target, mb.target))
		case ma.size != mb.size || ma.content != mb.content:
			out = append(out, fmt.Sprintf("restore changed the content of %s (%d bytes, %s → %d bytes, %s)", name, ma.size, ma.content, mb.size, mb.content))
		case ma.mtime != mb.mtime:
			out = append(out, fmt.Sprintf("restore changed the modification time of %s from %d to %d", name, ma.mtime, mb.mtime))
		}
	}
	for _, name := range b.order {
		if _, ok := a.byName[name]; !ok {
			out = append(out, fmt.Sprintf("restore added %s (%v)", name, b.byName[name]))
		}
	}
	if len(out) == 0 {
		for i := range min(len(a.order), len(b.order)) {
			if a.order[i] != b.order[i] {
				out = append(out, fmt.Sprintf("the snapshot of the restored sandbox lists its members in another order: member %d is %s, was %s", i, b.order[i], a.order[i]))
				break
			}
		}
	}
	return out
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
