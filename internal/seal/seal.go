// Package seal encrypts what agentctl keeps at rest (docs/security.md,
// "Encryption at rest"): AES-256-GCM under subkeys derived with
// HKDF-SHA256 from one 256-bit key the user supplies (base64, from the
// environment). Small payloads (the state, a state change, a journal
// record) are sealed whole as self-describing envelopes, bound to their
// kind and their Place (the state's lineage, the journal, the position),
// so that one cannot be moved to another place; snapshots are
// sealed as a stream of chunks (stream.go), so that an archive is never
// held whole in memory and a truncated one is detected.
//
// Every envelope and stream carries the key check, a non-secret value
// derived from the key, so that a wrong key is reported as such rather
// than as damage. The key itself is never written, printed or logged:
// errors name only key checks.
package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the size of a key in bytes.
const KeySize = 32

// checkSize is the size of a key check in bytes.
const checkSize = 8

// ErrNoKey is returned (wrapped) when encrypted data is read without a
// key.
var ErrNoKey = errors.New("encrypted, and no encryption key is configured")

// ErrWrongKey is returned (wrapped) when encrypted data was sealed with
// another key than the configured one.
var ErrWrongKey = errors.New("encrypted with another key than the configured one")

// ErrDamaged is returned (wrapped) when encrypted data does not
// authenticate: it was damaged or altered.
var ErrDamaged = errors.New("the encrypted data does not authenticate (it is damaged or was altered)")

// Key is a parsed encryption key and what is derived from it.
type Key struct {
	master [KeySize]byte
	check  [checkSize]byte
	aead   cipher.AEAD // for envelopes
}

// ParseKey parses a key: 32 bytes in base64 (standard or URL alphabet,
// padded or not), as `openssl rand -base64 32` prints. Its errors never
// contain the value.
func ParseKey(s string) (*Key, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("the encryption key is empty")
	}
	var raw []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err = enc.DecodeString(s); err == nil {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the encryption key is not base64: it must be %d random bytes in base64, as `openssl rand -base64 %d` prints", KeySize, KeySize)
	}
	if len(raw) != KeySize {
		return nil, fmt.Errorf("the encryption key is %d bytes long once decoded from base64, not %d: generate one with `openssl rand -base64 %d`", len(raw), KeySize, KeySize)
	}
	k := &Key{}
	copy(k.master[:], raw)
	clear(raw)
	check, err := k.derive(nil, "agentctl key check", checkSize)
	if err != nil {
		return nil, err
	}
	copy(k.check[:], check)
	sub, err := k.derive(nil, "agentctl envelope v1", KeySize)
	if err != nil {
		return nil, err
	}
	if k.aead, err = newGCM(sub); err != nil {
		return nil, err
	}
	return k, nil
}

// Check returns the key check: 16 hex digits derived from the key, which
// tell keys apart without revealing them.
func (k *Key) Check() string { return hex.EncodeToString(k.check[:]) }

// String never shows the key.
func (k *Key) String() string { return "encryption key (check " + k.Check() + ")" }

// GoString never shows the key.
func (k *Key) GoString() string { return k.String() }

func (k *Key) derive(salt []byte, info string, n int) ([]byte, error) {
	b, err := hkdf.Key(sha256.New, k.master[:], salt, info, n)
	if err != nil {
		return nil, fmt.Errorf("deriving a key: %w", err)
	}
	return b, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("encryption: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("encryption: %w", err)
	}
	return aead, nil
}

// Envelope layout: magic (4) | version (1) | key check (8) | nonce (12) |
// AES-256-GCM ciphertext and tag. The additional data is the first 13
// bytes, the kind of payload ("state", "journal", ...) and, from version
// 2, its Place: a payload of one kind cannot pass for another, nor be
// moved to another place. Version 1 envelopes (written before places
// were bound) are still opened, without a place. The magic starts with
// a zero byte, which no JSON document starts with.
const (
	envMagic   = "\x00ACS"
	envVersion = 2
	// legacyVersion is the envelope version without a place.
	legacyVersion = 1
	envHead       = len(envMagic) + 1 + checkSize
	nonceSize     = 12
)

// Place is where a sealed payload belongs: the lineage of the state it
// belongs to, the name of what holds it (a journal) and its position
// there (a record's number, from 1; a state version's serial). It is
// authenticated with the payload (the AEAD's additional data), so a
// payload opened at another place than the one it was sealed for does
// not authenticate. The zero Place binds to nothing more than the kind.
type Place struct {
	Lineage  string
	Name     string
	Position uint64
}

// Bound reports whether data is an envelope sealed with its Place
// (version 2), rather than plaintext or a version 1 envelope.
func Bound(data []byte) bool {
	return Sealed(data) && len(data) > len(envMagic) && data[len(envMagic)] == envVersion
}

// Sealed reports whether data is an envelope (Seal).
func Sealed(data []byte) bool {
	return len(data) >= len(envMagic) && string(data[:len(envMagic)]) == envMagic
}

// Keys is the encryption setting of a store: the key, and whether data
// is written encrypted (the default once a key is set) or decrypted
// (decrypt = true: the way back to an unencrypted state). A nil *Keys
// is no encryption: plaintext is written, and encrypted data is refused
// with ErrNoKey.
type Keys struct {
	key     *Key
	decrypt bool
}

// NewKeys returns the setting for key; decrypt makes writes plaintext
// (reads still decrypt with key).
func NewKeys(key *Key, decrypt bool) *Keys {
	if key == nil {
		return nil
	}
	return &Keys{key: key, decrypt: decrypt}
}

// Encrypting reports whether writes are encrypted.
func (k *Keys) Encrypting() bool { return k != nil && !k.decrypt }

// Key returns the key (nil without one).
func (k *Keys) Key() *Key {
	if k == nil {
		return nil
	}
	return k.key
}

// WriteKey is the key writes are encrypted with: nil when they are not.
func (k *Keys) WriteKey() *Key {
	if !k.Encrypting() {
		return nil
	}
	return k.key
}

// Seal returns plain as written: an envelope of kind sealed for at when
// encrypting, plain itself otherwise.
func (k *Keys) Seal(kind string, at Place, plain []byte) ([]byte, error) {
	if !k.Encrypting() {
		return plain, nil
	}
	return k.key.Seal(kind, at, plain)
}

// Open returns the plaintext of data as read: data itself when it is
// not an envelope (written before encryption was configured), its
// plaintext when it is one of kind sealed with the key for at (or a
// version 1 envelope, which has no place). what names the data in
// errors (a file, a table row).
func (k *Keys) Open(what, kind string, at Place, data []byte) ([]byte, error) {
	if !Sealed(data) {
		return data, nil
	}
	return k.Key().Open(what, kind, at, data)
}

// Seal returns an envelope of kind holding plain, bound to at.
func (k *Key) Seal(kind string, at Place, plain []byte) ([]byte, error) {
	out := make([]byte, envHead+nonceSize, envHead+nonceSize+len(plain)+k.aead.Overhead())
	copy(out, envMagic)
	out[len(envMagic)] = envVersion
	copy(out[len(envMagic)+1:], k.check[:])
	if _, err := rand.Read(out[envHead:]); err != nil {
		return nil, fmt.Errorf("encryption: %w", err)
	}
	return k.aead.Seal(out, out[envHead:], plain, aad(out[:envHead], kind, at)), nil
}

// Open returns the plaintext of the envelope data of kind, sealed for
// at; what names it in errors. A version 1 envelope is opened without a
// place (callers that must refuse one check Bound first). A nil key
// refuses with ErrNoKey.
func (k *Key) Open(what, kind string, at Place, data []byte) ([]byte, error) {
	if len(data) < envHead+nonceSize+16 || !Sealed(data) {
		return nil, fmt.Errorf("%s: %w", what, ErrDamaged)
	}
	v := data[len(envMagic)]
	if v != envVersion && v != legacyVersion {
		return nil, fmt.Errorf("%s is encrypted in format %d, which this agentctl does not read; upgrade agentctl", what, v)
	}
	check := data[len(envMagic)+1 : envHead]
	if k == nil {
		return nil, NoKeyError(what, hex.EncodeToString(check))
	}
	if !bytes.Equal(check, k.check[:]) {
		return nil, WrongKeyError(what, hex.EncodeToString(check), k.Check())
	}
	var ad []byte
	if v == legacyVersion {
		ad = append(append(make([]byte, 0, envHead+len(kind)), data[:envHead]...), kind...)
	} else {
		ad = aad(data[:envHead], kind, at)
	}
	plain, err := k.aead.Open(nil, data[envHead:envHead+nonceSize], data[envHead+nonceSize:], ad)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, ErrDamaged)
	}
	return plain, nil
}

// aad is the additional data of a version 2 envelope: its head, then
// the kind, the lineage and the name, each preceded by its length, and
// the position, so that no two (kind, place) pairs give the same bytes.
func aad(head []byte, kind string, at Place) []byte {
	ad := make([]byte, 0, len(head)+3*binary.MaxVarintLen64+len(kind)+len(at.Lineage)+len(at.Name)+8)
	ad = append(ad, head...)
	for _, s := range []string{kind, at.Lineage, at.Name} {
		ad = binary.AppendUvarint(ad, uint64(len(s)))
		ad = append(ad, s...)
	}
	return binary.BigEndian.AppendUint64(ad, at.Position)
}

// NoKeyError says that what, sealed with the key whose check is check,
// cannot be read without a key.
func NoKeyError(what, check string) error {
	return fmt.Errorf("%s: %w (AES-256-GCM, key check %s): set the key it was encrypted with, in the agentctl block's encryption block (docs/security.md)", what, ErrNoKey, check)
}

// WrongKeyError says that what was sealed with the key whose check is
// had, not with the configured key's (want).
func WrongKeyError(what, had, want string) error {
	return fmt.Errorf("%s: %w (its key check is %s, the configured key's is %s): set the key it was encrypted with (a key is never stored, so a lost one cannot be recovered)", what, ErrWrongKey, had, want)
}

// EncodeText is the text form of an envelope (journal lines, the state
// file): standard base64.
func EncodeText(env []byte) []byte {
	out := make([]byte, base64.StdEncoding.EncodedLen(len(env)))
	base64.StdEncoding.Encode(out, env)
	return out
}

// DecodeText is the inverse of EncodeText.
func DecodeText(text []byte) ([]byte, error) {
	out := make([]byte, base64.StdEncoding.DecodedLen(len(text)))
	n, err := base64.StdEncoding.Decode(out, text)
	if err != nil {
		return nil, ErrDamaged
	}
	return out[:n], nil
}
