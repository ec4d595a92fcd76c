// Package sealtest makes encryption keys for tests.
package sealtest

import (
	"crypto/rand"
	"encoding/base64"
	"testing"

	"github.com/agentctl/agentctl/internal/seal"
)

// NewKey returns a new random key and its text, as a user would put it
// in AGENTCTL_STATE_KEY.
func NewKey(t testing.TB) (*seal.Key, string) {
	t.Helper()
	raw := make([]byte, seal.KeySize)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	text := base64.StdEncoding.EncodeToString(raw)
	k, err := seal.ParseKey(text)
	if err != nil {
		t.Fatal(err)
	}
	return k, text
}
