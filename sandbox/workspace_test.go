//go:build unix

package sandbox_test

import (
	"strings"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

func TestExecTruncationLeavesNoFragment(t *testing.T) {
	const secret = "hunter22-token-value"
	hd, err := hostfs.NewHostDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := &sandbox.Workspace{Sandbox: hd, EphemeralEnv: map[string]string{"S": secret}, Scrub: sandbox.NewScrubber([]string{secret})}
	// A 100-byte limit keeps 50 bytes of head and of tail: both cuts fall
	// inside the value.
	cmd := `printf '%045d' 0; printf '%s' "$S"; printf '%0200d' 0; printf '%s' "$S"; printf '%040d' 0`
	res, err := ws.Exec(t.Context(), sandbox.ExecRequest{Shell: cmd, OutputLimit: 100})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout)
	if !res.Truncated || !strings.Contains(out, "bytes truncated") {
		t.Fatalf("not truncated: %q", out)
	}
	for i := 0; i+sandbox.MinSensitiveLen <= len(secret); i++ {
		if frag := secret[i : i+sandbox.MinSensitiveLen]; strings.Contains(out, frag) {
			t.Fatalf("fragment %q of the value survives: %q", frag, out)
		}
	}
}

func TestWorkspaceMergesEnvAndScrubs(t *testing.T) {
	hd, err := hostfs.NewHostDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := &sandbox.Workspace{
		Sandbox:      hd,
		Env:          map[string]string{"REGION": "eu", "MODE": "manifest"},
		EphemeralEnv: map[string]string{"DB_TOKEN": "tok-123456"},
		Scrub:        sandbox.NewScrubber([]string{"tok-123456"}),
	}
	res, err := ws.Exec(t.Context(), sandbox.ExecRequest{Shell: `echo "$REGION $MODE $DB_TOKEN"; echo "$DB_TOKEN" >&2`, Env: map[string]string{"MODE": "request"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(res.Stdout)); got != "eu request (sensitive)" {
		t.Fatalf("stdout = %q", got)
	}
	if got := strings.TrimSpace(string(res.Stderr)); got != "(sensitive)" {
		t.Fatalf("stderr = %q", got)
	}
	if err := ws.WriteFile(t.Context(), "secret.txt", []byte("key tok-123456\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := ws.ReadFile(t.Context(), "secret.txt", 0)
	if err != nil || string(b) != "key (sensitive)\n" {
		t.Fatalf("ReadFile = %q, %v", b, err)
	}
}
