package docker

import (
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testfiles"
)

// TestCreateErrorNamesProviderOnce: a sandbox Docker cannot create fails
// apply with the sandbox's address, the provider's address, then what
// failed, without the provider naming itself again.
func TestCreateErrorNamesProviderOnce(t *testing.T) {
	p := testProvider(t)
	dir := t.TempDir()
	// A registry on a closed local port: the pull fails fast, offline.
	const image = "127.0.0.1:9/agentctl/no-such-image:1"
	testfiles.WriteTree(t, dir, map[string]string{"main.hcl": `
provider "docker" {}
sandbox "box" {
  provider = provider.docker
  image    = "` + image + `"
}
`})
	c := newCLI(t, dir, "main.hcl")
	c.destroyOnCleanup(p)
	out, code := c.Run("apply", "-auto-approve", "main.hcl")
	if code == 0 {
		t.Fatalf("apply with a missing image succeeded:\n%s", out)
	}
	want := `Error: sandbox.box: provider.docker: image "` + image + `" is not present locally and could not be pulled`
	if !strings.Contains(out, want) {
		t.Fatalf("output does not contain %q:\n%s", want, out)
	}
	if n := strings.Count(strings.ToLower(out), "docker:"); n != 1 {
		t.Fatalf("the output names the provider %d times (want once, as provider.docker):\n%s", n, out)
	}
}
