package views

import (
	"bytes"
	"fmt"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/config/diagfmt"
	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/hashicorp/hcl/v2"
)

// Validate shows the outcome of agentctl validate.
type Validate interface {
	// Results shows the configuration's diagnostics, or that it is valid.
	Results(diags hcl.Diagnostics, files map[string]*hcl.File)
}

// NewValidate returns the validate view of viewType.
func NewValidate(viewType arguments.ViewType, view *View) Validate {
	if viewType == arguments.ViewJSON {
		return validateJSON{view}
	}
	return validateHuman{view}
}

type validateHuman struct{ *View }

func (v validateHuman) Results(diags hcl.Diagnostics, files map[string]*hcl.File) {
	v.Diagnostics(diags, files)
	if diags.HasErrors() {
		return
	}
	if v.Color {
		fmt.Fprintf(v.Stdout, "\x1b[32m\x1b[1mSuccess!\x1b[0m The configuration is valid.\n")
	} else {
		fmt.Fprintf(v.Stdout, "Success! The configuration is valid.\n")
	}
}

// validateJSON prints the document of terraform validate -json.
type validateJSON struct{ *View }

func (v validateJSON) Results(diags hcl.Diagnostics, files map[string]*hcl.File) {
	var b bytes.Buffer
	_ = diagfmt.WriteJSON(&b, diags, files)
	_, _ = v.Stdout.Write(termtext.JSON(b.Bytes()))
}
