package daytona

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/agentctl/agentctl/internal/fakedaytona"
	"github.com/agentctl/agentctl/sandbox"
)

// BenchmarkUpload compares the two ways to materialize a tree through the
// toolbox: the bulk upload API (one multipart request; modes and symlinks
// are lost, so each non-0644 file would need one more request) against
// uploading one tar and extracting it with a command (three requests).
func BenchmarkUpload(b *testing.B) {
	const files = 500
	f := fakedaytona.New(b)
	p, err := New(Options{APIKey: f.APIKey, APIURL: f.URL, PollInterval: 1, TempDir: f.Root + "/tmp"})
	if err != nil {
		b.Fatal(err)
	}
	sb, err := p.Create(context.Background(), sandbox.Spec{Address: "sandbox.bench", Root: f.Root + "/ws"})
	if err != nil {
		b.Fatal(err)
	}
	w := sb.(*Workspace)
	content := bytes.Repeat([]byte("x"), 2048)
	b.Run("bulk-upload", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			ups := make([]FileUpload, files)
			for j := range ups {
				ups[j] = FileUpload{Path: fmt.Sprintf("%s/bulk/d%d/f%d.txt", w.root, j%10, j), Content: content}
			}
			if err := w.s.FileSystem.UploadFiles(context.Background(), ups); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tar-extract", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			for j := 0; j < files; j++ {
				tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("tar/d%d/f%d.txt", j%10, j), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content))})
				tw.Write(content)
			}
			tw.Close()
			if err := w.CopyIn(context.Background(), ".", &buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}
