package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkPlanLocalDir: plan of a sandbox whose manifest copies an
// unchanged 100 MB local_dir (2,000 files), against the same plan with an
// empty manifest and against the same plan without the digest cache (the
// tree read and hashed again):
//
//	go test ./engine -run '^$' -bench PlanLocalDir -benchtime 20x
func BenchmarkPlanLocalDir(b *testing.B) {
	dir := b.TempDir()
	data := filepath.Join(dir, "data")
	buf := make([]byte, 50<<10)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	for i := range 2000 {
		p := filepath.Join(data, fmt.Sprintf("d%02d", i/100), fmt.Sprintf("f%04d", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		buf[0] = byte(i)
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	// Older than the racy window, as a checked-out tree is.
	time.Sleep(2100 * time.Millisecond)
	withDir := `manifest "m" {
  local_dir "data" { source = "data" }
}`
	for _, tc := range []struct {
		name, manifest string
		uncached       bool
	}{
		{"empty_manifest", `manifest "m" {}`, false},
		{"local_dir_100MB", withDir, false},
		{"local_dir_100MB_uncached", withDir, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			src := tc.manifest + `
provider "local" { isolation = "none" }
sandbox "s" {
  provider = provider.local
  manifest = manifest.m
}
`
			if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
				b.Fatal(err)
			}
			planApply(b, reloadDir(b, dir), PlanOptions{})
			for b.Loop() {
				if tc.uncached {
					os.Remove(filepath.Join(dir, ".agentctl", digestCacheFile))
				}
				e := reloadDir(b, dir)
				st, err := e.State.Read(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				p, err := e.Plan(b.Context(), st, PlanOptions{Refresh: true})
				if err != nil || p.HasChanges() {
					b.Fatalf("plan: %v, changes %v", err, p.HasChanges())
				}
			}
		})
	}
}
