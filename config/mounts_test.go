package config

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

const mountSandbox = `
provider "local" {}
sandbox "box" {
  provider = provider.local
  manifest = manifest.m
}
`

func loadMounts(t *testing.T, manifest string, environ ...string) (*Config, hcl.Diagnostics) {
	t.Helper()
	return load(t, map[string]string{"main.hcl": mountSandbox + manifest}, Options{Environ: environ})
}

func TestMountDecoded(t *testing.T) {
	c, diags := loadMounts(t, `
variable "secret" {
  default   = "s3cr3t-value"
  sensitive = true
}
manifest "m" {
  dir "data" {}
  s3 "data/room" {
    bucket            = "deal-room"
    prefix            = "/2024/q1/"
    endpoint          = "http://127.0.0.1:9000"
    region            = "eu-west-1"
    read_only         = true
    access_key_id     = env("ROOM_KEY")
    secret_access_key = var.secret
  }
  r2 "r2" {
    bucket     = "b-r2"
    account_id = "abc123"
  }
  gcs "g" {
    bucket           = "gcs_bucket"
    credentials_json = env("GCS_JSON")
  }
}
`, "ROOM_KEY=AKIAROOM", `GCS_JSON={"type":"service_account"}`)
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	ms := c.Manifests["m"].Mounts
	if len(ms) != 3 {
		t.Fatalf("got %d mounts, want 3", len(ms))
	}
	s3 := ms[0]
	if s3.Path != "data/room" || s3.Bucket != "deal-room" || s3.Prefix != "2024/q1" || !s3.ReadOnly ||
		s3.AccessKeyID != "AKIAROOM" || s3.SecretAccessKey != "s3cr3t-value" || s3.Region != "eu-west-1" {
		t.Errorf("s3 mount decoded as %+v", s3)
	}
	if got := s3.Source(); got != "s3://deal-room/2024/q1 (http://127.0.0.1:9000)" {
		t.Errorf("Source() = %q", got)
	}
	if ms[1].Endpoint != "https://abc123.r2.cloudflarestorage.com" || ms[1].ReadOnly {
		t.Errorf("r2 mount decoded as %+v", ms[1])
	}
	if ms[2].CredentialsJSON == "" {
		t.Errorf("gcs credentials not decoded")
	}
	// Every credential is known to the scrubber, and none reaches JSON.
	b, _ := json.Marshal(c.Manifests["m"])
	for _, secret := range []string{"AKIAROOM", "s3cr3t-value", "service_account"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the manifest's JSON holds the credential %q: %s", secret, b)
		}
		if secret != "service_account" && !slices.Contains(c.SensitiveValues(), secret) {
			t.Errorf("the scrubber does not know %q", secret)
		}
	}
}

func TestMountErrors(t *testing.T) {
	cases := []struct {
		name, manifest, want string
		line                 int
	}{
		{"literal secret", `manifest "m" {
  s3 "d" {
    bucket            = "b-1"
    access_key_id     = env("K")
    secret_access_key = "literal-secret"
  }
}`, "Credential must not be a literal", 11},
		{"literal key id", `manifest "m" {
  s3 "d" {
    bucket            = "b-1"
    access_key_id     = "AKIA"
    secret_access_key = env("K")
  }
}`, "access_key_id of a s3 mount holds a secret", 10},
		{"half credentials", `manifest "m" {
  s3 "d" {
    bucket        = "b-1"
    access_key_id = env("K")
  }
}`, "Incomplete credentials", 8},
		{"collides with a file", `manifest "m" {
  file "d/a.txt" { content = "x" }
  s3 "d" { bucket = "b-1" }
}`, `overlaps the file "d/a.txt"`, 9},
		{"same path", `manifest "m" {
  s3 "d" { bucket = "b-1" }
  local_dir "d" { source = "." }
}`, `Duplicate manifest entry`, 9},
		{"mount in mount", `manifest "m" {
  s3 "d" { bucket = "b-1" }
  gcs "d/e" { bucket = "b-2" }
}`, `overlaps the s3 "d"`, 9},
		{"bucket with a path", `manifest "m" {
  s3 "d" { bucket = "b-1/sub" }
}`, "Invalid bucket name", 8},
		{"bad endpoint", `manifest "m" {
  s3 "d" {
    bucket   = "b-1"
    endpoint = "127.0.0.1:9000"
  }
}`, "Invalid endpoint", 10},
		{"r2 without account", `manifest "m" {
  r2 "d" { bucket = "b-1" }
}`, "Missing R2 account", 8},
		{"outside the workspace", `manifest "m" {
  s3 "../d" { bucket = "b-1" }
}`, "Invalid manifest path", 8},
		{"azure_blob not implemented", `manifest "m" {
  azure_blob "d" { container = "c" }
}`, "Unsupported block type", 8},
		{"box not implemented", `manifest "m" {
  box "d" { folder = "1" }
}`, "Unsupported block type", 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := loadMounts(t, tc.manifest, "K=v")
			if !diags.HasErrors() {
				t.Fatal("loaded without error")
			}
			for _, d := range diags {
				if strings.Contains(d.Summary+" "+d.Detail, tc.want) {
					if d.Subject == nil || d.Subject.Start.Line != tc.line {
						t.Errorf("%q located at %v, want line %d", tc.want, d.Subject, tc.line)
					}
					return
				}
			}
			t.Errorf("no diagnostic says %q: %s", tc.want, diags.Error())
		})
	}
}

func TestMountRefusedByProvider(t *testing.T) {
	_, diags := load(t, map[string]string{"main.hcl": `
provider "daytona" { api_key = env("DK") }
manifest "m" {
  s3 "d" { bucket = "b-1" }
}
sandbox "box" {
  provider = provider.daytona
  manifest = manifest.m
}
`}, Options{Environ: []string{"DK=k"}})
	if !diags.HasErrors() {
		t.Fatal("a daytona sandbox with a mount loaded without error")
	}
	d := diags[0]
	if d.Summary != "Storage mount not supported by this provider" || d.Subject == nil || d.Subject.Start.Line != 4 ||
		!strings.Contains(d.Detail, "sandbox.box") || !strings.Contains(d.Detail, "no volumes") {
		t.Errorf("got %s (at %v)", diags.Error(), d.Subject)
	}
}
