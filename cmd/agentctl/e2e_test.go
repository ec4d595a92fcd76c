package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agentctl/agentctl/providers/local"
)

// init lets the test binary serve as a namespaced sandbox's init process:
// the local provider re-executes os.Executable(), which in tests is this
// binary, and package init runs before TestMain.
func init() {
	local.MaybeRunInit()
}

// TestE2E runs the end-to-end scripts in testdata/e2e: whole pipelines
// applied with the scripted model and the local sandbox provider.
//
// Extra script commands:
//
//	exitcode N CMD [ARG...]   run CMD and require exit code N (stdout and
//	                          stderr are kept for later assertions)
//	firstevent TYPE           the first line of stdout is a JSON event of
//	                          type TYPE
func TestE2E(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/e2e",
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode":   cmdExitCode,
			"firstevent": cmdFirstEvent,
		},
	})
}

func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N CMD [ARG...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: %v", err)
	}
	got := 0
	if err := ts.Exec(args[1], args[2:]...); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("exitcode: %v", err)
		}
		got = ee.ExitCode()
	}
	if got != want {
		ts.Fatalf("exit code %d, want %d", got, want)
	}
}

func cmdFirstEvent(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: firstevent TYPE")
	}
	out := ts.ReadFile("stdout")
	first, _, _ := strings.Cut(out, "\n")
	var ev struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(first), &ev); err != nil {
		ts.Fatalf("first line of stdout is not a JSON event: %v\n%s", err, first)
	}
	if ev.Type != args[0] {
		ts.Fatalf("first event has type %q, want %q", ev.Type, args[0])
	}
}
