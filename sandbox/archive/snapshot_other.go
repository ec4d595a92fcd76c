//go:build unix && !linux

package archive

import (
	"errors"
	"io"
	"os"

	"github.com/agentctl/agentctl/internal/hashpipe"
)

// createSnapshotTemp opens a named temporary file for a snapshot of base
// in dir (there is no O_TMPFILE here).
func createSnapshotTemp(dir, base string) (*snapshotTemp, error) {
	f, err := os.OpenFile(tempName(dir, base), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	return &snapshotTemp{f: f, name: f.Name(), dir: dir, base: base}, nil
}

func linkTemp(f *os.File, dir, base string) (string, error) {
	return "", errors.New("unnamed temporary files are not supported here")
}

// writer is where the snapshot's bytes go: the file, synced by commit.
func (t *snapshotTemp) writer() io.Writer { return t.f }

// teeWriter is the snapshot's destination for a plain snapshot: the
// digest's Tee in front of the file.
func (t *snapshotTemp) teeWriter(h *hashpipe.Writer) (io.Writer, func() error) {
	tee := h.Tee(t.f)
	return tee, tee.Flush
}
