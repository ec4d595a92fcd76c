package mount

import (
	"net/url"
	"strings"
)

// AzureEmulatorAccount and AzureEmulatorKey are the storage emulator's
// (Azurite's) well-known account and key, published by Microsoft.
const (
	AzureEmulatorAccount = "devstoreaccount1"
	AzureEmulatorKey     = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)

// IsAzureEmulator says whether account and key are the storage
// emulator's well-known ones.
func IsAzureEmulator(account, key string) bool {
	return account == AzureEmulatorAccount && key == AzureEmulatorKey
}

// AzureKeyEndpointSuffix is the domain suffix of an endpoint of the form
// https://ACCOUNT.SUFFIX, or "" for an endpoint of another form. rclone
// (1.60, Debian's) signs requests with an account key only at
// https://ACCOUNT.SUFFIX, built from the account and its endpoint
// setting, which is that suffix.
func AzureKeyEndpointSuffix(account, endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "https" || strings.Trim(u.Path, "/") != "" || u.Port() != "" || u.RawQuery != "" {
		return ""
	}
	suffix, ok := strings.CutPrefix(u.Host, account+".")
	if !ok || suffix == "" {
		return ""
	}
	return suffix
}

// azureBaseURL is the Blob service's URL for the account: the endpoint,
// or Azure's own https://ACCOUNT.blob.core.windows.net.
func (d Def) azureBaseURL() string {
	if d.Endpoint != "" {
		return strings.TrimSuffix(d.Endpoint, "/")
	}
	return "https://" + d.Account + ".blob.core.windows.net"
}

// azureEnv configures rclone's azureblob backend. An account key is
// rclone's Shared Key signing (at https://ACCOUNT.SUFFIX, or as the
// storage emulator with its well-known key); a SAS token, or none for a
// public container, goes in a container-level SAS URL, which rclone
// takes at any endpoint.
func (d Def) azureEnv() []string {
	const p = "RCLONE_CONFIG_STORE_"
	env := []string{p + "TYPE=azureblob"}
	key := d.Secrets.AccountKey
	switch {
	case key != "" && d.Endpoint != "" && AzureKeyEndpointSuffix(d.Account, d.Endpoint) == "":
		// Validated to be the emulator's own account and key.
		env = append(env, p+"USE_EMULATOR=true", p+"ENDPOINT="+strings.TrimSuffix(d.Endpoint, "/"))
	case key != "":
		env = append(env, p+"ACCOUNT="+d.Account, p+"KEY="+key)
		if d.Endpoint != "" {
			env = append(env, p+"ENDPOINT="+AzureKeyEndpointSuffix(d.Account, d.Endpoint))
		}
	default:
		u := d.azureBaseURL() + "/" + d.Bucket
		if d.Secrets.SASToken != "" {
			u += "?" + d.Secrets.SASToken
		}
		env = append(env, p+"SAS_URL="+u)
	}
	return env
}
