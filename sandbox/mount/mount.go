// Package mount makes storage mounts (a bucket of an object store at a
// directory of this machine) with rclone's FUSE mount, keeps a record of
// each before it is made, and clears them: at destroy, and when a killed
// agentctl left one behind (docs/mounts.md).
//
// rclone runs as a program of its own (the Debian package "rclone"), not
// linked in as a library: agentctl stays small and starts fast, and a
// mount outlives the agentctl command that made it, as the sandbox it is
// bound into does. Credentials reach rclone through its environment
// (RCLONE_CONFIG_* variables), never its arguments, so `ps` never shows
// them; the environment of another user's process is not readable.
package mount

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Kinds of mounts.
const (
	KindS3      = "s3"
	KindR2      = "r2"
	KindS3Files = "s3_files"
	KindGCS     = "gcs"
	KindAzure   = "azure_blob"
	KindBox     = "box"
)

// Def is one mount's definition.
type Def struct {
	Kind string
	Path string // workspace-relative
	// Account is an Azure storage account's name.
	Account string
	// Bucket is the bucket, an Azure container, or a Box folder's id.
	Bucket   string
	Prefix   string
	Endpoint string
	Region   string
	ReadOnly bool
	// Secrets are never written anywhere but rclone's environment.
	Secrets Secrets `json:"-"`
}

// Secrets are a mount's credentials; empty ones mean anonymous access.
type Secrets struct {
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// CredentialsJSON is a GCS service account key.
	CredentialsJSON string
	// AccountKey or SASToken authorize an Azure storage account.
	AccountKey string
	SASToken   string
	// AccessToken is a Box access token.
	AccessToken string
}

// Values are the non-empty secrets, for a scrubber.
func (s Secrets) Values() []string {
	var out []string
	for _, v := range []string{s.AccessKeyID, s.SecretAccessKey, s.SessionToken, s.CredentialsJSON, s.AccountKey, s.SASToken, s.AccessToken} {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// Source is the mount's source as plans show it, like
// s3://bucket/prefix (http://127.0.0.1:9000); never a credential.
func (d Def) Source() string {
	var s string
	switch d.Kind {
	case KindGCS:
		s = "gs://" + d.Bucket
	case KindR2:
		s = "r2://" + d.Bucket
	case KindAzure:
		s = "azblob://" + d.Account + "/" + d.Bucket
	case KindBox:
		s = "box://" + d.Bucket
	default:
		s = "s3://" + d.Bucket
	}
	if d.Prefix != "" {
		s += "/" + d.Prefix
	}
	if d.Endpoint != "" {
		s += " (" + d.Endpoint + ")"
	}
	return s
}

// remote is the rclone remote path of the mount: the configured remote
// named "store" (whose settings are all in the environment). A Box
// remote starts at its folder (root_folder_id).
func (d Def) remote() string {
	r := d.checkRemote()
	switch {
	case d.Prefix == "":
	case strings.HasSuffix(r, ":"):
		r += d.Prefix
	default:
		r += "/" + d.Prefix
	}
	return r
}

// checkRemote is what Check lists: the bucket, container or folder.
func (d Def) checkRemote() string {
	if d.Kind == KindBox {
		return "store:"
	}
	return "store:" + d.Bucket
}

// rcloneEnv is the environment that configures the "store" remote.
func (d Def) rcloneEnv() []string {
	const p = "RCLONE_CONFIG_STORE_"
	env := []string{p + "ENV_AUTH=false"}
	add := func(k, v string) {
		if v != "" {
			env = append(env, p+k+"="+v)
		}
	}
	switch d.Kind {
	case KindAzure:
		env = append(env, d.azureEnv()...)
	case KindBox:
		add("TYPE", "box")
		add("ROOT_FOLDER_ID", d.Bucket)
		add("ACCESS_TOKEN", d.Secrets.AccessToken)
	case KindGCS:
		add("TYPE", "google cloud storage")
		add("ENDPOINT", d.Endpoint)
		// Uniform bucket-level access: no per-object ACLs are sent.
		add("BUCKET_POLICY_ONLY", "true")
		if d.Secrets.CredentialsJSON == "" {
			add("ANONYMOUS", "true")
		}
		add("SERVICE_ACCOUNT_CREDENTIALS", d.Secrets.CredentialsJSON)
	default:
		add("TYPE", "s3")
		provider := "Other"
		switch {
		case d.Kind == KindR2:
			provider = "Cloudflare"
		case d.Endpoint == "":
			provider = "AWS"
		}
		add("PROVIDER", provider)
		add("ENDPOINT", d.Endpoint)
		region := d.Region
		if region == "" && d.Kind == KindR2 {
			region = "auto"
		}
		add("REGION", region)
		add("ACCESS_KEY_ID", d.Secrets.AccessKeyID)
		add("SECRET_ACCESS_KEY", d.Secrets.SecretAccessKey)
		add("SESSION_TOKEN", d.Secrets.SessionToken)
		// Buckets are never created by a mount: a missing one is an error.
		add("NO_CHECK_BUCKET", "true")
	}
	return env
}

// keptEnv are the variables of agentctl's environment rclone starts
// with: where programs and files are, proxies and TLS trust. Nothing
// else reaches it: the machine's cloud variables (AWS_*, GOOGLE_*, ...)
// are not the mount's and some break rclone (an AWS_CA_BUNDLE it cannot
// read), and agentctl's own secrets (API keys, AGENTCTL_VAR_*) are none
// of rclone's business.
var keptEnv = map[string]bool{
	"PATH": true, "HOME": true, "TMPDIR": true, "LANG": true, "TZ": true,
	"HTTP_PROXY": true, "HTTPS_PROXY": true, "NO_PROXY": true, "http_proxy": true, "https_proxy": true, "no_proxy": true,
	"SSL_CERT_FILE": true, "SSL_CERT_DIR": true,
}

// CleanEnviron returns the variables of environ that rclone may see
// (keptEnv).
func CleanEnviron(environ []string) []string {
	out := make([]string, 0, len(keptEnv))
	for _, kv := range environ {
		if k, _, ok := strings.Cut(kv, "="); ok && keptEnv[k] {
			out = append(out, kv)
		}
	}
	return out
}

// Owner is the sandbox a mount belongs to.
type Owner struct {
	Lineage string
	Address string
}

var unsafeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9_.-]+`) })

// key names a mount's record and directory: readable, and unique for the
// owner and the workspace path.
func key(o Owner, path string) string {
	sum := sha256.Sum256([]byte(o.Lineage + "\x00" + o.Address + "\x00" + path))
	name := strings.Trim(unsafeName().ReplaceAllString(o.Address+"-"+path, "-"), "-.")
	if len(name) > 60 {
		name = name[:60]
	}
	return fmt.Sprintf("%s-%s", name, hex.EncodeToString(sum[:6]))
}
