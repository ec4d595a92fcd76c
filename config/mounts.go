package config

import (
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox/mount"
)

// Mount is a storage mount of a manifest: a bucket (and prefix) of an
// object store made visible at Path in the workspace (docs/mounts.md).
// Its credentials come from env() or sensitive variables only; they are
// kept out of every JSON encoding of the configuration (json:"-"), so
// no digest, plan or state holds them.
type Mount struct {
	// Kind is the entry type: s3, r2, s3_files, gcs, azure_blob or box.
	Kind string
	// Path is workspace-relative, checked.
	Path string
	// Bucket is the bucket, the container of an azure_blob mount, or the
	// folder id of a box mount ("0" is the root folder).
	Bucket   string
	Prefix   string
	Endpoint string
	Region   string
	// AccountID is an R2 account's id (it names the endpoint).
	AccountID string
	// Account is an Azure storage account's name.
	Account  string
	ReadOnly bool
	// AccessKeyID, SecretAccessKey and SessionToken are an S3-API
	// store's credentials; CredentialsJSON is a GCS service account key;
	// AccountKey or SASToken an Azure storage account's; AccessToken a
	// Box access token. Empty ones mean anonymous access (a public
	// bucket or container).
	AccessKeyID     string `json:"-"`
	SecretAccessKey string `json:"-"`
	SessionToken    string `json:"-"`
	CredentialsJSON string `json:"-"`
	AccountKey      string `json:"-"`
	SASToken        string `json:"-"`
	AccessToken     string `json:"-"`
	DeclRange       hcl.Range
}

// Source is the mount's source as plans and messages show it, like
// s3://bucket/prefix (endpoint) — never a credential.
func (m *Mount) Source() string {
	return mount.Def{Kind: m.Kind, Account: m.Account, Bucket: m.Bucket, Prefix: m.Prefix, Endpoint: m.Endpoint}.Source()
}

// mountKinds are the manifest entry types that mount storage.
var mountKinds = map[string]bool{"s3": true, "r2": true, "s3_files": true, "gcs": true, "azure_blob": true, "box": true}

var s3MountAttrs = []hcl.AttributeSchema{
	{Name: "bucket", Required: true}, {Name: "prefix"}, {Name: "endpoint"}, {Name: "region"}, {Name: "read_only"},
	{Name: "access_key_id"}, {Name: "secret_access_key"}, {Name: "session_token"},
}

var mountSchemas = map[string]*hcl.BodySchema{
	"s3":       {Attributes: s3MountAttrs},
	"s3_files": {Attributes: s3MountAttrs},
	"r2":       {Attributes: append([]hcl.AttributeSchema{{Name: "account_id"}}, s3MountAttrs...)},
	"gcs": {Attributes: []hcl.AttributeSchema{
		{Name: "bucket", Required: true}, {Name: "prefix"}, {Name: "endpoint"}, {Name: "read_only"}, {Name: "credentials_json"},
	}},
	"azure_blob": {Attributes: []hcl.AttributeSchema{
		{Name: "account", Required: true}, {Name: "container", Required: true}, {Name: "prefix"}, {Name: "endpoint"}, {Name: "read_only"},
		{Name: "account_key"}, {Name: "sas_token"},
	}},
	"box": {Attributes: []hcl.AttributeSchema{
		{Name: "folder_id"}, {Name: "prefix"}, {Name: "read_only"}, {Name: "access_token", Required: true},
	}},
}

// credentialAttrs are the arguments that hold a secret: only a sensitive
// value (env() or a sensitive variable) may set them.
var credentialAttrs = map[string]bool{
	"access_key_id": true, "secret_access_key": true, "session_token": true, "credentials_json": true,
	"account_key": true, "sas_token": true, "access_token": true,
}

// S3 bucket names (and GCS ones, which allow the same characters and
// underscores): 3 to 222 characters, lower case, digits, dots, dashes.
var bucketRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$`) })

// decodeMount decodes one mount entry at the checked workspace path p.
func (l *loader) decodeMount(eb *hcl.Block, ec *hcl.BodyContent, p string) (*Mount, bool) {
	m := &Mount{Kind: eb.Type, Path: p, DeclRange: eb.DefRange}
	sc := scope{where: "a manifest"}
	what := fmt.Sprintf("The %s mount %q", eb.Type, p)
	ok := true
	str := func(name string) string {
		a, has := ec.Attributes[name]
		if !has {
			return ""
		}
		v, good := l.eval(a.Expr, sc, nil, nil)
		if !good {
			ok = false
			return ""
		}
		if credentialAttrs[name] {
			return l.credential(v, a, eb.Type)
		}
		if !l.noSensitive(v, a.Expr.Range(), what+"'s "+name) {
			ok = false
			return ""
		}
		s, good := l.toString(v, a.Expr.Range(), name)
		ok = ok && good
		return s
	}
	m.Bucket, m.Prefix, m.Endpoint = str("bucket"), str("prefix"), str("endpoint")
	m.Region, m.AccountID = str("region"), str("account_id")
	m.AccessKeyID, m.SecretAccessKey, m.SessionToken = str("access_key_id"), str("secret_access_key"), str("session_token")
	m.CredentialsJSON = str("credentials_json")
	switch eb.Type {
	case "azure_blob":
		m.Account, m.Bucket = str("account"), str("container")
		m.AccountKey, m.SASToken = str("account_key"), strings.TrimPrefix(str("sas_token"), "?")
		l.sensitiveSAS(m.SASToken)
	case "box":
		m.Bucket, m.AccessToken = str("folder_id"), str("access_token")
	}
	if a, has := ec.Attributes["read_only"]; has {
		if v, good := l.eval(a.Expr, sc, nil, nil); good && l.noSensitive(v, a.Expr.Range(), what) {
			m.ReadOnly, good = l.toBool(v, a.Expr.Range(), "read_only")
			ok = ok && good
		} else {
			ok = false
		}
	}
	if !ok {
		return nil, false
	}
	return m, l.checkMount(m, ec)
}

// credential returns a credential argument's value, refusing a literal:
// a secret written in the configuration would be in version control.
func (l *loader) credential(v cty.Value, a *hcl.Attribute, kind string) string {
	if !v.IsNull() && !v.ContainsMarked() {
		l.errorf(a.Expr.Range(), "Credential must not be a literal",
			"%s of a %s mount holds a secret: take it from env(\"NAME\") or a variable with sensitive = true, so it is never written in the configuration, state or plans.", a.Name, kind)
		return ""
	}
	s, ok := l.toString(v, a.Expr.Range(), a.Name)
	if !ok {
		return ""
	}
	if s != "" {
		l.col.add(s)
	}
	return s
}

// checkMount checks what a mount's arguments say together.
func (l *loader) checkMount(m *Mount, ec *hcl.BodyContent) bool {
	rng := func(name string) hcl.Range {
		if a, ok := ec.Attributes[name]; ok {
			return a.Expr.Range()
		}
		return m.DeclRange
	}
	ok := true
	fail := func(name, summary, detail string, args ...any) {
		l.errorf(rng(name), summary, detail, args...)
		ok = false
	}
	if m.Prefix != "" {
		c, err := checkWorkspacePath(strings.Trim(m.Prefix, "/"))
		if err != nil {
			fail("prefix", "Invalid prefix", "%s. prefix is a path inside the bucket, like \"deals/2024\".", capitalize(err.Error()))
		}
		m.Prefix = c
	}
	if m.Endpoint != "" {
		u, err := url.Parse(m.Endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" {
			fail("endpoint", "Invalid endpoint", "endpoint must be an http or https URL without credentials, like \"https://s3.example.com\"; got %q.", m.Endpoint)
		}
	}
	switch m.Kind {
	case "azure_blob":
		checkAzureMount(m, fail)
	case "box":
		checkBoxMount(m, fail)
	default:
		checkBucketMount(m, fail)
	}
	return ok
}

// failFunc reports an error at a mount's argument.
type failFunc func(name, summary, detail string, args ...any)

// checkBucketMount checks the arguments of the s3, r2, s3_files and gcs
// mounts.
func checkBucketMount(m *Mount, fail failFunc) {
	if !bucketRe().MatchString(m.Bucket) && !(m.Kind == "gcs" && validGCSBucket(m.Bucket)) {
		fail("bucket", "Invalid bucket name", "bucket must be a bucket's name alone (3 to 222 lower-case letters, digits, dots and dashes), like \"data-room\"; put a path inside it in prefix. Got %q.", m.Bucket)
	}
	if m.Kind == "r2" && m.Endpoint == "" {
		if m.AccountID == "" {
			fail("account_id", "Missing R2 account", "An r2 mount needs account_id (its endpoint is https://ACCOUNT_ID.r2.cloudflarestorage.com) or an explicit endpoint.")
		} else if !validIdent(m.AccountID) {
			fail("account_id", "Invalid R2 account", "account_id must be the account's id (letters and digits); got %q.", m.AccountID)
		} else {
			m.Endpoint = "https://" + m.AccountID + ".r2.cloudflarestorage.com"
		}
	}
	if (m.AccessKeyID == "") != (m.SecretAccessKey == "") && m.Kind != "gcs" {
		fail("secret_access_key", "Incomplete credentials", "Set both access_key_id and secret_access_key, or neither for a public bucket.")
	}
	if m.SessionToken != "" && m.AccessKeyID == "" {
		fail("session_token", "Incomplete credentials", "session_token goes with access_key_id and secret_access_key.")
	}
}

// validGCSBucket allows the underscores GCS bucket names may have.
func validGCSBucket(s string) bool {
	return bucketRe().MatchString(strings.ReplaceAll(s, "_", "-"))
}

// checkMountPaths reports a mount whose path is another entry's, holds
// one or lies inside one: the mount would hide it or write it into the
// bucket.
func (l *loader) checkMountPaths(m *Manifest) {
	type decl struct {
		path  string
		kind  string
		rng   hcl.Range
		mount bool
	}
	var all []decl
	for _, e := range m.Entries {
		all = append(all, decl{e.Path, e.Kind, e.DeclRange, false})
	}
	for _, mt := range m.Mounts {
		all = append(all, decl{mt.Path, mt.Kind, mt.DeclRange, true})
	}
	// A dir entry above a mount only makes its parent directory.
	dirAbove := func(d decl, p string) bool { return d.kind == "dir" && strings.HasPrefix(p, d.path+"/") }
	sort.SliceStable(all, func(i, j int) bool { return all[i].rng.Start.Byte < all[j].rng.Start.Byte })
	for i, a := range all {
		for _, b := range all[:i] {
			if !a.mount && !b.mount {
				continue
			}
			if dirAbove(a, b.path) || dirAbove(b, a.path) {
				continue
			}
			if a.path == b.path || strings.HasPrefix(a.path, b.path+"/") || strings.HasPrefix(b.path, a.path+"/") {
				l.errorf(a.rng, "Mount path collides with another entry",
					"The %s %q overlaps the %s %q declared at %s: a mount owns its whole directory, so no other entry may be at or inside it, nor (but for a dir) above it. Give the mount a path of its own.", a.kind, a.path, b.kind, b.path, rangeString(b.rng))
				break
			}
		}
	}
}

// checkMountSupport refuses the mounts of a sandbox whose provider type
// cannot make them, at each mount, with the provider's reason.
func (l *loader) checkMountSupport(pt *registry.Type, prov *Provider, si *SandboxInstance, m *Manifest) {
	why := fmt.Sprintf("the %s provider has no way to mount storage into its sandboxes", pt.Name)
	if pt.MountSupport != nil {
		why = pt.MountSupport(prov.Settings)
	}
	if why == "" {
		return
	}
	for _, mt := range m.Mounts {
		l.errorf(mt.DeclRange, "Storage mount not supported by this provider",
			"%s uses manifest %q, whose %s mount %q cannot be made: %s. Use the local or docker provider for this sandbox, or remove the mount.", si.Addr, m.Name, mt.Kind, mt.Path, capitalize(strings.TrimSuffix(why, ".")))
	}
}
