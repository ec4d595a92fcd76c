package views

import (
	"encoding/json"
	"fmt"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
)

// VersionInfo is the document of version -json.
type VersionInfo struct {
	Version  string `json:"agentctl_version"`
	Platform string `json:"platform"`
}

// Version shows agentctl's version.
type Version interface {
	Version(info VersionInfo)
}

// NewVersion returns the version view of viewType.
func NewVersion(viewType arguments.ViewType, view *View) Version {
	if viewType == arguments.ViewJSON {
		return versionJSON{view}
	}
	return versionHuman{view}
}

type versionHuman struct{ *View }

func (v versionHuman) Version(info VersionInfo) {
	fmt.Fprintf(v.Stdout, "agentctl v%s\non %s\n", info.Version, info.Platform)
}

type versionJSON struct{ *View }

func (v versionJSON) Version(info VersionInfo) {
	enc := json.NewEncoder(v.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(info)
}
