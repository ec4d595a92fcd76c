package statetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/agentctl/agentctl/state"
)

var lockTests = []subtest{
	{"a second client's lock fails naming the holder", func(t *testing.T, h Harness) {
		l := lock(t, h.Open(t, nil), "apply")
		_, err := h.Open(t, nil).Lock(ctx(t), state.LockInfo{Operation: "plan"}, 0)
		var le *state.LockedError
		if !errors.As(err, &le) {
			t.Fatalf("second lock: %v, want a *state.LockedError", err)
		}
		if le.Info == nil || *le.Info != l.Info() {
			t.Fatalf("the error names holder %+v, want %+v", le.Info, l.Info())
		}
		info := l.Info()
		wantContains(t, "the lock error", err, info.ID, info.Who, `"apply"`, fmt.Sprintf("PID %d", os.Getpid()), "-lock-timeout")
	}},
	{"the lock's info names its holder until it is released", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		l, err := s.Lock(ctx(t), state.LockInfo{Operation: "destroy"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		info := l.Info()
		if info.ID == "" || info.Who == "" || info.PID != os.Getpid() || info.Operation != "destroy" || info.Created.IsZero() {
			t.Fatalf("lease info %+v: want an ID, who, this PID, the operation and when", info)
		}
		got, err := h.Open(t, nil).ReadLockInfo(ctx(t))
		if err != nil || got == nil || *got != info {
			t.Fatalf("ReadLockInfo from another client: %+v, %v; want %+v", got, err, info)
		}
		if err := l.Check(ctx(t)); err != nil {
			t.Fatalf("Check of a held lock: %v", err)
		}
		if err := l.Unlock(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if got, err := h.Open(t, nil).ReadLockInfo(ctx(t)); err != nil || got != nil {
			t.Fatalf("ReadLockInfo after the release: %+v, %v; want none", got, err)
		}
		if err := l.Check(ctx(t)); err == nil {
			t.Fatal("Check of a released lock passed")
		}
		if err := l.Unlock(ctx(t)); err != nil {
			t.Fatalf("a second Unlock: %v, want nothing to do", err)
		}
	}},
	{"a released lock can be taken by another client", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		l, err := s.Lock(ctx(t), state.LockInfo{Operation: "apply"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx(t)); err != nil {
			t.Fatal(err)
		}
		l2 := lock(t, h.Open(t, nil), "plan")
		if l2.Info().ID == l.Info().ID {
			t.Fatal("the second lock reused the first one's ID")
		}
		if _, err := s.Lock(ctx(t), state.LockInfo{Operation: "apply"}, 0); err == nil {
			t.Fatal("the first client took the lock back while the second held it")
		}
	}},
	{"a lock waits up to its timeout, then fails saying so", func(t *testing.T, h Harness) {
		lock(t, h.Open(t, nil), "destroy")
		start := time.Now()
		_, err := h.Open(t, nil).Lock(ctx(t), state.LockInfo{Operation: "apply"}, 150*time.Millisecond)
		var le *state.LockedError
		if !errors.As(err, &le) || le.Waited != 150*time.Millisecond {
			t.Fatalf("lock with a timeout: %v; want a *state.LockedError that waited 150ms", err)
		}
		if waited := time.Since(start); waited < 150*time.Millisecond {
			t.Errorf("returned after %s, before its timeout", waited)
		}
		wantContains(t, "the lock error", err, "still locked after waiting", `"destroy"`)
	}},
	{"a lock waiting for the holder gets it once released", func(t *testing.T, h Harness) {
		l := lock(t, h.Open(t, nil), "apply")
		type result struct {
			l   state.Lease
			err error
		}
		done := make(chan result, 1)
		go func() {
			l, err := h.Open(t, nil).Lock(ctx(t), state.LockInfo{Operation: "plan"}, time.Minute)
			done <- result{l, err}
		}()
		time.Sleep(200 * time.Millisecond)
		select {
		case r := <-done:
			t.Fatalf("the waiter returned while the lock was held: %v", r.err)
		default:
		}
		if err := l.Unlock(ctx(t)); err != nil {
			t.Fatal(err)
		}
		r := <-done
		if r.err != nil {
			t.Fatalf("the waiter: %v", r.err)
		}
		defer r.l.Unlock(context.Background())
		if r.l.Info().Operation != "plan" {
			t.Fatalf("the waiter holds %+v", r.l.Info())
		}
	}},
	{"cancelling the context ends the wait", func(t *testing.T, h Harness) {
		lock(t, h.Open(t, nil), "apply")
		c, cancel := context.WithTimeout(ctx(t), 100*time.Millisecond)
		defer cancel()
		_, err := h.Open(t, nil).Lock(c, state.LockInfo{Operation: "plan"}, time.Hour)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("a wait whose context ended: %v, want context.DeadlineExceeded", err)
		}
	}},
	{"a holder that lost its lock leaves its info, which the next lock replaces", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		l := lock(t, s, "apply")
		h.LoseLock(t, s, l)
		other := h.Open(t, nil)
		if info, err := other.ReadLockInfo(ctx(t)); err != nil || info == nil || info.ID != l.Info().ID {
			t.Fatalf("the lost holder's info: %+v, %v; want it kept", info, err)
		}
		l2 := lock(t, other, "plan")
		if info, err := other.ReadLockInfo(ctx(t)); err != nil || info == nil || info.ID != l2.Info().ID {
			t.Fatalf("info after the next lock: %+v, %v; want the new holder's", info, err)
		}
	}},
	{"a lost lock refuses writes and leaves the serial as it was", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		l := lock(t, s, "apply")
		st := sample()
		write(t, s, st)
		h.LoseLock(t, s, l)
		if err := l.Check(ctx(t)); err == nil {
			t.Fatal("Check of a lost lock passed")
		}
		st.Runs[`run.review["pricing"]`].Turns = 99
		if err := s.Append(ctx(t), st, state.RunRef(`run.review["pricing"]`)); err == nil {
			t.Fatal("Append under a lost lock succeeded")
		}
		if err := s.Write(ctx(t), st); err == nil {
			t.Fatal("Write under a lost lock succeeded")
		}
		if st.Serial != 1 {
			t.Fatalf("refused writes changed the serial to %d", st.Serial)
		}
		if back := read(t, h.Open(t, nil)); back.Serial != 1 || back.Runs[`run.review["pricing"]`].Turns != 3 {
			t.Fatalf("a refused write reached the store: serial %d, turns %d", back.Serial, back.Runs[`run.review["pricing"]`].Turns)
		}
	}},
	{"force-unlock of an unlocked state says it is not locked", func(t *testing.T, h Harness) {
		if err := h.Open(t, nil).ForceUnlock(ctx(t), "some-id"); !errors.Is(err, state.ErrNotLocked) {
			t.Fatalf("force-unlock: %v, want state.ErrNotLocked", err)
		}
	}},
	{"force-unlock refuses another lock's ID, naming the current one", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		l := lock(t, s, "apply")
		h.LoseLock(t, s, l)
		err := h.Open(t, nil).ForceUnlock(ctx(t), "wrong-id")
		wantContains(t, "force-unlock of a wrong ID", err, "does not match", l.Info().ID)
	}},
	{"force-unlock refuses while the holder is alive", func(t *testing.T, h Harness) {
		l := lock(t, h.Open(t, nil), "apply")
		other := h.Open(t, nil)
		err := other.ForceUnlock(ctx(t), l.Info().ID)
		var held *state.LockHeldError
		if !errors.As(err, &held) {
			t.Fatalf("force-unlock of a live holder: %v, want a *state.LockHeldError", err)
		}
		wantContains(t, "the refusal", err, "still holds", fmt.Sprintf("PID %d", os.Getpid()))
		if err := l.Check(ctx(t)); err != nil {
			t.Fatalf("the holder lost its lock to a refused force-unlock: %v", err)
		}
		if _, err := other.Lock(ctx(t), state.LockInfo{Operation: "plan"}, 0); err == nil {
			t.Fatal("the lock was taken from a live holder")
		}
	}},
	{"force-unlock removes the info a lost holder left", func(t *testing.T, h Harness) {
		s := h.Open(t, nil)
		l := lock(t, s, "apply")
		h.LoseLock(t, s, l)
		other := h.Open(t, nil)
		if err := other.ForceUnlock(ctx(t), l.Info().ID); err != nil {
			t.Fatalf("force-unlock of a lost holder's info: %v", err)
		}
		if info, err := other.ReadLockInfo(ctx(t)); err != nil || info != nil {
			t.Fatalf("info after force-unlock: %+v, %v; want none", info, err)
		}
		if err := other.ForceUnlock(ctx(t), l.Info().ID); !errors.Is(err, state.ErrNotLocked) {
			t.Fatalf("a second force-unlock: %v, want state.ErrNotLocked", err)
		}
		lock(t, other, "plan")
	}},
}
