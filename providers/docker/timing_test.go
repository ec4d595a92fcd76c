package docker

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/agentctl/agentctl/sandbox"
)

// TestTimingBreakdown logs how long each step of create + first exec
// takes (AGENTCTL_TIMING=1); it asserts nothing about time.
func TestTimingBreakdown(t *testing.T) {
	if os.Getenv("AGENTCTL_TIMING") != "1" {
		t.Skip("set AGENTCTL_TIMING=1 to log a timing breakdown")
	}
	p := testProvider(t)
	ctx := context.Background()
	for i := 0; i < 3; i++ {
		t0 := time.Now()
		_, _ = p.ImageID(ctx, TestImage)
		t1 := time.Now()
		sb, err := p.Create(ctx, testSpec(t))
		if err != nil {
			t.Fatal(err)
		}
		t2 := time.Now()
		_, _ = sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}})
		t3 := time.Now()
		_, _ = sb.Exec(ctx, sandbox.ExecRequest{Argv: []string{"true"}})
		t4 := time.Now()
		_, _ = p.Client().ContainerInspect(ctx, sb.ID(), client.ContainerInspectOptions{})
		t5 := time.Now()
		_ = sb.Delete(ctx)
		t6 := time.Now()
		t.Logf("image inspect %v, create(all) %v, first exec %v, second exec %v, inspect %v, delete %v",
			t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3), t5.Sub(t4), t6.Sub(t5))
	}
}
