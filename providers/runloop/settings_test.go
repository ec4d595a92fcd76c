package runloop_test

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/providers/runloop"
)

func decode(t *testing.T, src string) (*runloop.Settings, hcl.Diagnostics) {
	t.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(src), "main.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	v, diags := runloop.DecodeSandbox(&registry.SandboxArgs{Body: f.Body})
	st, _ := v.(*runloop.Settings)
	return st, diags
}

func TestDecodeSandboxLocatesBadArguments(t *testing.T) {
	_, diags := decode(t, "resource_size = \"HUGE\"\ntimeout = \"72h\"\nenv = { \"1X\" = \"a\" }\n")
	if len(diags) != 3 {
		t.Fatalf("diags = %v", diags)
	}
	at := map[string]int{}
	for _, d := range diags {
		if d.Subject != nil {
			at[d.Summary] = d.Subject.Start.Line
		}
		if d.Summary == "Invalid timeout" && !strings.Contains(d.Detail, "48h") {
			t.Errorf("timeout detail %q does not name Runloop's limit", d.Detail)
		}
	}
	if at["Invalid resource_size"] != 1 || at["Invalid timeout"] != 2 || at["Invalid environment variable name"] != 3 {
		t.Errorf("diagnostics at %v", at)
	}
}

func TestDecodeSandboxSettings(t *testing.T) {
	st, diags := decode(t, "blueprint = \"py\"\nsecrets = { TOKEN = \"GH\" }\nidle_timeout = \"10m\"\non_idle = \"suspend\"\n")
	if diags.HasErrors() || st.Blueprint != "py" || st.Secrets["TOKEN"] != "GH" || st.OnIdle != "suspend" {
		t.Fatalf("%+v %v", st, diags)
	}
}
