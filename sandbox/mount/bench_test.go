//go:build linux

package mount_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/internal/objtest"
	"github.com/agentctl/agentctl/sandbox/mount"
)

// benchRoom fills a bucket with 1,000 files of 100 KiB (about 100 MB)
// under deals/, in 10 directories.
func benchRoom(b *testing.B) (*objtest.S3, mount.Def) {
	objtest.NeedMounts(b)
	s := objtest.StartS3(b)
	s.CreateBucket(b, "room")
	content := strings.Repeat("0123456789abcdef", 100*1024/16)
	for i := range 1000 {
		s.Put(b, "room", fmt.Sprintf("deals/d%d/f%03d.txt", i%10, i), content)
	}
	def := mount.Def{Kind: mount.KindS3, Path: "data", Bucket: "room", Prefix: "deals", Endpoint: s.URL, Region: s.Region,
		Secrets: mount.Secrets{AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey}}
	return s, def
}

// BenchmarkMountRead reads every file of the prefix through a fresh
// mount, 8 at a time (as a search tool would), mount included.
//
//	go test ./sandbox/mount -run '^$' -bench 'MountRead|RcloneCopy' -benchtime 3x
func BenchmarkMountRead(b *testing.B) {
	_, def := benchRoom(b)
	m := &mount.Mounter{Dir: filepath.Join(b.TempDir(), "mounts"), Environ: os.Environ()}
	for i := 0; b.Loop(); i++ {
		o := mount.Owner{Lineage: "bench", Address: fmt.Sprintf("sandbox.b%d", i)}
		dir, err := m.Mount(context.Background(), o, def)
		if err != nil {
			b.Fatal(err)
		}
		n, err := readAll(dir)
		if err != nil || n != 1000*100*1024 {
			b.Fatalf("read %d bytes: %v", n, err)
		}
		if err := m.Clear(context.Background(), o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRcloneCopy copies the same prefix with `rclone copy` (its
// default 4 transfers and 8 checkers) into a fresh directory.
func BenchmarkRcloneCopy(b *testing.B) {
	_, def := benchRoom(b)
	m := &mount.Mounter{Dir: b.TempDir(), Environ: os.Environ()}
	for b.Loop() {
		dst := filepath.Join(b.TempDir(), "copy")
		cmd := exec.Command("rclone", "copy", "--config", filepath.Join(m.Dir, "rclone.conf"), "store:room/deals", dst)
		cmd.Env = append(mount.CleanEnviron(os.Environ()), mount.BenchEnv(def)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("rclone copy: %v\n%s", err, out)
		}
	}
}

func readAll(dir string) (int64, error) {
	var files []string
	err := filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		return 0, err
	}
	var total int64
	var mu sync.Mutex
	var first error
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for _, f := range files {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			b, err := os.ReadFile(f)
			mu.Lock()
			defer mu.Unlock()
			total += int64(len(b))
			if err != nil && first == nil {
				first = err
			}
		}()
	}
	wg.Wait()
	return total, first
}
