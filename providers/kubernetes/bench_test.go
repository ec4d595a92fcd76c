package kubernetes

import (
	"context"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
)

// BenchmarkCreateFirstExec measures what a run waits for before its
// first command: Create (Pod created, scheduled, started, running) and
// one exec. The Pod's deletion is not timed. Compare with kubectl run
// --restart=Never then kubectl exec of the same image
// (docs/benchmarks-kubernetes.md).
func BenchmarkCreateFirstExec(b *testing.B) {
	c := testCluster(b)
	ctx := context.Background()
	for b.Loop() {
		spec := testSpec(b)
		sb, err := c.p.Create(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("first exec: %+v %v", res, err)
		}
		b.StopTimer()
		if err := sb.Delete(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkExecRoundTrip measures one command's round trip (exec of
// true, output and exit code back). Compare with kubectl exec POD -- true.
func BenchmarkExecRoundTrip(b *testing.B) {
	c := testCluster(b)
	sb := c.newSandbox(b, testSpec(b))
	ctx := context.Background()
	for b.Loop() {
		res, err := sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec: %+v %v", res, err)
		}
	}
}

// BenchmarkReadFile measures a file tool's read: the path resolved in
// the Pod, then the file read (two execs).
func BenchmarkReadFile(b *testing.B) {
	c := testCluster(b)
	sb := c.newSandbox(b, testSpec(b))
	ctx := context.Background()
	if err := sb.WriteFile(ctx, "f.txt", []byte("hello\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := sb.ReadFile(ctx, "f.txt", 0); err != nil {
			b.Fatal(err)
		}
	}
}
