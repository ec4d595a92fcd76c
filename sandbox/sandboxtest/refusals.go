package sandboxtest

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/sandbox"
)

// checkRefused checks that a provider declaring it lacks capability c
// (for the reason why) refuses a sandbox asking for it (want): at
// validation with an error at the argument (Factory.Validate), and at
// Create with an error that says what it lacks (naming subject), leaving
// nothing behind.
func (s *suite) checkRefused(t *testing.T, c sandbox.Capability, why string, want sandbox.Spec, at hcl.Range, subject string) {
	t.Helper()
	t.Logf("the provider declares it lacks %s: %s", c, why)
	spec := s.spec(t, want)
	if s.f.Validate == nil {
		t.Errorf("the provider lacks %s, but the Factory has no Validate: the suite cannot check that the configuration refuses it before apply", c)
	} else if diags := s.f.Validate(spec, suiteRanges); !reportedAt(diags, at) {
		t.Errorf("a sandbox asking for %s, which the provider lacks, is not refused at validation with an error at its argument (%s): %v", c, at, diags)
	}
	sb, err := s.f.Provider.Create(ctx(t), spec)
	if err == nil {
		_ = sb.Delete(ctx(t))
		t.Fatalf("the provider declares it lacks %s, but created a sandbox asking for it", c)
	}
	if !strings.Contains(strings.ToLower(err.Error()), subject) {
		t.Errorf("Create of a sandbox asking for %s, which the provider lacks, failed without saying so: %v", c, err)
	}
	s.checkNothingLeft(t, spec, "a refused Create")
}

// reportedAt reports whether diags hold an error at rng.
func reportedAt(diags hcl.Diagnostics, rng hcl.Range) bool {
	for _, d := range diags {
		if d.Severity == hcl.DiagError && d.Subject != nil && *d.Subject == rng {
			return true
		}
	}
	return false
}

// checkNothingLeft fails t when the provider still holds something of
// spec's lineage after what (a Delete, a refused Create).
func (s *suite) checkNothingLeft(t *testing.T, spec sandbox.Spec, what string) {
	t.Helper()
	if s.f.Leftovers == nil {
		t.Errorf("the Factory has no Leftovers: the suite cannot check that %s leaves nothing behind", what)
		return
	}
	left, err := s.f.Leftovers(ctx(t), spec)
	if err != nil {
		t.Errorf("listing what the provider holds after %s: %v", what, err)
	} else if len(left) > 0 {
		t.Errorf("%s left %v behind", what, left)
	}
}
