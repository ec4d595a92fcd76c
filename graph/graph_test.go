package graph

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNodesAndEdges(t *testing.T) {
	g := New()
	g.AddEdge("b", "a")
	g.AddEdge("c", "a")
	g.AddNode("d")
	if diff := cmp.Diff([]string{"a", "b", "c", "d"}, g.Nodes()); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff([]string{"b", "c"}, g.DependentsOf("a")); diff != "" {
		t.Error(diff)
	}
	if diff := cmp.Diff([]string{"a"}, g.DependenciesOf("b")); diff != "" {
		t.Error(diff)
	}
}

func TestTopoOrder(t *testing.T) {
	g := New()
	g.AddEdge("app", "db")
	g.AddEdge("app", "cache")
	g.AddEdge("cache", "db")
	order, err := g.TopoOrder()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"db", "cache", "app"}, order); diff != "" {
		t.Error(diff)
	}
}

func TestCycles(t *testing.T) {
	g := New()
	g.AddEdge("a", "b")
	g.AddEdge("b", "c")
	g.AddEdge("c", "a")
	g.AddEdge("d", "d")
	g.AddEdge("e", "a")
	want := [][]string{{"a", "b", "c"}, {"d"}}
	if diff := cmp.Diff(want, g.Cycles()); diff != "" {
		t.Error(diff)
	}
	if _, err := g.TopoOrder(); !errors.Is(err, ErrCycle) {
		t.Errorf("TopoOrder error = %v, want ErrCycle", err)
	}
	if New().Cycles() != nil {
		t.Error("empty graph has cycles")
	}
}

func TestTransitiveReduction(t *testing.T) {
	g := New()
	g.AddEdge("a", "b")
	g.AddEdge("b", "c")
	g.AddEdge("a", "c")
	g.AddLabeledEdge("c", "d", "x")
	g.AddEdge("a", "d")
	r := g.TransitiveReduction()
	want := []Edge{{"a", "b", ""}, {"b", "c", ""}, {"c", "d", "x"}}
	if diff := cmp.Diff(want, r.Edges()); diff != "" {
		t.Error(diff)
	}
	// The original is unchanged.
	if len(g.Edges()) != 5 {
		t.Errorf("original modified: %v", g.Edges())
	}
}

func TestWalkOrderAndFailure(t *testing.T) {
	g := New()
	g.AddEdge("b", "a")
	g.AddEdge("c", "b")
	g.AddEdge("d", "c")
	g.AddEdge("e", "a")
	g.AddNode("f")
	var mu sync.Mutex
	var ran []string
	boom := errors.New("boom")
	errs := g.Walk(context.Background(), 4, func(ctx context.Context, id string) error {
		mu.Lock()
		ran = append(ran, id)
		mu.Unlock()
		if id == "b" {
			return boom
		}
		return nil
	})
	for _, n := range []string{"c", "d"} {
		for _, r := range ran {
			if r == n {
				t.Errorf("%s ran although its dependency failed", n)
			}
		}
	}
	if !errors.Is(errs["b"], boom) {
		t.Errorf("b: %v", errs["b"])
	}
	if !errors.Is(errs["c"], ErrSkipped) || !strings.Contains(errs["c"].Error(), "b") {
		t.Errorf("c: %v", errs["c"])
	}
	if !errors.Is(errs["d"], ErrSkipped) || !strings.Contains(errs["d"].Error(), "c") {
		t.Errorf("d: %v", errs["d"])
	}
	for _, n := range []string{"a", "e", "f"} {
		if errs[n] != nil {
			t.Errorf("%s: %v", n, errs[n])
		}
	}
	if len(ran) != 4 {
		t.Errorf("ran %v, want a, b, e, f", ran)
	}
}

func TestWalkDependenciesFirst(t *testing.T) {
	g := New()
	for i := 0; i < 20; i++ {
		g.AddEdge(fmt.Sprintf("n%02d", i+1), fmt.Sprintf("n%02d", i))
		g.AddEdge(fmt.Sprintf("m%02d", i), fmt.Sprintf("n%02d", i))
	}
	var mu sync.Mutex
	finished := map[string]bool{}
	errs := g.Walk(context.Background(), 3, func(ctx context.Context, id string) error {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range g.DependenciesOf(id) {
			if !finished[d] {
				return fmt.Errorf("%s started before %s finished", id, d)
			}
		}
		finished[id] = true
		return nil
	})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if len(finished) != len(g.Nodes()) {
		t.Errorf("ran %d of %d nodes", len(finished), len(g.Nodes()))
	}
}

// TestWalkParallelismLimit checks that exactly `limit` independent nodes
// run at once: each node waits until `limit` nodes are inside fn (a
// barrier), so a walker running fewer would deadlock and one running more
// is caught by the counter.
func TestWalkParallelismLimit(t *testing.T) {
	const limit = 3
	g := New()
	for i := 0; i < 12; i++ {
		g.AddNode(fmt.Sprintf("n%02d", i))
	}
	var cur, maxSeen atomic.Int32
	var mu sync.Mutex
	arrived := 0
	release := make(chan struct{})
	errs := g.Walk(context.Background(), limit, func(ctx context.Context, id string) error {
		n := cur.Add(1)
		for {
			m := maxSeen.Load()
			if n <= m || maxSeen.CompareAndSwap(m, n) {
				break
			}
		}
		mu.Lock()
		arrived++
		if arrived == limit {
			close(release)
		}
		mu.Unlock()
		<-release
		cur.Add(-1)
		return nil
	})
	if len(errs) != 0 {
		t.Fatal(errs)
	}
	if got := maxSeen.Load(); got != limit {
		t.Errorf("max concurrent = %d, want %d", got, limit)
	}
}

func TestWalkCancel(t *testing.T) {
	g := New()
	g.AddEdge("b", "a")
	g.AddEdge("c", "b")
	ctx, cancel := context.WithCancel(context.Background())
	errs := g.Walk(ctx, 2, func(ctx context.Context, id string) error {
		if id == "a" {
			cancel()
		}
		return nil
	})
	if errs["a"] != nil {
		t.Errorf("a: %v", errs["a"])
	}
	if !errors.Is(errs["b"], ErrSkipped) || !errors.Is(errs["b"], context.Canceled) {
		t.Errorf("b: %v", errs["b"])
	}
	if !errors.Is(errs["c"], ErrSkipped) {
		t.Errorf("c: %v", errs["c"])
	}
}

func TestWalkCycle(t *testing.T) {
	g := New()
	g.AddEdge("a", "b")
	g.AddEdge("b", "a")
	called := false
	errs := g.Walk(context.Background(), 1, func(ctx context.Context, id string) error {
		called = true
		return nil
	})
	if called || !errors.Is(errs["a"], ErrCycle) {
		t.Errorf("called=%v errs=%v", called, errs)
	}
}

func TestRender(t *testing.T) {
	g := New()
	g.AddLabeledEdge("agent.a", "agent.b", "handoff")
	g.AddEdge("agent.b", "agent.c")
	dot := g.DOT("agents")
	for _, want := range []string{`digraph "agents" {`, `"agent.a" -> "agent.b" [label="handoff"];`, `"agent.b" -> "agent.c";`} {
		if !strings.Contains(dot, want) {
			t.Errorf("DOT missing %q:\n%s", want, dot)
		}
	}
	mm := g.Mermaid()
	for _, want := range []string{"flowchart LR", `n0["agent.a"]`, `n0 -->|"handoff"| n1`, "n1 --> n2"} {
		if !strings.Contains(mm, want) {
			t.Errorf("Mermaid missing %q:\n%s", want, mm)
		}
	}
}
