package local_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/agentctl/agentctl/providers/local"
	"github.com/agentctl/agentctl/sandbox"
)

// helperEnv makes the test binary, copied into a workspace and run inside
// the sandbox, act as a small probe instead of running tests.
const helperEnv = "AGENTCTL_LOCAL_TEST_HELPER"

// runHelper runs one probe and returns its exit code: 0 means the
// attempt succeeded.
func runHelper(h string) int {
	verb, arg, _ := strings.Cut(h, " ")
	switch verb {
	case "dial":
		c, err := net.DialTimeout("tcp", arg, 2*time.Second)
		if err != nil {
			fmt.Println("dial failed:", err)
			return 1
		}
		c.Close()
		fmt.Println("connected")
		return 0
	case "create":
		// create STATEDIR: print the error of creating a namespaced sandbox.
		sb, err := local.New(local.Options{}).Create(context.Background(), sandbox.Spec{Address: "sandbox.helper", StateDir: arg})
		if err != nil {
			fmt.Println(err)
			return 1
		}
		sb.Delete(context.Background())
		fmt.Println("created")
		return 0
	case "spawn":
		// spawn STATEDIR PROGRAM: run PROGRAM 1000 in a sandbox and never
		// return; the test kills this process.
		dir, prog, _ := strings.Cut(arg, " ")
		sb, err := local.New(local.Options{}).Create(context.Background(), sandbox.Spec{Address: "sandbox.helper", StateDir: dir})
		if err != nil {
			fmt.Println(err)
			return 1
		}
		res, err := sb.Exec(context.Background(), sandbox.ExecRequest{Shell: "cp /bin/sleep ./" + prog + " && ./" + prog + " 1000"})
		fmt.Println("exec returned", res.ExitCode, err)
		return 1
	case "read":
		b, err := os.ReadFile(arg)
		if err != nil {
			fmt.Println("read failed:", err)
			return 1
		}
		fmt.Printf("read %d bytes\n", len(b))
		return 0
	}
	fmt.Fprintln(os.Stderr, "unknown helper", h)
	return 2
}
