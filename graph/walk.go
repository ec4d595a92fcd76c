package graph

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrSkipped is wrapped by the error Walk records for a node that was not
// run because a dependency failed or was itself skipped, or because the
// walk was cancelled before the node could start.
var ErrSkipped = errors.New("skipped")

// Walk calls fn for every node, dependencies first, running up to
// parallelism nodes at once (parallelism < 1 means 1). A node whose
// dependency failed or was skipped is not run; its error wraps ErrSkipped
// and names the dependency. Once ctx is cancelled no new node starts;
// nodes not started get an error wrapping ErrSkipped and ctx.Err().
//
// The result maps every node that failed or was skipped to its error;
// nodes that succeeded are absent. A cyclic graph runs nothing: every
// node gets an error wrapping ErrCycle.
func (g *Graph) Walk(ctx context.Context, parallelism int, fn func(ctx context.Context, id string) error) map[string]error {
	errs := map[string]error{}
	if cs := g.Cycles(); len(cs) > 0 {
		_, err := g.TopoOrder()
		for _, n := range g.Nodes() {
			errs[n] = err
		}
		return errs
	}
	if parallelism < 1 {
		parallelism = 1
	}
	nodes := g.Nodes()
	pending := make(map[string]int, len(nodes))
	var ready []string
	for _, n := range nodes {
		pending[n] = len(g.out[n])
		if pending[n] == 0 {
			ready = append(ready, n)
		}
	}

	type result struct {
		id  string
		err error
	}
	results := make(chan result)
	var wg sync.WaitGroup
	running := 0
	done := 0

	// finish records a node's outcome and releases or skips its dependents.
	var finish func(id string, err error)
	finish = func(id string, err error) {
		done++
		if err != nil {
			errs[id] = err
		}
		for _, d := range g.DependentsOf(id) {
			pending[d]--
			if err != nil {
				if _, already := errs[d]; !already {
					// Skip d now; it is never scheduled because its
					// pending count stays >0 or it is marked here.
					errs[d] = fmt.Errorf("%w: dependency %s did not complete", ErrSkipped, id)
				}
			}
			if pending[d] == 0 {
				if e, failed := errs[d]; failed {
					finish(d, e)
				} else {
					ready = append(ready, d)
				}
			}
		}
	}

	for done < len(nodes) {
		for len(ready) > 0 && running < parallelism {
			id := ready[0]
			ready = ready[1:]
			if ctx.Err() != nil {
				finish(id, fmt.Errorf("%w: %w", ErrSkipped, ctx.Err()))
				continue
			}
			running++
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := fn(ctx, id)
				results <- result{id, err}
			}()
		}
		if running == 0 {
			// Nothing can make progress (should not happen on a DAG).
			break
		}
		r := <-results
		running--
		finish(r.id, r.err)
	}
	wg.Wait()
	return errs
}
