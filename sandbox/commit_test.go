package sandbox

import (
	"strings"
	"testing"

	"github.com/distribution/reference"
)

func TestSnapshotImageRef(t *testing.T) {
	const lineage = "5F0C1A2B-3D4E-4F60-8A9B-0C1D2E3F4A5B"
	seen := map[string]string{}
	for _, addr := range []string{
		"sandbox.box",
		"sandbox.Box",
		`sandbox.review["pricing"]`,
		`sandbox.review["Pricing / Q3 ü"]`,
		`sandbox.x["` + strings.Repeat("long-key-", 30) + `"]`,
		`sandbox.x["--"]`,
	} {
		ref := SnapshotImageRef(lineage, addr)
		if ref != strings.ToLower(ref) {
			t.Errorf("%s: %q is not lowercase", addr, ref)
		}
		named, err := reference.ParseNormalizedNamed(ref)
		if err != nil {
			t.Errorf("%s: %q is not a valid reference: %v", addr, ref, err)
			continue
		}
		tagged, ok := named.(reference.NamedTagged)
		if !ok || tagged.Tag() != "5f0c1a2b-3d4" || reference.Domain(named) != "docker.io" || !strings.HasPrefix(reference.Path(named), "agentctl-snapshot/") {
			t.Errorf("%s: %q: want agentctl-snapshot/...:5f0c1a2b-3d4", addr, ref)
		}
		if other, dup := seen[ref]; dup {
			t.Errorf("%s and %s share the reference %q", other, addr, ref)
		}
		seen[ref] = addr
		if again := SnapshotImageRef(lineage, addr); again != ref {
			t.Errorf("%s: not stable: %q then %q", addr, ref, again)
		}
	}
	if got := SnapshotImageRef(lineage, "sandbox.box"); !strings.HasPrefix(got, "agentctl-snapshot/sandbox-box-") {
		t.Errorf("sandbox.box: %q", got)
	}
}
