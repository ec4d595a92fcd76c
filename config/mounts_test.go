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
		{"azure account", `manifest "m" {
  azure_blob "d" {
    account   = "Deal_Room"
    container = "room"
  }
}`, "Invalid storage account", 9},
		{"azure container", `manifest "m" {
  azure_blob "d" {
    account   = "dealroom"
    container = "Room/sub"
  }
}`, "Invalid container name", 10},
		{"azure container missing", `manifest "m" {
  azure_blob "d" { account = "dealroom" }
}`, `The argument "container" is required`, 8},
		{"azure literal key", `manifest "m" {
  azure_blob "d" {
    account     = "dealroom"
    container   = "room"
    account_key = "a2V5"
  }
}`, "account_key of a azure_blob mount holds a secret", 11},
		{"azure key not base64", `manifest "m" {
  azure_blob "d" {
    account     = "dealroom"
    container   = "room"
    account_key = env("K")
  }
}`, "Invalid account key", 11},
		{"azure both credentials", `manifest "m" {
  azure_blob "d" {
    account     = "dealroom"
    container   = "room"
    account_key = env("KEY64")
    sas_token   = env("SAS")
  }
}`, "Conflicting credentials", 12},
		{"azure bad sas", `manifest "m" {
  azure_blob "d" {
    account   = "dealroom"
    container = "room"
    sas_token = env("K")
  }
}`, "Invalid SAS token", 11},
		{"azure key at another endpoint", `manifest "m" {
  azure_blob "d" {
    account     = "dealroom"
    container   = "room"
    endpoint    = "http://127.0.0.1:10000/dealroom"
    account_key = env("KEY64")
  }
}`, "Endpoint not usable with account_key", 11},
		{"azure endpoint with a query", `manifest "m" {
  azure_blob "d" {
    account   = "dealroom"
    container = "room"
    endpoint  = "https://dealroom.blob.core.windows.net/?sig=x"
  }
}`, "Invalid endpoint", 11},
		{"box writable", `manifest "m" {
  box "d" {
    read_only    = false
    access_token = env("K")
  }
}`, "read_only = false is not supported for box yet", 9},
		{"box writable by default", `manifest "m" {
  box "d" { access_token = env("K") }
}`, "read_only = false is not supported for box yet", 8},
		{"box folder", `manifest "m" {
  box "d" {
    read_only    = true
    folder_id    = "room"
    access_token = env("K")
  }
}`, "Invalid Box folder id", 10},
		{"box without token", `manifest "m" {
  box "d" { folder_id = "12" }
}`, `The argument "access_token" is required`, 8},
		{"box literal token", `manifest "m" {
  box "d" { access_token = "tok" }
}`, "access_token of a box mount holds a secret", 8},
		{"box prefix", `manifest "m" {
  box "d" {
    read_only    = true
    prefix       = "../up"
    access_token = env("K")
  }
}`, "Invalid prefix", 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, diags := loadMounts(t, tc.manifest, "K=v", "KEY64=a2V5", "SAS=sv=2020-10-02&sig=x")
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

func TestAzureAndBoxMountsDecoded(t *testing.T) {
	c, diags := loadMounts(t, `
manifest "m" {
  azure_blob "room" {
    account   = "dealroom"
    container = "deals"
    prefix    = "acme/"
    endpoint  = "http://127.0.0.1:10000/dealroom"
    read_only = true
    sas_token = env("ROOM_SAS")
  }
  azure_blob "keyed" {
    account     = "dealroom"
    container   = "deals"
    endpoint    = "https://dealroom.blob.core.chinacloudapi.cn"
    account_key = env("ROOM_KEY")
  }
  box "box" {
    read_only    = true
    folder_id    = "123456"
    prefix       = "Q1"
    access_token = env("BOX_TOKEN")
  }
  box "root" {
    read_only    = true
    access_token = env("BOX_TOKEN")
  }
}
`, "ROOM_SAS=?sv=2020-10-02&sr=c&sp=rl&sig=c2lnbmF0dXJl", "ROOM_KEY=c2VjcmV0LWtleQ==", "BOX_TOKEN=box-token-value")
	if diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	ms := c.Manifests["m"].Mounts
	if len(ms) != 4 {
		t.Fatalf("got %d mounts, want 4", len(ms))
	}
	az := ms[0]
	if az.Account != "dealroom" || az.Bucket != "deals" || az.Prefix != "acme" || !az.ReadOnly || az.SASToken != "sv=2020-10-02&sr=c&sp=rl&sig=c2lnbmF0dXJl" {
		t.Errorf("azure_blob mount decoded as %+v", az)
	}
	if got := az.Source(); got != "azblob://dealroom/deals/acme (http://127.0.0.1:10000/dealroom)" {
		t.Errorf("Source() = %q", got)
	}
	if ms[1].AccountKey != "c2VjcmV0LWtleQ==" {
		t.Errorf("account key not decoded: %+v", ms[1])
	}
	if b := ms[2]; b.Bucket != "123456" || b.Prefix != "Q1" || b.AccessToken != "box-token-value" || b.Source() != "box://123456/Q1" {
		t.Errorf("box mount decoded as %+v (%s)", b, b.Source())
	}
	if ms[3].Bucket != "0" {
		t.Errorf("a box mount without folder_id is at folder %q, want the root folder 0", ms[3].Bucket)
	}
	b, _ := json.Marshal(c.Manifests["m"])
	for _, secret := range []string{"c2lnbmF0dXJl", "c2VjcmV0LWtleQ==", "box-token-value"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("the manifest's JSON holds the credential %q: %s", secret, b)
		}
	}
	for _, secret := range []string{"sv=2020-10-02&sr=c&sp=rl&sig=c2lnbmF0dXJl", "c2lnbmF0dXJl", "c2VjcmV0LWtleQ==", "box-token-value"} {
		if !slices.Contains(c.SensitiveValues(), secret) {
			t.Errorf("the scrubber does not know %q", secret)
		}
	}
}
