//go:build unix

package mcphost

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/testenv"
)

// TestStoppingAServerStopsWhatItStarted: the server is a shell wrapper
// that starts a child, then runs the server itself; closing the session
// ends the child too.
func TestStoppingAServerStopsWhatItStarted(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		testenv.Missing(t, "no /proc to see the processes in")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	wrapper := `sleep 600 & echo $! > "$1"; exec "$2"`
	s, err := Connect(context.Background(), Server{Name: "wrapped", Command: []string{"/bin/sh", "-c", wrapper, "sh", pidFile, exe}, Env: map[string]string{"MCPHOST_TEST_SERVER": "1"}, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pidFile)
	pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || perr != nil || !running(pid) {
		t.Fatalf("the wrapper's child: %q, %v", b, err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	s.Close()
	for deadline := time.Now().Add(time.Minute); running(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the wrapper's child (pid %d) outlived the server", pid)
		}
	}
}
