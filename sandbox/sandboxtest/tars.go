package sandboxtest

import (
	"archive/tar"
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// tarOf builds a tar stream of members; a regular file's content is its
// Linkname (which is cleared).
func tarOf(t testing.TB, members ...*tar.Header) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range members {
		body := ""
		if h.Typeflag == tar.TypeReg {
			body, h.Linkname = h.Linkname, ""
			h.Size = int64(len(body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatalf("building a test archive: %v", err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatalf("building a test archive: %v", err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatalf("building a test archive: %v", err)
	}
	return &buf
}

// SparseTar is a PAX (GNU 1.0) sparse archive of a few KB whose single
// member, name, expands to size bytes: zeros, and an "x" at the end.
// Go's tar writer cannot write sparse files, so the extended header is
// made by hand.
func SparseTar(t testing.TB, name string, size int64) *bytes.Buffer {
	t.Helper()
	rec := func(k, v string) string {
		s := " " + k + "=" + v + "\n"
		for d := 1; ; d++ {
			if n := len(s) + d; len(strconv.Itoa(n)) == d {
				return strconv.Itoa(n) + s
			}
		}
	}
	recs := rec("GNU.sparse.major", "1") + rec("GNU.sparse.minor", "0") + rec("GNU.sparse.name", name) + rec("GNU.sparse.realsize", strconv.FormatInt(size, 10))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "PaxHeaders/" + name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(recs)), Format: tar.FormatUSTAR})
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
	tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body)), Format: tar.FormatUSTAR})
	tw.Write([]byte(body))
	tw.Close()
	if h, err := tar.NewReader(bytes.NewReader(buf.Bytes())).Next(); err != nil || h.Size != size {
		t.Fatalf("the sparse test archive reads as %+v, %v", h, err)
	}
	return &buf
}
