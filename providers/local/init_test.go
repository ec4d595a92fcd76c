package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

// startLong runs PROGRAM 1000 (a copy of sleep named marker) in the
// background and returns a channel with its result.
func startLong(t *testing.T, sb *local.Sandbox, ctx context.Context, marker string) <-chan error {
	t.Helper()
	sh(t, sb, "cp /bin/sleep ./"+marker)
	done := make(chan error, 1)
	go func() {
		_, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"./" + marker, "1000"}})
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(findProcesses(marker)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the long command never started")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return done
}

// TestCommandsAreIndependent: one sandbox runs a long command while others
// start, finish and time out; a timeout kills only its own command.
func TestCommandsAreIndependent(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso string) {
		sb, _ := newSandbox(t, local.Options{Isolation: iso}, sandbox.Spec{})
		long := "agentctl-long-" + filepath.Base(sb.ID())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := startLong(t, sb, ctx, long)

		if res := sh(t, sb, "echo quick"); string(res.Stdout) != "quick\n" {
			t.Fatalf("quick command beside a long one: %+v", res)
		}
		short := "agentctl-short-" + filepath.Base(sb.ID())
		sh(t, sb, "cp /bin/sleep ./"+short)
		res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Shell: "./" + short + " 1000 & ./" + short + " 1000", Timeout: 300 * time.Millisecond})
		if err != nil || !res.TimedOut {
			t.Fatalf("timed command = %+v, %v", res, err)
		}
		waitNoProcess(t, short)
		select {
		case err := <-done:
			t.Fatalf("the long command ended with another's timeout: %v", err)
		default:
		}
		if len(findProcesses(long)) == 0 {
			t.Fatal("the long command was killed by another's timeout")
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled long command = %v", err)
		}
		waitNoProcess(t, long)
	})
}

// TestBackgroundJobsEndWithCommand: what a command leaves running is
// killed when it exits.
func TestBackgroundJobsEndWithCommand(t *testing.T) {
	forEachIsolation(t, func(t *testing.T, iso string) {
		sb, _ := newSandbox(t, local.Options{Isolation: iso}, sandbox.Spec{})
		marker := "agentctl-bg-" + filepath.Base(sb.ID())
		sh(t, sb, "cp /bin/sleep ./"+marker)
		res := sh(t, sb, "./"+marker+" 1000 >/dev/null 2>&1 & echo started")
		if string(res.Stdout) != "started\n" {
			t.Fatalf("%+v", res)
		}
		waitNoProcess(t, marker)
	})
}

// TestStopEndsCommands: Stop and Close end running commands; a closed
// sandbox runs commands again, a stopped one after Start.
func TestStopEndsCommands(t *testing.T) {
	requireNamespaces(t)
	sb, _ := newSandbox(t, local.Options{}, sandbox.Spec{})
	ctx := context.Background()
	marker := "agentctl-stop-" + filepath.Base(sb.ID())
	done := startLong(t, sb, ctx, marker)
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil || !strings.Contains(err.Error(), "init process died") {
		t.Fatalf("command of a closed sandbox = %v", err)
	}
	waitNoProcess(t, marker)
	if res := sh(t, sb, "echo again"); string(res.Stdout) != "again\n" {
		t.Fatalf("after Close: %+v", res)
	}
	done = startLong(t, sb, ctx, marker)
	if err := sb.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	<-done
	waitNoProcess(t, marker)
	if _, err := sb.Exec(ctx, sandbox.ExecRequest{Shell: "true"}); err == nil {
		t.Fatal("a stopped sandbox ran a command")
	}
	if err := sb.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if res := sh(t, sb, "echo started"); string(res.Stdout) != "started\n" {
		t.Fatalf("after Start: %+v", res)
	}
}

// TestCommandProcessView: each command has a PID namespace and /proc of
// its own: it is PID 2 under a PID 1 that reaps for it, and does not see
// other commands of the sandbox.
func TestCommandProcessView(t *testing.T) {
	requireNamespaces(t)
	sb, _ := newSandbox(t, local.Options{}, sandbox.Spec{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	marker := "agentctl-view-" + filepath.Base(sb.ID())
	done := startLong(t, sb, ctx, marker)
	res := sh(t, sb, "echo $$; ls /proc | grep -c '^[0-9]'; cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' '")
	out := string(res.Stdout)
	if strings.Contains(out, marker) {
		t.Fatalf("a command sees other processes of the sandbox:\n%s", out)
	}
	if lines := strings.Split(out, "\n"); len(lines) < 2 || lines[0] != "2" {
		t.Fatalf("command pid and process count:\n%s", out)
	}
	cancel()
	<-done
}

// initPIDs lists this process's children that are sandbox inits.
func initPIDs() []int {
	var pids []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", os.Getpid()))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, p := range strings.Fields(string(b)) {
			cmdline, _ := os.ReadFile("/proc/" + p + "/cmdline")
			if pid, err := strconv.Atoi(p); err == nil && bytes.HasPrefix(cmdline, []byte("agentctl-sandbox-init")) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// TestInitRestartsAfterDying: when the sandbox's init is killed from
// outside, the next command starts a new one; Delete leaves none behind.
func TestInitRestartsAfterDying(t *testing.T) {
	requireNamespaces(t)
	sb, _ := newSandbox(t, local.Options{}, sandbox.Spec{})
	sh(t, sb, "echo kept > /tmp/state")
	pids := initPIDs()
	if len(pids) != 1 {
		t.Fatalf("sandbox inits running: %v, want one", pids)
	}
	syscall.Kill(pids[0], syscall.SIGKILL)
	for deadline := time.Now().Add(5 * time.Second); slices.Contains(initPIDs(), pids[0]); {
		if time.Now().After(deadline) {
			t.Fatal("the init did not die")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if res := sh(t, sb, "cat /tmp/state"); string(res.Stdout) != "kept\n" {
		t.Fatalf("after the init died: %+v", res)
	}
	if now := initPIDs(); len(now) != 1 || now[0] == pids[0] {
		t.Fatalf("inits after a restart: %v (the old one was %d)", now, pids[0])
	}
	if err := sb.Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	if now := initPIDs(); len(now) != 0 {
		t.Fatalf("inits left after Delete: %v", now)
	}
}
