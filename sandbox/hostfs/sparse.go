//go:build unix

package hostfs

// Sparse files in archives.
//
// Go's archive/tar reads every GNU sparse format but writes none, so
// Archive writes the PAX sparse format 1.0 itself: the member's extended
// header carries GNU.sparse.major=1, GNU.sparse.minor=0, GNU.sparse.name
// (the real name) and GNU.sparse.realsize; its content is the sparse map
// ("count\n" then "offset\nlength\n" per data segment, padded to a 512-byte
// block) followed by the data segments. The header goes through
// tar.Writer with the keys spelled XNU.sparse.* (tar.Writer drops
// GNU.sparse.* records) and is corrected in the bytes it wrote.

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

// segment is one data segment of a sparse file.
type segment struct{ off, len int64 }

const (
	// maxSparseSegments bounds the sparse map (Go's reader refuses maps
	// over 1 MiB): files with more segments have their nearest segments
	// merged, archiving the holes between them as zeros.
	maxSparseSegments = 16 << 10
	// maxSparseScan bounds the SEEK_DATA/SEEK_HOLE scan of one file: past
	// it the rest of the file is archived as data.
	maxSparseScan = 1 << 20
)

// coalesce merges the segments separated by the smallest holes until at
// most maxSparseSegments are left.
func coalesce(segs []segment) []segment {
	for gap := int64(4096); len(segs) > maxSparseSegments; gap *= 2 {
		out := segs[:1]
		for _, s := range segs[1:] {
			last := &out[len(out)-1]
			if s.off-(last.off+last.len) <= gap {
				last.len = s.off + s.len - last.off
				continue
			}
			out = append(out, s)
		}
		segs = out
	}
	return segs
}

const sparseKeyPrefix = "GNU.sparse."

// xSparse is how the GNU.sparse.* keys are spelled for tar.Writer.
const xSparse = "XNU.sparse."

// isSparse reports whether a header read by tar.Reader was a sparse file
// (the reader then expands its holes into zeros).
func isSparse(hdr *tar.Header) bool {
	for k := range hdr.PAXRecords {
		if strings.HasPrefix(k, sparseKeyPrefix) {
			return true
		}
	}
	return hdr.Typeflag == tar.TypeGNUSparse
}

// captureWriter passes writes through to w, or keeps them while
// capturing.
type captureWriter struct {
	w   io.Writer
	buf *bytes.Buffer
	// discard is how many bytes written next are dropped: a file's
	// content that a FileAppender put in w itself, which the tar writer
	// is then given to count.
	discard int64
}

func (c *captureWriter) Write(p []byte) (int, error) {
	if c.discard > 0 {
		k := int(min(int64(len(p)), c.discard))
		c.discard -= int64(k)
		if k == len(p) {
			return k, nil
		}
		n, err := c.Write(p[k:])
		return k + n, err
	}
	if c.buf != nil {
		return c.buf.Write(p)
	}
	return c.w.Write(p)
}

// sparseFile archives an open regular file of logical size size whose
// data lies in segs, in the PAX sparse format 1.0.
func (a *archiver) sparseFile(f *os.File, name string, mode fs.FileMode, mtime time.Time, size int64, segs []segment) error {
	var m []byte
	m = strconv.AppendInt(m, int64(len(segs)), 10)
	m = append(m, '\n')
	stored := int64(0)
	for _, s := range segs {
		m = strconv.AppendInt(m, s.off, 10)
		m = append(m, '\n')
		m = strconv.AppendInt(m, s.len, 10)
		m = append(m, '\n')
		stored += s.len
	}
	if r := len(m) % 512; r != 0 {
		m = append(m, make([]byte, 512-r)...)
	}
	stored += int64(len(m))
	if err := a.reserve(name, stored, size); err != nil {
		return err
	}
	dir, base := path.Split(name)
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     dir + "GNUSparseFile.0/" + base,
		Mode:     int64(mode.Perm()),
		Size:     stored,
		ModTime:  mtime,
		PAXRecords: map[string]string{
			xSparse + "major":    "1",
			xSparse + "minor":    "0",
			xSparse + "name":     name,
			xSparse + "realsize": strconv.FormatInt(size, 10),
		},
	}
	// Padding of the previous member goes out first, uncaptured.
	if err := a.tw.Flush(); err != nil {
		return err
	}
	a.sw.buf = &bytes.Buffer{}
	err := a.tw.WriteHeader(hdr)
	b := a.sw.buf.Bytes()
	a.sw.buf = nil
	if err != nil {
		return err
	}
	if err := renameSparseKeys(b); err != nil {
		return fmt.Errorf("archive %s: %w", relJoin(a.top, name), err)
	}
	if _, err := a.sw.w.Write(b); err != nil {
		return err
	}
	if _, err := a.tw.Write(m); err != nil {
		return err
	}
	for _, s := range segs {
		k, err := io.CopyBuffer(onlyWriter{a.tw}, io.NewSectionReader(f, s.off, s.len), a.buf)
		if err != nil {
			return pathErr("archive", relJoin(a.top, name), err)
		}
		if k != s.len {
			return fmt.Errorf("archive %s: %w: it shrank while being read (%d of %d bytes at offset %d)", relJoin(a.top, name), ErrChangedWhileCopied, k, s.len, s.off)
		}
	}
	return nil
}

// renameSparseKeys turns the XNU.sparse.* keys of the PAX extended
// header at the start of b into GNU.sparse.*, in place (same length, so
// the record lengths stay right; the header block's checksum does not
// cover the records).
func renameSparseKeys(b []byte) error {
	if len(b) < 1024 || b[156] != tar.TypeXHeader {
		return errors.New("sparse member: tar.Writer wrote no PAX header")
	}
	size, err := strconv.ParseInt(strings.TrimRight(strings.TrimSpace(string(b[124:136])), "\x00"), 8, 64)
	if err != nil || 512+size > int64(len(b)) {
		return fmt.Errorf("sparse member: unexpected PAX header size %q", b[124:136])
	}
	recs := b[512 : 512+size]
	renamed := 0
	for len(recs) > 0 {
		sp := bytes.IndexByte(recs, ' ')
		if sp <= 0 {
			return errors.New("sparse member: malformed PAX record")
		}
		n, err := strconv.Atoi(string(recs[:sp]))
		if err != nil || n <= sp || n > len(recs) {
			return errors.New("sparse member: malformed PAX record")
		}
		if bytes.HasPrefix(recs[sp+1:n], []byte(xSparse)) {
			recs[sp+1] = 'G'
			renamed++
		}
		recs = recs[n:]
	}
	if renamed != 4 {
		return fmt.Errorf("sparse member: %d of 4 sparse records in the PAX header", renamed)
	}
	return nil
}

// zeroBlock is compared against to find holes when extracting.
var zeroBlock [4096]byte

// writeHoles writes size bytes from r to the new, empty file f, leaving
// 4 KiB blocks of zeros as holes, and sets the file's size. written is
// told the bytes actually written, and may stop the copy.
func writeHoles(ctx context.Context, f *os.File, r io.Reader, size int64, buf []byte, written func(int64) error) error {
	var off int64
	for off < size {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int(min(int64(len(buf)), size-off))
		k, err := io.ReadFull(r, buf[:n])
		if err != nil {
			return fmt.Errorf("archive truncated: %d of %d bytes: %w", off+int64(k), size, io.ErrUnexpectedEOF)
		}
		chunk := buf[:k]
		for i := 0; i < len(chunk); {
			end := min(i+len(zeroBlock), len(chunk))
			if bytes.Equal(chunk[i:end], zeroBlock[:end-i]) {
				i = end
				continue
			}
			// A run of blocks with data.
			j := end
			for j < len(chunk) {
				e := min(j+len(zeroBlock), len(chunk))
				if bytes.Equal(chunk[j:e], zeroBlock[:e-j]) {
					break
				}
				j = e
			}
			if err := written(int64(j - i)); err != nil {
				return err
			}
			if _, err := f.WriteAt(chunk[i:j], off+int64(i)); err != nil {
				return err
			}
			i = j
		}
		off += int64(k)
	}
	return f.Truncate(size)
}
