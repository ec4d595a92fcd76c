package seal

import (
	"bytes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
)

// A sealed stream (a snapshot) is:
//
//	magic (24 bytes) | key check (8) | salt (32) | chunks
//
// Each chunk is ChunkSize bytes of plaintext (the last one fewer, maybe
// none) sealed with AES-256-GCM under a key derived from the key and the
// stream's random salt (HKDF-SHA256), so every stream has a key of its
// own. A chunk's nonce is its index (11 bytes, big-endian) and a last
// byte that is 1 for the final chunk and 0 otherwise (the STREAM
// construction): chunks cannot be reordered, and a stream cut at a chunk
// boundary lacks its final chunk and is refused. Memory use is one
// chunk. Chunks are at fixed offsets, so the stream can be read at any
// offset (StreamReader.ReadAt) without reading what is before.
const (
	streamMagic = "AGENTCTL-ENCRYPTED-TAR1\n"
	saltSize    = 32
	streamHead  = len(streamMagic) + checkSize + saltSize
	// ChunkSize is the plaintext size of a stream's chunks.
	ChunkSize = 64 << 10
	tagSize   = 16
)

// IsStream reports whether prefix (at least StreamMagicLen bytes read
// from the start of a file) starts a sealed stream.
func IsStream(prefix []byte) bool { return bytes.HasPrefix(prefix, []byte(streamMagic)) }

// StreamMagicLen is how many bytes IsStream needs.
const StreamMagicLen = len(streamMagic)

func (k *Key) streamAEAD(salt []byte) (cipher.AEAD, error) {
	sub, err := k.derive(salt, "agentctl stream v1", KeySize)
	if err != nil {
		return nil, err
	}
	return newGCM(sub)
}

func chunkNonce(dst []byte, i uint64, final bool) []byte {
	dst = dst[:nonceSize]
	clear(dst)
	binary.BigEndian.PutUint64(dst[3:11], i)
	if final {
		dst[11] = 1
	}
	return dst
}

// StreamWriter seals what is written to it into w; Close writes the
// final chunk (it does not close w).
type StreamWriter struct {
	w      io.Writer
	aead   cipher.AEAD
	buf    []byte // plaintext of the chunk being filled
	out    []byte
	nonce  [nonceSize]byte
	i      uint64
	err    error
	closed bool
}

// NewStreamWriter writes a stream header to w and returns a writer that
// seals into it.
func (k *Key) NewStreamWriter(w io.Writer) (*StreamWriter, error) {
	head := make([]byte, streamHead)
	copy(head, streamMagic)
	copy(head[len(streamMagic):], k.check[:])
	salt := head[len(streamMagic)+checkSize:]
	if _, err := rand.Read(salt); err != nil {
		return nil, fmt.Errorf("encryption: %w", err)
	}
	aead, err := k.streamAEAD(salt)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(head); err != nil {
		return nil, err
	}
	return &StreamWriter{w: w, aead: aead, buf: make([]byte, 0, ChunkSize), out: make([]byte, 0, ChunkSize+tagSize)}, nil
}

// Write seals p; a chunk is written once it is full and more follows.
func (s *StreamWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	if s.closed {
		return 0, errors.New("write to a closed encrypted stream")
	}
	n := 0
	for len(p) > 0 {
		if len(s.buf) == ChunkSize {
			if err := s.flush(false); err != nil {
				return n, err
			}
		}
		c := copy(s.buf[len(s.buf):ChunkSize], p)
		s.buf = s.buf[:len(s.buf)+c]
		p = p[c:]
		n += c
	}
	return n, nil
}

func (s *StreamWriter) flush(final bool) error {
	s.out = s.aead.Seal(s.out[:0], chunkNonce(s.nonce[:], s.i, final), s.buf, nil)
	if _, err := s.w.Write(s.out); err != nil {
		s.err = err
		return err
	}
	s.i++
	s.buf = s.buf[:0]
	return nil
}

// Close writes the final chunk.
func (s *StreamWriter) Close() error {
	if s.err != nil || s.closed {
		return s.err
	}
	s.closed = true
	return s.flush(true)
}

// StreamReader reads a sealed stream: at any offset (ReadAt), or in
// sequence through io.NewSectionReader(r, 0, r.Size()).
type StreamReader struct {
	r      io.ReaderAt
	what   string
	aead   cipher.AEAD
	chunks int64 // number of chunks
	size   int64 // plaintext size
	// the last chunk decrypted
	cur   int64
	plain []byte
	ct    []byte
	nonce [nonceSize]byte
}

// OpenStream opens the sealed stream of size bytes in r, sealed with
// key; what names it in errors. It reads the header and the final chunk
// (which gives the plaintext size and detects truncation). A nil key
// refuses with ErrNoKey.
func (k *Key) OpenStream(r io.ReaderAt, size int64, what string) (*StreamReader, error) {
	head := make([]byte, streamHead)
	if size < int64(streamHead) {
		return nil, fmt.Errorf("%s: the encrypted file is cut short: %w", what, ErrDamaged)
	}
	if _, err := r.ReadAt(head, 0); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if !IsStream(head) {
		return nil, fmt.Errorf("%s is not an encrypted agentctl file", what)
	}
	check := head[len(streamMagic) : len(streamMagic)+checkSize]
	if k == nil {
		return nil, NoKeyError(what, hex.EncodeToString(check))
	}
	if !bytes.Equal(check, k.check[:]) {
		return nil, WrongKeyError(what, hex.EncodeToString(check), k.Check())
	}
	aead, err := k.streamAEAD(head[len(streamMagic)+checkSize:])
	if err != nil {
		return nil, err
	}
	body := size - int64(streamHead)
	full := int64(ChunkSize + tagSize)
	n := (body + full - 1) / full
	if n == 0 || body-(n-1)*full < tagSize {
		return nil, fmt.Errorf("%s: the encrypted file is cut short: %w", what, ErrDamaged)
	}
	s := &StreamReader{r: r, what: what, aead: aead, chunks: n, cur: -1, ct: make([]byte, full), plain: make([]byte, 0, ChunkSize)}
	if err := s.load(n - 1); err != nil {
		return nil, err
	}
	s.size = (n-1)*ChunkSize + int64(len(s.plain))
	return s, nil
}

// Size is the plaintext size.
func (s *StreamReader) Size() int64 { return s.size }

func (s *StreamReader) load(i int64) error {
	if i == s.cur {
		return nil
	}
	full := int64(ChunkSize + tagSize)
	off := int64(streamHead) + i*full
	ct := s.ct[:full]
	n, err := s.r.ReadAt(ct, off)
	if err != nil && !(errors.Is(err, io.EOF) && i == s.chunks-1) {
		if errors.Is(err, io.EOF) {
			err = ErrDamaged
		}
		return fmt.Errorf("%s: %w", s.what, err)
	}
	ct = ct[:n]
	final := i == s.chunks-1
	if !final && n != len(s.ct) {
		return fmt.Errorf("%s: the encrypted file is cut short: %w", s.what, ErrDamaged)
	}
	plain, err := s.aead.Open(s.plain[:0], chunkNonce(s.nonce[:], uint64(i), final), ct, nil)
	if err != nil {
		s.cur = -1
		if final {
			return fmt.Errorf("%s: its last part is damaged or missing (the file was cut short or altered): %w", s.what, ErrDamaged)
		}
		return fmt.Errorf("%s: part %d: %w", s.what, i, ErrDamaged)
	}
	s.plain, s.cur = plain, i
	return nil
}

// ReadAt reads plaintext at off.
func (s *StreamReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	n := 0
	for len(p) > 0 {
		if off >= s.size {
			return n, io.EOF
		}
		i := off / ChunkSize
		if err := s.load(i); err != nil {
			return n, err
		}
		c := copy(p, s.plain[off-i*ChunkSize:])
		n += c
		p = p[c:]
		off += int64(c)
	}
	return n, nil
}
