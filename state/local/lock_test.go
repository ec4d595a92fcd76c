package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/state"
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

// TestForceUnlockAfterTheHolderIsKilled: the kernel lock a killed holder
// had is free at once, so force-unlock removes the info it left.
func TestForceUnlockAfterTheHolderIsKilled(t *testing.T) {
	d := openTestDir(t)
	h := startHelper(t, "hold", d.Path(), "apply", 0)
	id := h.lockedID(t)
	err := d.ForceUnlock(context.Background(), id)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("PID %d", h.cmd.Process.Pid)) {
		t.Fatalf("force-unlock of a live holder in another process: %v", err)
	}
	h.cmd.Process.Signal(syscall.SIGKILL)
	h.cmd.Wait()
	if err := d.ForceUnlock(context.Background(), id); err != nil {
		t.Fatalf("force-unlock: %v", err)
	}
	if info, err := d.ReadLockInfo(context.Background()); info != nil || err != nil {
		t.Fatalf("info after force-unlock: %+v %v", info, err)
	}
}

// TestForceUnlockRemovesDamagedInfo: lock info that cannot be read is
// removed by force-unlock whatever the ID given, once the lock is free,
// and kept while a holder has it.
func TestForceUnlockRemovesDamagedInfo(t *testing.T) {
	d := openTestDir(t)
	l, err := d.Lock(context.Background(), state.LockInfo{Operation: "apply"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.LockInfoPath(), []byte("{\"id\": "), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ReadLockInfo(context.Background()); !errors.Is(err, state.ErrDamagedLockInfo) {
		t.Fatalf("reading damaged info: %v, want state.ErrDamagedLockInfo", err)
	}
	var held *state.LockHeldError
	if err := d.ForceUnlock(context.Background(), "any"); !errors.As(err, &held) || held.Info != nil || !strings.Contains(err.Error(), "the holder still holds the lock on "+d.LockPath()) {
		t.Fatalf("force-unlock of damaged info under a live lock: %v", err)
	}
	l.Unlock(context.Background())
	if err := os.WriteFile(d.LockInfoPath(), []byte("{\"id\": "), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.ForceUnlock(context.Background(), "any"); err != nil {
		t.Fatalf("force-unlock of damaged info: %v", err)
	}
	if _, err := os.Stat(d.LockInfoPath()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the damaged info is still there: %v", err)
	}
}
