package engine

import (
	"flag"
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// The tests check that every state change is recorded whole: each
	// append to the state log is read back and compared with the state
	// in memory (state/local/log.go). Benchmarks measure without the check.
	if b := flag.Lookup("test.bench"); b == nil || b.Value.String() == "" {
		os.Setenv("AGENTCTL_STATE_VERIFY", "1")
	}
	os.Exit(m.Run())
}
