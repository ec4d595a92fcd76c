package config

import (
	"encoding/base64"
	"net/url"
	"regexp"
	"sync"

	"github.com/agentctl/agentctl/sandbox/mount"
)

var (
	// Storage account names: 3 to 24 lower-case letters and digits.
	azureAccountRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9]{3,24}$`) })
	// Container names: 3 to 63 lower-case letters, digits and single
	// dashes, starting and ending with a letter or digit.
	azureContainerRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9](?:-?[a-z0-9]){2,62}$`) })
	// Box folder ids are decimal numbers; "0" is the root folder.
	boxFolderRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9]{1,20}$`) })
)

// checkAzureMount checks an azure_blob mount's arguments. Credentials
// are never echoed in a message.
func checkAzureMount(m *Mount, fail failFunc) {
	if !azureAccountRe().MatchString(m.Account) {
		fail("account", "Invalid storage account", "account must be an Azure storage account's name: 3 to 24 lower-case letters and digits, like \"dealroom\". Got %q.", m.Account)
	}
	if !azureContainerRe().MatchString(m.Bucket) {
		fail("container", "Invalid container name", "container must be a container's name alone (3 to 63 lower-case letters, digits and single dashes), like \"data-room\"; put a path inside it in prefix. Got %q.", m.Bucket)
	}
	if m.AccountKey != "" && m.SASToken != "" {
		fail("sas_token", "Conflicting credentials", "Set account_key or sas_token, not both (or neither for a public container).")
		return
	}
	if m.AccountKey != "" {
		if b, err := base64.StdEncoding.DecodeString(m.AccountKey); err != nil || len(b) == 0 {
			fail("account_key", "Invalid account key", "account_key must be the storage account's key as the portal shows it (base64); the value given is not base64.")
		} else if m.Endpoint != "" && mount.AzureKeyEndpointSuffix(m.Account, m.Endpoint) == "" && !mount.IsAzureEmulator(m.Account, m.AccountKey) {
			fail("endpoint", "Endpoint not usable with account_key", "With account_key, endpoint must be https://%s.SUFFIX (like https://%s.blob.core.windows.net), where rclone addresses the account; or the storage emulator's own account %q and key. For another emulator or URL, use sas_token. Got %q.", m.Account, m.Account, mount.AzureEmulatorAccount, m.Endpoint)
		}
	}
	if m.SASToken != "" {
		q, err := url.ParseQuery(m.SASToken)
		if err != nil || q.Get("sig") == "" || q.Get("sv") == "" {
			fail("sas_token", "Invalid SAS token", "sas_token must be a shared access signature's query string, like \"sv=2020-10-02&sr=c&sp=rl&se=...&sig=...\" (the part of a SAS URL after \"?\"); the value given has no sv and sig.")
		}
	}
}

// checkBoxMount checks a box mount's arguments.
func checkBoxMount(m *Mount, fail failFunc) {
	if m.Bucket == "" {
		m.Bucket = "0"
	}
	if !boxFolderRe().MatchString(m.Bucket) {
		fail("folder_id", "Invalid Box folder id", "folder_id must be a Box folder's id, the number at the end of its URL (https://app.box.com/folder/123456789), or \"0\" for the root folder; got %q.", m.Bucket)
	}
	if !m.ReadOnly {
		fail("read_only", "Writable box mounts are not supported yet", "read_only = false is not supported for box yet: set read_only = true. rclone uploads a file to Box in a multipart part its published API does not name (\"contents\", where the API has \"file\"), so writes are not checked against the API and are refused until they are.")
	}
	if m.AccessToken == "" {
		fail("access_token", "Missing Box access token", "A box mount needs access_token: Box has no anonymous access. Take it from env(\"NAME\") or a sensitive variable.")
	}
}

// sensitiveSAS tells the scrubber a SAS token as rclone gets it (without
// "?") and its signature alone, which a URL in a message may carry.
func (l *loader) sensitiveSAS(token string) {
	if token == "" {
		return
	}
	l.col.add(token)
	if q, err := url.ParseQuery(token); err == nil && q.Get("sig") != "" {
		l.col.add(q.Get("sig"))
	}
}
