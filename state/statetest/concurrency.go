package statetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/state"
)

var concurrencyTests = []subtest{
	{"writers taking turns under the lock lose no change", func(t *testing.T, h Harness) {
		write(t, h.Open(t, nil), state.New())
		const clients, rounds = 3, 4
		var wg sync.WaitGroup
		errs := make(chan error, clients*rounds)
		for c := range clients {
			s := h.Open(t, nil)
			wg.Go(func() {
				for r := range rounds {
					errs <- turn(t, s, fmt.Sprintf("run.c%d_r%d", c, r))
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		back := read(t, h.Open(t, nil))
		if len(back.Runs) != clients*rounds {
			t.Fatalf("%d runs recorded of the %d appended: %v", len(back.Runs), clients*rounds, back.RunAddresses())
		}
		// Each change made the serial at least one more than the
		// first write's (the release's compaction may add its own).
		if back.Serial < 1+clients*rounds {
			t.Fatalf("serial %d after %d changes, want at least %d", back.Serial, clients*rounds, 1+clients*rounds)
		}
	}},
}

// turn is one writer's turn: it takes the lock (waiting for it), reads,
// records the run addr, and releases the lock.
func turn(t *testing.T, s state.Store, addr string) error {
	l, err := s.Lock(ctx(t), state.LockInfo{Operation: "apply"}, time.Minute)
	if err != nil {
		return fmt.Errorf("%s: Lock: %w", addr, err)
	}
	st, err := s.Read(ctx(t))
	if err == nil {
		st.Runs[addr] = &state.Run{Address: addr, Status: state.RunCompleted}
		err = s.Append(ctx(t), st, state.RunRef(addr))
	}
	if uerr := l.Unlock(ctx(t)); err == nil && uerr != nil {
		err = uerr
	}
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	return nil
}
