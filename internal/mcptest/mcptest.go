// Package mcptest builds the MCP go-sdk's own example servers for tests:
// real servers no one here wrote, from the module cache the project
// already depends on. The binaries are static (CGO_ENABLED=0), so they
// also run inside a sandbox, and cached by the SDK's version.
package mcptest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/testenv"
)

// Module is the MCP go-sdk's module path.
const Module = "github.com/modelcontextprotocol/go-sdk"

var buildMu sync.Mutex

// Server returns the path of the go-sdk example server name (everything,
// memory, hello, ...), building it on first use. Without a Go toolchain
// or the module (no module proxy and an empty cache) the test is skipped,
// or fails under AGENTCTL_TEST_STRICT=1.
func Server(tb testing.TB, name string) string {
	tb.Helper()
	bin, err := Build(name)
	if err != nil {
		testenv.Missing(tb, "%v", err)
	}
	return bin
}

// Build is Server for callers that decide themselves what a missing
// server means: it returns the path, or why it could not be built.
func Build(name string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("building the MCP example server %s needs the go command on PATH", name)
	}
	version, err := sdkVersion(goBin)
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "agentctl-test", "mcp-examples", version)
	bin := filepath.Join(dir, name)
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// go install pkg@version builds the example with the SDK's own
	// go.mod, outside this module, into a private directory first.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command(goBin, "install", Module+"/examples/server/"+name+"@"+version)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOBIN="+tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the MCP example server %s@%s failed (is the module proxy reachable?): %v\n%s", name, version, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, name), bin); err != nil {
		return "", err
	}
	return bin, nil
}

// sdkVersion is the go-sdk version the module requires, as go list
// reports it from the test's working directory (inside the module).
func sdkVersion(goBin string) (string, error) {
	out, err := exec.Command(goBin, "list", "-m", "-f", "{{.Version}}", Module).Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", Module, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// ProcessesWithEnv counts this machine's processes whose environment
// holds entry (KEY=VALUE): a test marks the server it starts with a
// unique entry and checks that none is left once it is stopped, whatever
// namespace or sandbox the server ran in.
func ProcessesWithEnv(entry string) int {
	n := 0
	files, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, e := range strings.Split(string(b), "\x00") {
			if e == entry {
				n++
			}
		}
	}
	return n
}

// AwaitNoProcesses waits until no process carries entry (ProcessesWithEnv)
// and fails tb, naming what, when some are still there after 10 seconds.
func AwaitNoProcesses(tb testing.TB, entry, what string) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for ProcessesWithEnv(entry) > 0 {
		if time.Now().After(deadline) {
			tb.Fatalf("%s: %d processes still run", what, ProcessesWithEnv(entry))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
