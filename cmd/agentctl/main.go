// Command agentctl is Terraform for sandboxed AI agents: it validates,
// plans and applies HCL configurations of agents, sandboxes and runs.
package main

import (
	"os"

	"github.com/agentctl/agentctl/providers/local"
)

func main() {
	// A sandbox's init process is this binary re-executed: it sets up the
	// namespaces and runs the command, then exits here.
	local.MaybeRunInit()
	os.Exit(runMain(os.Args[1:]))
}
