package engine

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/config"
)

// TestMountDigestAzureAndBox: an azure_blob mount's digest covers its
// account and never its key or SAS token; a box mount's never its token;
// an s3 mount's digest data is what it was (no account key).
func TestMountDigestAzureAndBox(t *testing.T) {
	m := &config.Manifest{Name: "m", Mounts: []*config.Mount{
		{Kind: "azure_blob", Path: "a", Account: "dealroom", Bucket: "room", SASToken: "sv=2020-10-02&sig=SECRETSIG"},
		{Kind: "azure_blob", Path: "k", Account: "otherroom", Bucket: "room", AccountKey: "S0VZS0VZ"},
		{Kind: "box", Path: "b", Bucket: "123", ReadOnly: true, AccessToken: "BOXTOKEN"},
		{Kind: "s3", Path: "s", Bucket: "bkt"},
	}}
	cfg := &config.Config{Manifests: map[string]*config.Manifest{"m": m}}
	b, err := json.Marshal(mountDigestData(cfg, &config.SandboxInstance{Manifest: "m"}))
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, secret := range []string{"SECRETSIG", "S0VZS0VZ", "BOXTOKEN"} {
		if strings.Contains(got, secret) {
			t.Errorf("the digest data holds the credential %q: %s", secret, got)
		}
	}
	if !strings.Contains(got, `"account":"dealroom"`) || !strings.Contains(got, `"account":"otherroom"`) {
		t.Errorf("the digest data does not cover the accounts: %s", got)
	}
	if want := `{"bucket":"bkt","endpoint":"","kind":"s3","path":"s","prefix":"","read_only":false,"region":""}`; !strings.Contains(got, want) {
		t.Errorf("an s3 mount's digest data changed: %s, want %s", got, want)
	}
	if s := mountSummary(m.Mounts[2]); s != "box box://123, read-only" {
		t.Errorf("mountSummary = %q", s)
	}
}
