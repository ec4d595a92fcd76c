// Package digest names the content digests agentctl records for what it
// reads from the host (local_dir and local_file sources) and for the
// snapshots it writes: "blake3:" and the hex BLAKE3-256 of the content.
//
// BLAKE3 is a cryptographic hash about three times as fast as SHA-256
// on the machines agentctl runs on, which is what lets a copy or a
// snapshot of a large tree hash it on the second core in less time than
// the copy takes. Digests recorded before it ("sha256:" and the hex
// SHA-256, or a snapshot's bare hex SHA-256) are still read: a content
// digest is compared with one computed by the algorithm it names, so a
// state written by an earlier agentctl plans no change.
package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"strings"

	"github.com/zeebo/blake3"
)

// Algorithm is a digest algorithm's name, as it prefixes a digest.
type Algorithm string

const (
	// BLAKE3 is BLAKE3 with a 256-bit output: what agentctl writes.
	BLAKE3 Algorithm = "blake3"
	// SHA256 is SHA-256: what agentctl wrote before BLAKE3, still read.
	SHA256 Algorithm = "sha256"
)

// New returns a hash of algorithm a (BLAKE3 for any other value).
func (a Algorithm) New() hash.Hash {
	if a == SHA256 {
		return sha256.New()
	}
	return blake3.New()
}

// Format is the digest string of sum, computed with a:
// "blake3:<hex>".
func (a Algorithm) Format(sum []byte) string {
	return string(a.Name()) + ":" + hex.EncodeToString(sum)
}

// Name is a itself, or BLAKE3 for the empty Algorithm.
func (a Algorithm) Name() Algorithm {
	if a == SHA256 {
		return SHA256
	}
	return BLAKE3
}

// Parse splits a recorded snapshot digest into its algorithm and hex
// sum. A bare 64-digit hex string is a SHA-256 (how snapshots were
// recorded before digests named their algorithm).
func Parse(s string) (Algorithm, string, error) {
	alg, sum, ok := strings.Cut(s, ":")
	if !ok {
		alg, sum = string(SHA256), s
	}
	switch Algorithm(alg) {
	case SHA256, BLAKE3:
	default:
		return "", "", fmt.Errorf("digest %q: unknown algorithm %q (this agentctl reads %s and %s); the state was written by a newer agentctl or edited by hand", s, alg, BLAKE3, SHA256)
	}
	if len(sum) != 64 {
		return "", "", fmt.Errorf("digest %q: want 64 hex digits after %q, have %d", s, alg+":", len(sum))
	}
	if _, err := hex.DecodeString(sum); err != nil {
		return "", "", fmt.Errorf("digest %q: the sum is not hex: %w", s, err)
	}
	return Algorithm(alg), sum, nil
}

// Named is a recorded digest with its algorithm named: "sha256:<hex>"
// for a bare hex SHA-256 (as snapshots were recorded before digests named
// their algorithm); one that does not parse is returned as it is.
func Named(recorded string) string {
	alg, sum, err := Parse(recorded)
	if err != nil {
		return recorded
	}
	return string(alg) + ":" + sum
}
