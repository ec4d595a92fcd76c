package config

import (
	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/internal/seal"
)

// Encryption is the agentctl block's encryption block: the key the
// state, the state log, the journals and the snapshots are encrypted
// with at rest, whatever the backend (docs/security.md, "Encryption at
// rest").
type Encryption struct {
	// Key is the parsed key; it is sensitive and never printed (its
	// String shows only its key check).
	Key *seal.Key
	// Decrypt makes the next writes plaintext (the way back to an
	// unencrypted state): what is encrypted is still read with Key.
	Decrypt   bool
	DeclRange hcl.Range
}

// Keys returns the setting the stores take (nil without a block).
func (e *Encryption) Keys() *seal.Keys {
	if e == nil {
		return nil
	}
	return seal.NewKeys(e.Key, e.Decrypt)
}

var encryptionBlockSchema = hcl.BlockHeaderSchema{Type: "encryption"}

// decodeEncryption decodes the encryption blocks of the agentctl block.
func (l *loader) decodeEncryption(blocks hcl.Blocks) {
	for _, b := range blocks {
		if b.Type != encryptionBlockSchema.Type {
			continue
		}
		if l.cfg.Settings.Encryption != nil {
			l.errorf(b.DefRange, "Duplicate encryption block",
				"An encryption block was already declared at %s; an agentctl block has at most one.", rangeString(l.cfg.Settings.Encryption.DeclRange))
			continue
		}
		content, diags := b.Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{
			{Name: "key", Required: true}, {Name: "decrypt"},
		}})
		l.diags = append(l.diags, diags...)
		if diags.HasErrors() {
			continue
		}
		enc := &Encryption{DeclRange: b.DefRange}
		ok := true
		a := content.Attributes["key"]
		// env() is allowed (and meant); variables are not, as the key
		// is needed before they are decoded.
		v, vdiags := a.Expr.Value(&hcl.EvalContext{Functions: l.funcs})
		if vdiags.HasErrors() {
			l.errorf(a.Expr.Range(), "Invalid encryption key",
				"key must be env(\"NAME\"), reading the key from the environment; it can't use variables or locals, which are decoded after the state's encryption is needed.")
			ok = false
		} else if s, sok := l.toString(v, a.Expr.Range(), "key"); !sok {
			ok = false
		} else {
			l.col.add(s)
			switch k, err := seal.ParseKey(s); {
			case s == "" && l.opts.NoSecrets:
				// validate: the key is not needed to check the configuration.
			case !v.IsMarked() && s != "":
				l.errorf(a.Expr.Range(), "Encryption key written in the configuration",
					"The key encrypts the state: it must not be in a file you commit. Write key = env(\"AGENTCTL_STATE_KEY\") and set that variable to the key (openssl rand -base64 32 makes one).")
				ok = false
			case err != nil:
				detail := err.Error() + "."
				if s == "" {
					detail = "The key is empty: is the environment variable it reads set? Set it to the key the state is encrypted with (a new one: openssl rand -base64 32), or remove the encryption block to keep the state unencrypted."
				}
				l.errorf(a.Expr.Range(), "Invalid encryption key", "%s", detail)
				ok = false
			default:
				enc.Key = k
			}
		}
		if a, has := content.Attributes["decrypt"]; has {
			v, vdiags := a.Expr.Value(nil)
			l.diags = append(l.diags, vdiags...)
			if vdiags.HasErrors() {
				ok = false
			} else if bv, bok := l.toBool(v, a.Expr.Range(), "decrypt"); bok {
				enc.Decrypt = bv
			} else {
				ok = false
			}
		}
		if ok {
			l.cfg.Settings.Encryption = enc
		}
	}
}
