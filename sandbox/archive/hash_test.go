package archive

import (
	"bytes"
	"crypto/sha256"
	"math/rand/v2"
	"testing"
)

// TestAsyncHash: the hash of writes of every size (a byte, a tar block,
// more than the buffers hold at once) is the hash of their concatenation;
// closing without Sum ends the goroutine.
func TestAsyncHash(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, total := range []int{0, 1, 511, hashChunk, hashChunk*hashBuffers*2 + 7} {
		data := make([]byte, total)
		for i := range data {
			data[i] = byte(rng.IntN(256))
		}
		a := newAsyncHash(sha256.New())
		for p := data; len(p) > 0; {
			n := min(len(p), []int{1, 512, 4096, hashChunk + 3, 3 * hashChunk}[rng.IntN(5)])
			if k, err := a.Write(p[:n]); k != n || err != nil {
				t.Fatalf("Write = %d, %v", k, err)
			}
			p = p[n:]
		}
		want := sha256.Sum256(data)
		if got := a.Sum(); !bytes.Equal(got, want[:]) {
			t.Errorf("%d bytes: hash %x, want %x", total, got, want)
		}
		a.close()
	}
	a := newAsyncHash(sha256.New())
	a.Write(make([]byte, 3*hashChunk+1))
	a.close()
	a.close()
}
