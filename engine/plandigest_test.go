package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestPlanCreateLeavesLocalDirToCopy: a plan that creates a sandbox does
// not read a new local_dir (the digest cache stays empty: nothing was
// hashed); the apply's copy hashes it, records the same digest a full
// read gives (a later plan without the cache finds no change) and
// remembers it. A recorded run of a sandbox created again is planned as
// re-run and found unchanged during apply, not executed again.
func TestPlanCreateLeavesLocalDirToCopy(t *testing.T) {
	dir := t.TempDir()
	for i := range 20 {
		p := filepath.Join(dir, "data", fmt.Sprintf("d%d", i%3), fmt.Sprintf("f%02d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.Repeat("x", i*100)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(2100 * time.Millisecond) // older than the digest cache's racy window
	src := `
provider "scripted" {
  script "a" {
    reply { text = "done" }
  }
}
provider "local" { isolation = "none" }
manifest "m" {
  local_dir "data" { source = "data" }
}
sandbox "s" {
  provider = provider.local
  manifest = manifest.m
}
agent "a" {
  provider     = provider.scripted
  instructions = "x"
  sandbox      = sandbox.s
}
run "r" {
  agent = agent.a
  input = "go"
}
`
	e := engineIn(t, dir, src)
	cache := filepath.Join(dir, ".agentctl", digestCacheFile)
	ctx := context.Background()
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(ctx, st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Change("sandbox.s"); c == nil || c.Action != ActionCreate {
		t.Fatalf("sandbox.s: %+v", c)
	}
	if _, err := os.Stat(cache); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the plan of a new sandbox hashed its local_dir (digest cache: %v)", err)
	}
	if err := e.Apply(ctx, st, p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(cache); err != nil {
		t.Fatalf("the copy's digest was not remembered: %v", err)
	}
	if err := os.Remove(cache); err != nil {
		t.Fatal(err)
	}
	if p, err := e.Plan(ctx, st, PlanOptions{Refresh: true}); err != nil || p.HasChanges() {
		t.Fatalf("plan after apply, the tree read again: %v, changes %+v", err, p)
	}

	// Created again by a new command (and the tree not remembered): the
	// run waits for it.
	if err := os.Remove(cache); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	e = engineIn(t, dir, src)
	p, err = e.Plan(ctx, st, PlanOptions{Refresh: true, Replace: []string{"sandbox.s"}})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Change("run.r")
	if c == nil || c.Action != ActionRerun || len(c.Reasons) != 1 || !strings.Contains(c.Reasons[0], "sandbox.s is created first") {
		t.Fatalf("run.r after -replace=sandbox.s: %+v", c)
	}
	var mu sync.Mutex
	var done []Event
	e.Events = func(ev Event) {
		if ev.Address == "run.r" && ev.Type == EventApplyComplete {
			mu.Lock()
			done = append(done, ev)
			mu.Unlock()
		}
	}
	if err := e.Apply(ctx, st, p); err != nil {
		t.Fatal(err)
	}
	if len(done) != 1 || done[0].Action != ActionNoop || !strings.Contains(done[0].Message, "inputs unchanged") {
		t.Fatalf("run.r during apply: %+v; want it found unchanged", done)
	}
}
