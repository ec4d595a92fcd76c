package archive

import (
	"encoding/base64"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

func TestSensitiveMembers(t *testing.T) {
	const secret = "hunter22-token"
	hd, err := hostfs.NewHostDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The value straddles the 64 KiB chunks ContainsReader reads.
	big := strings.Repeat("x", 64<<10-5) + secret + "\n"
	files := map[string]string{
		"clean.txt":                  "nothing here\n",
		"big.log":                    big,
		"enc.txt":                    "token: " + base64.StdEncoding.EncodeToString([]byte("  "+secret)) + "\n",
		"dir/name-" + secret + ".md": "clean\n",
		"secrets/key":                secret,
	}
	for name, content := range files {
		if err := hd.WriteFile(t.Context(), name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	snap := t.TempDir() + "/s.tar"
	if _, err := Snapshot(t.Context(), hd, "", []string{"secrets/"}, snap); err != nil {
		t.Fatal(err)
	}
	got, err := SensitiveMembers(t.Context(), snap, sandbox.NewScrubber([]string{secret}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"big.log", "dir/name-(sensitive).md", "enc.txt"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("SensitiveMembers = %q, want %q", got, want)
	}
	if got, _ := SensitiveMembers(t.Context(), snap, sandbox.NewScrubber(nil)); got != nil {
		t.Fatalf("an empty scrubber found %q", got)
	}
}
