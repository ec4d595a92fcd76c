// Command agentctl is Terraform for sandboxed AI agents: it validates,
// plans and applies HCL configurations of agents, sandboxes and runs.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Environ()))
}
