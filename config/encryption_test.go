package config

import (
	"strings"
	"testing"
)

func TestEncryptionBlock(t *testing.T) {
	const key = "q83vEjRWeJCrze8SNFZ4kKvN7xI0VniQq83vEjRWeJA="
	c := mustLoad(t, map[string]string{"main.hcl": `
agentctl {
  encryption {
    key = env("AGENTCTL_STATE_KEY")
  }
}
`}, Options{Environ: []string{"AGENTCTL_STATE_KEY=" + key}})
	e := c.Settings.Encryption
	if e == nil || e.Key == nil || e.Decrypt || !e.Keys().Encrypting() {
		t.Fatalf("encryption %+v", e)
	}
	if strings.Contains(e.Key.String(), key) {
		t.Errorf("the key is shown: %s", e.Key)
	}
	if c := mustLoad(t, map[string]string{"main.hcl": `agentctl {}`}, Options{}); c.Settings.Encryption != nil || c.Settings.Encryption.Keys() != nil {
		t.Fatalf("no block: %+v", c.Settings.Encryption)
	}
	c = mustLoad(t, map[string]string{"main.hcl": "agentctl {\n encryption {\n key = env(\"K\")\n decrypt = true\n }\n}\n"}, Options{Environ: []string{"K=" + key}})
	if e := c.Settings.Encryption; e == nil || !e.Decrypt || e.Keys().Encrypting() || e.Keys().Key() == nil {
		t.Fatalf("decrypt: %+v", e)
	}
	for _, tc := range []struct{ hcl, env, want string }{
		{`encryption { key = env("K") }`, "", `main.hcl:2,20-28: Invalid encryption key; The key is empty`},
		{`encryption { key = env("K") }`, "K=short", `main.hcl:2,20-28: Invalid encryption key; the encryption key is`},
		{`encryption { key = "` + key + `" }`, "", `Encryption key written in the configuration`},
		{`encryption { key = var.x }`, "", `Invalid encryption key`},
		{`encryption {}`, "", `Missing required argument`},
		{`encryption { key = env("K") }` + "\n" + `encryption { key = env("K") }`, "K=" + key, `Duplicate encryption block`},
		{"encryption {\nkey = env(\"K\")\ndecrypt = \"yes\"\n}", "K=" + key, `decrypt`},
	} {
		_, diags := load(t, map[string]string{"main.hcl": "agentctl {\n" + tc.hcl + "\n}\nvariable \"x\" { default = \"y\" }\n"}, Options{Environ: []string{tc.env}})
		if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) {
			t.Errorf("%s: diagnostics %v; want %q", tc.hcl, diags, tc.want)
		}
		if strings.Contains(diags.Error(), key) || (strings.HasPrefix(tc.env, "K=") && len(tc.env) > 2 && strings.Contains(diags.Error(), tc.env[2:])) {
			t.Errorf("%s: diagnostics show the key: %v", tc.hcl, diags)
		}
	}
}
