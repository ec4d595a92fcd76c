package hostfs

import "golang.org/x/sys/unix"

// dataSegments returns the data segments of the open regular file fd of
// the given size, found with SEEK_DATA and SEEK_HOLE, or nil when the
// file has no holes or the filesystem cannot tell.
func dataSegments(fd int, size int64) ([]segment, error) {
	var segs []segment
	for off := int64(0); off < size; {
		if len(segs) == maxSparseScan {
			// Too fragmented to follow: the rest is archived as data.
			segs = append(segs, segment{off, size - off})
			break
		}
		d, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			break // only a hole is left
		}
		if err == unix.EINVAL || err == unix.EOPNOTSUPP {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if d >= size {
			break
		}
		h, err := unix.Seek(fd, d, unix.SEEK_HOLE)
		if err != nil {
			return nil, err
		}
		h = min(h, size)
		segs = append(segs, segment{d, h - d})
		off = h
	}
	if len(segs) == 1 && segs[0].off == 0 && segs[0].len == size {
		return nil, nil
	}
	if segs == nil {
		// All hole: GNU tar records one empty segment at the end.
		segs = []segment{{size, 0}}
	}
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		return nil, err
	}
	return coalesce(segs), nil
}
