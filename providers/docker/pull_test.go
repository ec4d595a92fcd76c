package docker

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/internal/testenv"
)

// fakeRegistry serves one image over the registry HTTP API v2 (the
// distribution spec's pull endpoints), built from a static busybox.
func fakeRegistry(t *testing.T, repo, tag string) *httptest.Server {
	t.Helper()
	bb, err := staticBusybox()
	if err != nil {
		testenv.Missing(t, "%v", err)
	}
	bin, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	tw.WriteHeader(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin))})
	tw.Write(bin)
	for _, l := range []string{"sh", "sleep", "cat", "true"} {
		tw.WriteHeader(&tar.Header{Name: "bin/" + l, Typeflag: tar.TypeSymlink, Linkname: "busybox", Mode: 0o777})
	}
	tw.Close()
	diffID := fmt.Sprintf("sha256:%x", sha256.Sum256(layer.Bytes()))
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(layer.Bytes())
	zw.Close()
	cfg, _ := json.Marshal(map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Env": []string{"PATH=/bin"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}},
	})
	blobs := map[string][]byte{}
	digest := func(b []byte) string {
		d := fmt.Sprintf("sha256:%x", sha256.Sum256(b))
		blobs[d] = b
		return d
	}
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.docker.distribution.manifest.v2+json",
		"config": map[string]any{"mediaType": "application/vnd.docker.container.image.v1+json",
			"size": len(cfg), "digest": digest(cfg)},
		"layers": []any{map[string]any{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
			"size": gz.Len(), "digest": digest(gz.Bytes())}},
	})
	manifestDigest := fmt.Sprintf("sha256:%x", sha256.Sum256(manifest))
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
		p := r.URL.Path
		switch {
		case p == "/v2/":
			w.WriteHeader(http.StatusOK)
		case p == "/v2/"+repo+"/manifests/"+tag || p == "/v2/"+repo+"/manifests/"+manifestDigest:
			w.Header().Set("Content-Type", "application/vnd.docker.distribution.manifest.v2+json")
			w.Header().Set("Docker-Content-Digest", manifestDigest)
			w.Header().Set("Content-Length", fmt.Sprint(len(manifest)))
			if r.Method != http.MethodHead {
				w.Write(manifest)
			}
		case strings.HasPrefix(p, "/v2/"+repo+"/blobs/"):
			b, ok := blobs[strings.TrimPrefix(p, "/v2/"+repo+"/blobs/")]
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Length", fmt.Sprint(len(b)))
			if r.Method != http.MethodHead {
				w.Write(b)
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestCreatePullsMissingImage(t *testing.T) {
	base := testProvider(t)
	srv := fakeRegistry(t, "agentctl/pulltest", "1")
	ref := strings.TrimPrefix(srv.URL, "http://") + "/agentctl/pulltest:1"
	var mu sync.Mutex
	var progress []string
	p, err := New(context.Background(), Options{Progress: func(l string) {
		mu.Lock()
		progress = append(progress, l)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	t.Cleanup(func() {
		_, _ = base.Client().ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true})
	})
	spec := testSpec(t)
	spec.Image = ref
	sb, err := p.Create(context.Background(), spec)
	if err != nil {
		t.Fatalf("Create with an image to pull: %v", err)
	}
	defer sb.Delete(context.Background())
	if out := execOK(t, sb.(*Sandbox), "cat /proc/1/comm"); strings.TrimSpace(out) != "docker-init" {
		t.Fatalf("pulled sandbox: %q", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) == 0 || !strings.Contains(strings.Join(progress, "\n"), ref) {
		t.Fatalf("no pull progress reported: %q", progress)
	}
}
