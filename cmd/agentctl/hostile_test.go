package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/agentctl/agentctl/internal/testenv"
)

// TestHostileConfig runs validate and fmt on hostile configurations
// (testdata/hostile). Each script runs agentctl through $BOUNDED, which
// kills it past 4 GiB of address space or 30 s of CPU (prlimit) and past
// two minutes of wall time (timeout): the bounds are the harness's, not
// assertions on how fast agentctl is. `gen` writes the large inputs.
func TestHostileConfig(t *testing.T) {
	for _, tool := range []string{"prlimit", "timeout", "mkfifo"} {
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Missing(t, "%s is not installed (util-linux and coreutils)", tool)
		}
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/hostile",
		Setup: func(env *testscript.Env) error {
			env.Setenv("BOUNDED", "timeout -s KILL 120 prlimit --as=4294967296 --cpu=30 --")
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"bounded": boundedCmd,
			"gen":     genCmd,
			"maxsize": maxsizeCmd,
		},
	})
}

// boundedCmd runs `agentctl ARGS...` under $BOUNDED, with its standard
// output and error where testscript's stdout and stderr commands read
// them, and fails the script when the limits killed it.
func boundedCmd(ts *testscript.TestScript, neg bool, args []string) {
	argv := append(strings.Fields(ts.Getenv("BOUNDED")), append([]string{"agentctl"}, args...)...)
	err := ts.Exec(argv[0], argv[1:]...)
	// timeout(1) exits 124 when the time ran out and 128+N when the
	// command died of signal N (SIGKILL, or SIGXCPU from the CPU limit);
	// the Go runtime says "fatal error" when it runs out of memory or
	// stack.
	if ee, ok := err.(*exec.ExitError); ok && (!ee.Exited() || ee.ExitCode() >= 124) {
		ts.Fatalf("agentctl %s was killed by the harness's limits: %v", strings.Join(args, " "), err)
	}
	if stderr := ts.ReadFile("stderr"); strings.Contains(stderr, "fatal error:") || strings.Contains(stderr, "panic:") {
		ts.Fatalf("agentctl %s crashed:\n%.2000s", strings.Join(args, " "), stderr)
	}
	switch {
	case err != nil && !neg:
		ts.Fatalf("agentctl %s: %v", strings.Join(args, " "), err)
	case err == nil && neg:
		ts.Fatalf("agentctl %s succeeded unexpectedly", strings.Join(args, " "))
	}
}

// maxsizeCmd fails unless the named output (stdout, stderr or a file) is
// at most N bytes: maxsize stderr N.
func maxsizeCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: maxsize FILE N")
	}
	n, err := strconv.Atoi(args[1])
	if err != nil {
		ts.Fatalf("maxsize: %v", err)
	}
	if got := len(ts.ReadFile(args[0])); got > n {
		ts.Fatalf("%s is %d bytes, more than %d", args[0], got, n)
	}
}

// genCmd writes a generated input: gen KIND N FILE.
//
//	nest N      N nested brackets in a local
//	garbage N   N pseudo-random bytes
//	locals N    N locals, each one more than the previous
//	foreach N   a run with N for_each keys
//	yamlbomb N  a YAML document whose aliases expand to 9^N strings
func genCmd(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: gen KIND N FILE")
	}
	n, err := strconv.Atoi(args[1])
	if err != nil {
		ts.Fatalf("gen: %v", err)
	}
	var b strings.Builder
	switch args[0] {
	case "nest":
		fmt.Fprintf(&b, "locals {\n  x = %s%s\n}\n", strings.Repeat("[", n), strings.Repeat("]", n))
	case "garbage":
		r := rand.New(rand.NewPCG(1, 2))
		for range n {
			b.WriteByte(byte(r.UintN(256)))
		}
	case "locals":
		b.WriteString("locals {\n  l0 = 0\n")
		for i := 1; i < n; i++ {
			fmt.Fprintf(&b, "  l%d = local.l%d + 1\n", i, i-1)
		}
		fmt.Fprintf(&b, "}\n\noutput \"last\" { value = local.l%d }\n", n-1)
	case "foreach":
		b.WriteString("provider \"scripted\" {}\n\nagent \"a\" {\n  provider     = provider.scripted\n  instructions = \"x\"\n}\n\nrun \"r\" {\n  for_each = toset([")
		for i := range n {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "%q", "k"+strconv.Itoa(i))
		}
		b.WriteString("])\n  agent    = agent.a\n  input    = each.key\n}\n")
	case "yamlbomb":
		b.WriteString("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
		for i := 1; i < n; i++ {
			ref := fmt.Sprintf("*a%d", i-1)
			fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(ref+", ", 9), ", "))
		}
	default:
		ts.Fatalf("gen: unknown kind %q", args[0])
	}
	path := ts.MkAbs(args[2])
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		ts.Fatalf("gen: %v", err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		ts.Fatalf("gen: %v", err)
	}
}
