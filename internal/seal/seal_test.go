package seal

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"testing"
)

func newKey(t testing.TB) (*Key, string) {
	t.Helper()
	raw := make([]byte, KeySize)
	rand.Read(raw)
	s := base64.StdEncoding.EncodeToString(raw)
	k, err := ParseKey(s)
	if err != nil {
		t.Fatal(err)
	}
	return k, s
}

func TestParseKey(t *testing.T) {
	_, s := newKey(t)
	for _, bad := range []string{"", "  ", "not base64!", base64.StdEncoding.EncodeToString([]byte("short"))} {
		_, err := ParseKey(bad)
		if err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		} else if bad != "" && strings.Contains(err.Error(), bad) && strings.TrimSpace(bad) != "" {
			t.Errorf("error shows the value: %v", err)
		}
	}
	k, err := ParseKey(strings.TrimRight(s, "="))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(k.String(), s) || len(k.Check()) != 16 {
		t.Errorf("String = %q, Check = %q", k.String(), k.Check())
	}
}

func TestEnvelope(t *testing.T) {
	k, _ := newKey(t)
	other, _ := newKey(t)
	plain := []byte(`{"canary":"secret-canary"}`)
	env, err := k.Seal("state", Place{}, plain)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(env, []byte("canary")) || !Sealed(env) {
		t.Fatalf("envelope %q", env)
	}
	got, err := NewKeys(k, false).Open("f", "state", Place{}, env)
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := k.Open("f", "journal", Place{}, env); !errors.Is(err, ErrDamaged) {
		t.Errorf("another kind: %v", err)
	}
	if _, err := other.Open("f", "state", Place{}, env); !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), k.Check()) {
		t.Errorf("wrong key: %v", err)
	}
	var none *Keys
	if _, err := none.Open("f", "state", Place{}, env); !errors.Is(err, ErrNoKey) {
		t.Errorf("no key: %v", err)
	}
	if got, err := none.Open("f", "state", Place{}, plain); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("plaintext read: %q, %v", got, err)
	}
	bad := bytes.Clone(env)
	bad[len(bad)-1] ^= 1
	if _, err := k.Open("f", "state", Place{}, bad); !errors.Is(err, ErrDamaged) {
		t.Errorf("tampered: %v", err)
	}
	if w, _ := NewKeys(k, true).Seal("state", Place{}, plain); !bytes.Equal(w, plain) {
		t.Errorf("decrypt mode sealed")
	}
}

func TestStream(t *testing.T) {
	k, _ := newKey(t)
	for _, n := range []int{0, 1, ChunkSize - 1, ChunkSize, ChunkSize + 1, 3*ChunkSize + 17} {
		plain := make([]byte, n)
		rand.Read(plain)
		var buf bytes.Buffer
		w, err := k.NewStreamWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		// Odd write sizes cross chunk boundaries.
		for p := plain; len(p) > 0; {
			c := min(len(p), 1000)
			if _, err := w.Write(p[:c]); err != nil {
				t.Fatal(err)
			}
			p = p[c:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		enc := buf.Bytes()
		if !IsStream(enc) {
			t.Fatal("no stream header")
		}
		r, err := k.OpenStream(bytes.NewReader(enc), int64(len(enc)), "snap")
		if err != nil {
			t.Fatalf("%d: %v", n, err)
		}
		got, err := io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("%d: read %d bytes, %v", n, len(got), err)
		}
		if n > ChunkSize+10 {
			p := make([]byte, 20)
			if _, err := r.ReadAt(p, ChunkSize-10); err != nil || !bytes.Equal(p, plain[ChunkSize-10:ChunkSize+10]) {
				t.Errorf("ReadAt across chunks: %v", err)
			}
		}
		// Cut at every chunk boundary, and in the middle of a chunk.
		for _, cut := range []int{len(enc) - 1, len(enc) - ChunkSize - tagSize, streamHead + 5} {
			if cut <= 0 || cut >= len(enc) {
				continue
			}
			if _, err := k.OpenStream(bytes.NewReader(enc[:cut]), int64(cut), "snap"); !errors.Is(err, ErrDamaged) {
				t.Errorf("%d cut at %d: %v", n, cut, err)
			}
		}
		other, _ := newKey(t)
		if _, err := other.OpenStream(bytes.NewReader(enc), int64(len(enc)), "snap"); !errors.Is(err, ErrWrongKey) {
			t.Errorf("wrong key: %v", err)
		}
		var none *Key
		if _, err := none.OpenStream(bytes.NewReader(enc), int64(len(enc)), "snap"); !errors.Is(err, ErrNoKey) {
			t.Errorf("no key: %v", err)
		}
	}
}

// BenchmarkStreamWrite is the cost of encrypting a snapshot as it is
// written (throughput of the sealing writer).
func BenchmarkStreamWrite(b *testing.B) {
	k, _ := newKey(b)
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	w, err := k.NewStreamWriter(io.Discard)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := w.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
}

// BenchmarkStreamRead is the cost of decrypting a snapshot as it is
// restored.
func BenchmarkStreamRead(b *testing.B) {
	k, _ := newKey(b)
	var enc bytes.Buffer
	w, _ := k.NewStreamWriter(&enc)
	w.Write(make([]byte, 16<<20))
	w.Close()
	b.SetBytes(16 << 20)
	for b.Loop() {
		r, err := k.OpenStream(bytes.NewReader(enc.Bytes()), int64(enc.Len()), "b")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, io.NewSectionReader(r, 0, r.Size())); err != nil {
			b.Fatal(err)
		}
	}
}

func TestEnvelopePlace(t *testing.T) {
	k, _ := newKey(t)
	at := Place{Lineage: "5d7c2a0e", Name: "journals/run.a.jsonl", Position: 2}
	plain := []byte(`{"step":2}`)
	env, err := k.Seal("journal", at, plain)
	if err != nil {
		t.Fatal(err)
	}
	if !Bound(env) || Bound(plain) {
		t.Fatalf("Bound: %v, %v", Bound(env), Bound(plain))
	}
	if got, err := k.Open("f", "journal", at, env); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	for _, other := range []Place{
		{Lineage: at.Lineage, Name: at.Name, Position: 1},
		{Lineage: at.Lineage, Name: "journals/run.b.jsonl", Position: 2},
		{Lineage: "9f00aa11", Name: at.Name, Position: 2},
		// The fields are delimited: moving bytes from one to the other
		// is another place.
		{Lineage: at.Lineage + "j", Name: "ournals/run.a.jsonl", Position: 2},
		{},
	} {
		if _, err := k.Open("f", "journal", other, env); !errors.Is(err, ErrDamaged) {
			t.Errorf("opened at %+v: %v", other, err)
		}
	}
}

// TestLegacyEnvelope opens a version 1 envelope (no place), as agentctl
// wrote them before places were bound.
func TestLegacyEnvelope(t *testing.T) {
	k, _ := newKey(t)
	plain := []byte(`{"serial":3}`)
	env := make([]byte, envHead+nonceSize)
	copy(env, envMagic)
	env[len(envMagic)] = legacyVersion
	copy(env[len(envMagic)+1:], k.check[:])
	rand.Read(env[envHead:])
	env = k.aead.Seal(env, env[envHead:], plain, append(bytes.Clone(env[:envHead]), "state"...))
	if Bound(env) || !Sealed(env) {
		t.Fatal("a version 1 envelope is not bound")
	}
	if got, err := k.Open("f", "state", Place{Lineage: "x", Position: 9}, env); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := k.Open("f", "journal", Place{}, env); !errors.Is(err, ErrDamaged) {
		t.Errorf("another kind: %v", err)
	}
}
