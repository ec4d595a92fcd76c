package sandbox

import (
	"archive/tar"
	"io"
	"strings"
)

// TrimTarNames copies the tar stream r to w with the "./" prefix of its
// member names stripped and the "." entry dropped: what `tar -C DIR .`
// writes, as CopyOut's member names (relative to the directory).
func TrimTarNames(r io.Reader, w io.Writer) error {
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
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return err
		}
	}
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
