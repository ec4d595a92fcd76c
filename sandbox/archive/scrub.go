package archive

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/sandbox"
)

// SensitiveMembers lists the members of the snapshot (tar) file at path
// whose name, link target or stored content holds a sensitive value or one
// of its encodings. The names are returned scrubbed: a name may itself be
// the secret.
func SensitiveMembers(ctx context.Context, path string, s *sandbox.Scrubber) ([]string, error) {
	return SensitiveMembersWith(ctx, path, nil, s)
}

// SensitiveMembersWith is SensitiveMembers for a snapshot that may be
// encrypted with key (SnapshotOptions.Key): it is read decrypted, and
// still only the stored bytes are scanned.
func SensitiveMembersWith(ctx context.Context, path string, key *seal.Key, s *sandbox.Scrubber) ([]string, error) {
	if !s.Active() {
		return nil, nil
	}
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	f, err := openSnapshot(file, key)
	if err != nil {
		return nil, err
	}
	type member struct {
		name       string
		hit        bool
		start, end int64
	}
	var ms []member
	tr := tar.NewReader(f)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading snapshot %s: %w", path, err)
		}
		pos, err := f.Seek(0, io.SeekCurrent)
		if err != nil {
			return nil, err
		}
		m := member{name: hdr.Name, start: pos, end: pos}
		m.hit = s.Contains([]byte(hdr.Name)) || s.Contains([]byte(hdr.Linkname))
		if hdr.Typeflag == tar.TypeReg {
			m.end = pos + hdr.Size
		}
		ms = append(ms, m)
	}
	// The stored bytes of a member lie between its data start and the
	// next member's (a sparse member stores less than its Size, holes
	// being zeros): scan the file itself, so holes are never read.
	var hits []string
	for i, m := range ms {
		if !m.hit && m.end > m.start {
			end := m.end
			if i+1 < len(ms) {
				end = min(end, ms[i+1].start)
			}
			ok, err := s.ContainsReader(io.NewSectionReader(f, m.start, end-m.start))
			if err != nil {
				return nil, fmt.Errorf("reading snapshot %s: %w", path, err)
			}
			m.hit = ok
		}
		if m.hit {
			hits = append(hits, s.String(strings.TrimPrefix(m.name, "./")))
		}
	}
	return hits, nil
}
