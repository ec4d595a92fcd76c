package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentctl/agentctl/internal/testenv"
)

// hangingServer is an MCP stdio server that never answers the handshake:
// a shell that starts a child of its own, records both pids and waits.
const hangingServer = `#!/bin/sh
sleep 600 &
echo $! > child.pid.tmp && mv child.pid.tmp child.pid
echo $$ > server.pid.tmp && mv server.pid.tmp server.pid
wait
`

const hangingServerConfig = `
provider "scripted" {
  script "librarian" {
    reply { text = "never reached" }
  }
}
mcp_server "hang" {
  command = ["/bin/sh", %q]
  timeout = "600s"
}
agent "librarian" {
  provider     = provider.scripted
  instructions = "Use the server."
  mcp_servers  = [mcp_server.hang]
}
run "job" {
  agent = agent.librarian
  input = "Go."
}
`

// TestMCPServerDiesWithAgentctl: agentctl is killed (SIGKILL) while a
// host MCP server it started hangs in the handshake. Neither the server
// nor the child it started outlives agentctl.
func TestMCPServerDiesWithAgentctl(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		testenv.Missing(t, "no /proc to watch the server's processes in")
	}
	h := newHarness(t)
	script := filepath.Join(h.dir, "server.sh")
	if err := os.WriteFile(script, []byte(hangingServer), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.dir, "main.hcl"), []byte(fmt.Sprintf(hangingServerConfig, script)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := h.start("apply", "-auto-approve", "-no-color")
	var pids []int
	h.waitUntil("the server and its child to start", func() bool {
		pids = nil
		for _, name := range []string{"server.pid", "child.pid"} {
			b, err := os.ReadFile(filepath.Join(h.dir, name))
			pid, perr := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil || perr != nil {
				return false
			}
			pids = append(pids, pid)
		}
		return true
	})
	started := map[int]string{}
	for _, pid := range pids {
		started[pid] = procStart(pid)
		if started[pid] == "" {
			t.Fatalf("process %d is not running before agentctl is killed; agentctl's output:\n%s", pid, p.out)
		}
		t.Cleanup(func() {
			if procStart(pid) == started[pid] {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}
	p.kill(t)
	for _, pid := range pids {
		h.waitUntil(fmt.Sprintf("process %d to end with agentctl", pid), func() bool { return procStart(pid) != started[pid] })
	}
}

// procStart is the start time of process pid (field 22 of its
// /proc/PID/stat), which tells it from a later process with the same
// pid; "" when no such process runs (a zombie has ended).
func procStart(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from after it (state is field 3, start time field 22).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return ""
	}
	return f[19]
}
