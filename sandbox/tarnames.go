package sandbox

import (
	"archive/tar"
	"fmt"
	"io"
	"strings"
)

// FetchFunc reads the file name (a member name of the archived
// directory) again: its content and size.
type FetchFunc func(name string) (io.ReadCloser, int64, error)

// TrimTarNames copies the tar stream r to w with the "./" prefix of its
// member names stripped and the "." entry dropped: what `tar -C DIR .`
// writes, as CopyOut's member names (relative to the directory). With
// fetch set, a hard-link member becomes a regular file read with fetch:
// CopyIn, like every safe extractor, refuses links, and a restore must
// not.
func TrimTarNames(r io.Reader, w io.Writer, fetch FetchFunc) error {
	tr := tar.NewReader(r)
	tw := tar.NewWriter(w)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return tw.Close()
		}
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(h.Name, "./")
		if name == "" || name == "." || name == "./" {
			continue
		}
		h.Name = name
		if h.Typeflag == tar.TypeLink && fetch != nil {
			if err := writeFetched(tw, h, fetch); err != nil {
				return err
			}
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
}

// writeFetched writes the hard-link member h to tw as the regular file
// fetch reads.
func writeFetched(tw *tar.Writer, h *tar.Header, fetch FetchFunc) error {
	rc, size, err := fetch(h.Name)
	if err != nil {
		return err
	}
	defer rc.Close()
	h.Typeflag, h.Linkname, h.Size = tar.TypeReg, "", size
	if err := tw.WriteHeader(h); err != nil {
		return err
	}
	if _, err := io.CopyN(tw, rc, size); err != nil {
		return fmt.Errorf("reading the hard link %s again: %w", h.Name, err)
	}
	return nil
}

// ReadCloser is r closed by close, which runs once however often Close
// is called.
func ReadCloser(r io.Reader, close func() error) io.ReadCloser {
	return &readCloser{Reader: r, close: close}
}

type readCloser struct {
	io.Reader
	close func() error
	done  bool
}

func (c *readCloser) Close() error {
	if c.done {
		return nil
	}
	c.done = true
	return c.close()
}
