package config

import (
	"strings"
	"testing"
)

func TestBackendSettings(t *testing.T) {
	c := mustLoad(t, map[string]string{"main.hcl": `
agentctl {
  backend "pg" {
    conn_str    = env("TEAM_PG")
    schema_name = "team_state"
  }
}
`}, Options{Environ: []string{"TEAM_PG=postgres://u:pw@db/x"}})
	be := c.Settings.Backend
	if be == nil || be.Type != "pg" || be.ConnString != "postgres://u:pw@db/x" || be.Schema != "team_state" {
		t.Fatalf("backend: %+v", be)
	}
	if c := mustLoad(t, map[string]string{"main.hcl": `agentctl {}`}, Options{}); c.Settings.Backend != nil {
		t.Fatalf("no backend block: %+v", c.Settings.Backend)
	}
	for _, tc := range []struct{ hcl, want string }{
		{`backend "s3" {}`, `main.hcl:2,9-13: Unknown backend type`},
		{`backend "pg" { schema_name = "Team-State" }`, `Invalid schema_name`},
		{`backend "pg" { conn_str = var.x }`, `Invalid conn_str`},
		{`backend "pg" { bucket = "b" }`, `Unsupported argument`},
		{"backend \"pg\" {}\nbackend \"pg\" {}", `Duplicate backend block`},
	} {
		_, diags := load(t, map[string]string{"main.hcl": "agentctl {\n" + tc.hcl + "\n}\nvariable \"x\" { default = \"y\" }\n"}, Options{})
		if !diags.HasErrors() || !strings.Contains(diags.Error(), tc.want) {
			t.Errorf("%s: diagnostics %v; want %q", tc.hcl, diags, tc.want)
		}
	}
}
