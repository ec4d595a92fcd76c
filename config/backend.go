package config

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
)

// Backend is the agentctl block's backend: where the state, the lock,
// the journals and the snapshots live when not in the local .agentctl
// directory (docs/backends.md).
type Backend struct {
	// Type is the backend type: "pg".
	Type string
	// ConnString is the PostgreSQL connection string; empty, the PG*
	// environment variables give it. It is a secret: it is never
	// written to the state or printed.
	ConnString string
	// Schema is the schema holding the backend's tables ("" for the
	// default).
	Schema    string
	DeclRange hcl.Range
}

// BackendTypes are the backend types the agentctl block accepts.
var BackendTypes = []string{"pg"}

var backendBlockSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{{Type: "backend", LabelNames: []string{"type"}}},
}

// decodeBackend decodes the backend blocks of the agentctl block.
func (l *loader) decodeBackend(blocks hcl.Blocks) {
	for _, b := range blocks {
		if b.Type != "backend" {
			continue
		}
		if l.cfg.Settings.Backend != nil {
			l.errorf(b.DefRange, "Duplicate backend block",
				"A backend was already declared at %s; an agentctl block has at most one.", rangeString(l.cfg.Settings.Backend.DeclRange))
			continue
		}
		typ := b.Labels[0]
		if typ != "pg" {
			l.errorf(b.LabelRanges[0], "Unknown backend type",
				"%q is not a backend type; the types are %q (remove the block to keep the state in the local .agentctl directory).", typ, BackendTypes)
			continue
		}
		be := &Backend{Type: typ, DeclRange: b.DefRange}
		content, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
			{Name: "conn_str"}, {Name: "schema_name"},
		}})
		l.diags = append(l.diags, diags...)
		if a, ok := content.Attributes["conn_str"]; ok {
			// env() is allowed (and recommended); variables are not,
			// as the backend is needed before they are.
			v, diags := a.Expr.Value(&hcl.EvalContext{Functions: l.funcs})
			if diags.HasErrors() {
				l.errorf(a.Expr.Range(), "Invalid conn_str",
					"conn_str must be a string, or env(\"NAME\") to read it from the environment; it can't use variables or locals, which are decoded after the backend (or leave it out and set the PG* environment variables).")
			} else if s, ok := l.toString(v, a.Expr.Range(), "conn_str"); ok {
				l.col.add(s)
				be.ConnString = s
			}
		}
		if a, ok := content.Attributes["schema_name"]; ok {
			if s, ok := l.staticString(a); ok {
				if err := checkSchemaName(s); err != nil {
					l.errorf(a.Expr.Range(), "Invalid schema_name", "%s", err)
				} else {
					be.Schema = s
				}
			}
		}
		l.cfg.Settings.Backend = be
	}
}

// checkSchemaName accepts a PostgreSQL identifier that needs no quoting:
// lower-case letters, digits and underscores, starting with a letter or
// an underscore, at most 63 bytes.
func checkSchemaName(s string) error {
	if s == "" || len(s) > 63 {
		return fmt.Errorf("schema_name must be 1 to 63 characters long, got %d", len(s))
	}
	for i, r := range s {
		if !(r >= 'a' && r <= 'z' || r == '_' || i > 0 && r >= '0' && r <= '9') {
			return fmt.Errorf("%q is not a valid schema name: use lower-case letters, digits and underscores, starting with a letter or an underscore", s)
		}
	}
	return nil
}
