package sandbox

import (
	"archive/tar"
	"bytes"
	"io"
	"slices"
	"testing"
)

// TestTrimTarNames: the names of `tar -C DIR .` become relative to DIR,
// the "." entry goes, and contents follow their headers.
func TestTrimTarNames(t *testing.T) {
	var in bytes.Buffer
	tw := tar.NewWriter(&in)
	for _, m := range []struct{ name, body string }{{"./", ""}, {"./a.txt", "alpha"}, {"./d/", ""}, {"./d/b.txt", "bravo"}, {"c.txt", "charlie"}} {
		typ := byte(tar.TypeReg)
		if m.name[len(m.name)-1] == '/' {
			typ = tar.TypeDir
		}
		if err := tw.WriteHeader(&tar.Header{Name: m.name, Typeflag: typ, Size: int64(len(m.body)), Mode: 0o644}); err != nil {
			t.Fatal(err)
		}
		io.WriteString(tw, m.body)
	}
	tw.Close()
	var out bytes.Buffer
	if err := TrimTarNames(&in, &out, nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got = append(got, h.Name+"="+string(b))
	}
	want := []string{"a.txt=alpha", "d/=", "d/b.txt=bravo", "c.txt=charlie"}
	if !slices.Equal(got, want) {
		t.Fatalf("members %q, want %q", got, want)
	}
	rc := ReadCloser(&out, func() error { return io.ErrClosedPipe })
	if err := rc.Close(); err != io.ErrClosedPipe {
		t.Fatalf("first Close: %v", err)
	}
	if err := rc.Close(); err != nil {
		t.Fatalf("second Close ran close again: %v", err)
	}
}
