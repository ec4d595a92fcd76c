package local_test

import (
	"fmt"
	"net"
	"os"
	"strings"
	"time"
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
