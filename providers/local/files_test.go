package local_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

func tarOf(t testing.TB, files map[string]string) io.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), Typeflag: tar.TypeReg})
		tw.Write([]byte(files[n]))
	}
	tw.Close()
	return &buf
}

// sparseTar is a PAX (GNU 1.0) sparse archive of a few KB whose single
// member expands to size bytes of zeros; Go's tar writer cannot write
// sparse files, so the extended header is made by hand.
func sparseTar(t testing.TB, size int64) io.Reader {
	t.Helper()
	rec := func(k, v string) string {
		s := " " + k + "=" + v + "\n"
		for d := 1; ; d++ {
			if n := len(s) + d; len(strconv.Itoa(n)) == d {
				return strconv.Itoa(n) + s
			}
		}
	}
	recs := rec("GNU.sparse.major", "1") + rec("GNU.sparse.minor", "0") + rec("GNU.sparse.name", "big") + rec("GNU.sparse.realsize", strconv.FormatInt(size, 10))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "PaxHeaders/big", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(recs)), Format: tar.FormatUSTAR})
	tw.Write([]byte(recs))
	tw.Flush()
	b := buf.Bytes()
	b[156] = tar.TypeXHeader
	copy(b[148:156], "        ")
	sum := 0
	for _, c := range b[:512] {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
	sparseMap := fmt.Sprintf("1\n%d\n1\n", size-1)
	body := sparseMap + strings.Repeat("\x00", 512-len(sparseMap)) + "x"
	tw.WriteHeader(&tar.Header{Name: "big", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), Format: tar.FormatUSTAR})
	tw.Write([]byte(body))
	tw.Close()
	// The archive is what it claims to be: Go's reader expands it.
	h, err := tar.NewReader(bytes.NewReader(buf.Bytes())).Next()
	if err != nil || h.Size != size {
		t.Fatalf("sparse archive reads as %+v, %v", h, err)
	}
	return &buf
}

// A sparse member is extracted with its holes, taking no room
// (sandboxtest checks its content and the limits).
func TestCopyInSparseKeepsHoles(t *testing.T) {
	sb, _ := newSandbox(t, local.Options{Isolation: local.IsolationNone}, sandbox.Spec{})
	if err := sb.CopyIn(context.Background(), ".", sparseTar(t, 256<<20)); err != nil {
		t.Fatalf("sparse member: %v", err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(sb.Dir(), "big"), &st); err != nil || st.Size != 256<<20 || st.Blocks*512 > 1<<20 {
		t.Errorf("sparse member extracted as %d bytes taking %d on disk (%v), want a sparse file of 256 MiB", st.Size, st.Blocks*512, err)
	}
}
