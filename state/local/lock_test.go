package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/agentctl/agentctl/state"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The lock tests run lockers in separate processes by re-executing the test
// binary in a helper mode selected by STATE_LOCK_HELPER:
//
//	hold  take the lock (operation from STATE_LOCK_OP), print "LOCKED <id>",
//	      hold it until stdin is closed, release it, print "UNLOCKED"
//	try   try once (timeout STATE_LOCK_TIMEOUT), print "LOCKED <id>" or
//	      "ERROR <message>", release, exit
func TestMain(m *testing.M) {
	if mode := os.Getenv("STATE_LOCK_HELPER"); mode != "" {
		os.Exit(lockHelper(mode, os.Getenv("STATE_LOCK_DIR")))
	}
	os.Exit(m.Run())
}

func lockHelper(mode, dir string) int {
	d, err := OpenDir(dir)
	if err != nil {
		fmt.Println("ERROR", err)
		return 3
	}
	timeout, _ := time.ParseDuration(os.Getenv("STATE_LOCK_TIMEOUT"))
	l, err := d.Lock(context.Background(), state.LockInfo{Operation: os.Getenv("STATE_LOCK_OP")}, timeout)
	if err != nil {
		fmt.Println("ERROR", err)
		return 3
	}
	fmt.Println("LOCKED", l.Info().ID)
	if mode == "hold" {
		io.Copy(io.Discard, os.Stdin)
	}
	if err := l.Unlock(context.Background()); err != nil {
		fmt.Println("ERROR", err)
		return 3
	}
	fmt.Println("UNLOCKED")
	return 0
}

type helperProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startHelper(t *testing.T, mode, dir, op string, timeout time.Duration) *helperProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "STATE_LOCK_HELPER="+mode, "STATE_LOCK_DIR="+dir,
		"STATE_LOCK_OP="+op, "STATE_LOCK_TIMEOUT="+timeout.String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helperProc{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(func() {
		stdin.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	return h
}

func (h *helperProc) line(t *testing.T) string {
	t.Helper()
	s, err := h.out.ReadString('\n')
	if err != nil {
		t.Fatalf("reading helper output: %v (got %q)", err, s)
	}
	return strings.TrimSpace(s)
}

func (h *helperProc) lockedID(t *testing.T) string {
	t.Helper()
	l := h.line(t)
	id, ok := strings.CutPrefix(l, "LOCKED ")
	if !ok {
		t.Fatalf("helper did not lock: %s", l)
	}
	return id
}

func TestSecondLockerInAnotherProcessFailsNamingHolder(t *testing.T) {
	d := openTestDir(t)
	l, err := d.Lock(context.Background(), state.LockInfo{Operation: "apply"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())

	h := startHelper(t, "try", d.Path(), "plan", 0)
	got := h.line(t)
	if !strings.HasPrefix(got, "ERROR ") {
		t.Fatalf("second locker: %s", got)
	}
	info := l.Info()
	for _, want := range []string{info.Who, `"apply"`, info.ID, fmt.Sprintf("PID %d", os.Getpid()), "-lock-timeout", "the next command replaces the lock info it left"} {
		if !strings.Contains(got, want) {
			t.Errorf("lock error %q does not mention %q", got, want)
		}
	}
	if err := h.cmd.Wait(); err == nil {
		t.Error("second locker exited 0")
	}
}

func TestLockedErrorInProcess(t *testing.T) {
	d := openTestDir(t)
	l, err := d.Lock(context.Background(), state.LockInfo{Operation: "apply"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A second open file in the same process is a second locker too.
	d2, _ := OpenDir(d.Path())
	_, err = d2.Lock(context.Background(), state.LockInfo{Operation: "plan"}, 0)
	var le *state.LockedError
	if !errors.As(err, &le) || le.Info == nil || le.Info.ID != l.Info().ID {
		t.Fatalf("err = %v", err)
	}
	// A cancelled context stops a wait.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := d2.Lock(ctx, state.LockInfo{Operation: "plan"}, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled wait: %v", err)
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	if info, _ := d.ReadLockInfo(context.Background()); info != nil {
		t.Fatalf("lock info left after unlock: %+v", info)
	}
	l2, err := d2.Lock(context.Background(), state.LockInfo{Operation: "plan"}, 0)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	l2.Unlock(context.Background())
	if err := l2.Unlock(context.Background()); err != nil {
		t.Fatalf("second unlock: %v", err)
	}
}

func TestLockTimeoutWaitsForRelease(t *testing.T) {
	d := openTestDir(t)
	h := startHelper(t, "hold", d.Path(), "apply", 0)
	holder := h.lockedID(t)

	// Without a timeout, the lock fails; with one, it waits.
	if _, err := d.Lock(context.Background(), state.LockInfo{Operation: "apply"}, 0); err == nil {
		t.Fatal("lock succeeded while held by another process")
	}
	released := make(chan struct{})
	type result struct {
		l   state.Lease
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := d.Lock(context.Background(), state.LockInfo{Operation: "apply"}, 10*time.Minute)
		select {
		case <-released:
		default:
			err = fmt.Errorf("Lock returned before the holder released it (err %v)", err)
		}
		done <- result{l, err}
	}()
	// Let the waiter retry a few times, then release.
	time.Sleep(200 * time.Millisecond)
	close(released)
	h.stdin.Close()
	if got := h.line(t); got != "UNLOCKED" {
		t.Fatalf("holder: %s", got)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	defer r.l.Unlock(context.Background())
	if r.l.Info().ID == holder {
		t.Fatal("reused the holder's ID")
	}
	info, err := d.ReadLockInfo(context.Background())
	if err != nil || info == nil || info.ID != r.l.Info().ID {
		t.Fatalf("lock info = %+v, %v", info, err)
	}
}

func TestLockTimeoutExpires(t *testing.T) {
	d := openTestDir(t)
	h := startHelper(t, "hold", d.Path(), "destroy", 0)
	h.lockedID(t)
	_, err := d.Lock(context.Background(), state.LockInfo{Operation: "apply"}, 100*time.Millisecond)
	var le *state.LockedError
	if !errors.As(err, &le) || le.Waited == 0 || !strings.Contains(err.Error(), "still locked after waiting") || !strings.Contains(err.Error(), `"destroy"`) {
		t.Fatalf("err = %v", err)
	}
}

func TestLockReleasedWhenHolderIsKilled(t *testing.T) {
	d := openTestDir(t)
	h := startHelper(t, "hold", d.Path(), "apply", 0)
	id := h.lockedID(t)
	if _, err := d.Lock(context.Background(), state.LockInfo{Operation: "plan"}, 0); err == nil {
		t.Fatal("lock succeeded while held")
	}
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	h.cmd.Wait()

	// The dead holder's info is still there, but the lock is free.
	info, err := d.ReadLockInfo(context.Background())
	if err != nil || info == nil || info.ID != id {
		t.Fatalf("stale info = %+v, %v", info, err)
	}
	l, err := d.Lock(context.Background(), state.LockInfo{Operation: "plan"}, 0)
	if err != nil {
		t.Fatalf("lock after the holder was killed: %v", err)
	}
	if info, _ := d.ReadLockInfo(context.Background()); info == nil || info.ID != l.Info().ID {
		t.Fatalf("info not replaced: %+v", info)
	}
	l.Unlock(context.Background())
}

func TestForceUnlock(t *testing.T) {
	d := openTestDir(t)
	if err := d.ForceUnlock(context.Background(), "nope"); !errors.Is(err, state.ErrNotLocked) {
		t.Fatalf("force-unlock of an unlocked state: %v", err)
	}

	// A live holder keeps its lock.
	h := startHelper(t, "hold", d.Path(), "apply", 0)
	id := h.lockedID(t)
	if err := d.ForceUnlock(context.Background(), "wrong-id"); err == nil || !strings.Contains(err.Error(), "does not match") || !strings.Contains(err.Error(), id) {
		t.Fatalf("wrong ID: %v", err)
	}
	err := d.ForceUnlock(context.Background(), id)
	if err == nil || !strings.Contains(err.Error(), "still holds the lock") || !strings.Contains(err.Error(), fmt.Sprintf("PID %d", h.cmd.Process.Pid)) {
		t.Fatalf("force-unlock of a live holder: %v", err)
	}
	if _, err := d.Lock(context.Background(), state.LockInfo{Operation: "plan"}, 0); err == nil {
		t.Fatal("lock taken from a live holder")
	}

	// Once it dies, force-unlock removes what it left.
	h.cmd.Process.Signal(syscall.SIGKILL)
	h.cmd.Wait()
	if err := d.ForceUnlock(context.Background(), "wrong-id"); err == nil {
		t.Fatal("wrong ID accepted after holder died")
	}
	if err := d.ForceUnlock(context.Background(), id); err != nil {
		t.Fatalf("force-unlock: %v", err)
	}
	if info, err := d.ReadLockInfo(context.Background()); info != nil || err != nil {
		t.Fatalf("info after force-unlock: %+v %v", info, err)
	}
	l, err := d.Lock(context.Background(), state.LockInfo{Operation: "apply"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Unlock(context.Background())
}

func TestWriteRefusedWhenLockLost(t *testing.T) {
	d := openTestDir(t)
	l, err := d.Lock(context.Background(), state.LockInfo{Operation: "apply"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(context.Background())
	s := state.New()
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	// Someone deletes the lock file by hand: a second writer could now
	// lock a new file, so this one must stop writing.
	os.Remove(d.LockPath())
	if err := d.Write(context.Background(), s); err == nil || !strings.Contains(err.Error(), "state lock lost") {
		t.Fatalf("write after the lock file was removed: %v", err)
	}
	if s.Serial != 1 {
		t.Fatalf("serial = %d", s.Serial)
	}
}
