package hashpipe

import (
	"bytes"
	"crypto/sha256"
	"math/rand/v2"
	"testing"
)

// TestWriter: the hash of writes of every size (a byte, a tar block,
// more than the buffers hold at once) is the hash of their concatenation;
// closing without Sum ends the goroutine.
func TestWriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, total := range []int{0, 1, 511, chunk, chunk*buffers*2 + 7} {
		data := make([]byte, total)
		for i := range data {
			data[i] = byte(rng.IntN(256))
		}
		a := New(sha256.New())
		for p := data; len(p) > 0; {
			n := min(len(p), []int{1, 512, 4096, chunk + 3, 3 * chunk}[rng.IntN(5)])
			if k, err := a.Write(p[:n]); k != n || err != nil {
				t.Fatalf("Write = %d, %v", k, err)
			}
			p = p[n:]
		}
		want := sha256.Sum256(data)
		if got := a.Sum(); !bytes.Equal(got, want[:]) {
			t.Errorf("%d bytes: hash %x, want %x", total, got, want)
		}
		a.Close()
	}
	a := New(sha256.New())
	a.Write(make([]byte, 3*chunk+1))
	a.Close()
	a.Close()
}
