package config

import (
	"slices"
	"strings"
	"testing"
)

func TestSandboxSnapshotExclude(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": `
provider "local" {}
sandbox "a" {
  provider         = provider.local
  snapshot_exclude = [".env", "secrets/", "!secrets/README"]
}
`}, Options{})
	if got := c.SandboxInstances["sandbox.a"].SnapshotExclude; !slices.Equal(got, []string{".env", "secrets/", "!secrets/README"}) {
		t.Fatalf("SnapshotExclude = %q", got)
	}

	_, diags := load(t, map[string]string{"main.hcl": `
provider "local" {}
sandbox "a" {
  provider         = provider.local
  snapshot_exclude = ["ok", "bad[", "/"]
}
`}, Options{})
	if !diags.HasErrors() {
		t.Fatal("a malformed pattern was accepted")
	}
	d := diags[0]
	if d.Summary != "Invalid snapshot_exclude" || !strings.Contains(d.Detail, `"bad["`) || d.Subject == nil || d.Subject.Start.Line != 5 {
		t.Fatalf("diagnostic: %s: %s at %v", d.Summary, d.Detail, d.Subject)
	}
}
