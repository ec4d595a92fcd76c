package sandbox

import "io/fs"

// FileModeOf converts a stat(2) st_mode to an fs.FileMode: the permission
// bits, setuid, setgid and sticky, and the file's type. The numeric values
// are the same on every Unix system, so a mode read from a remote sandbox's
// stat is converted as one from this host's. A type it does not know
// (a stat that failed and printed 0, say) is fs.ModeIrregular.
func FileModeOf(m uint32) fs.FileMode {
	mode := fs.FileMode(m & 0o777)
	switch m & 0o170000 {
	case 0o100000: // regular file
	case 0o040000:
		mode |= fs.ModeDir
	case 0o120000:
		mode |= fs.ModeSymlink
	case 0o010000:
		mode |= fs.ModeNamedPipe
	case 0o140000:
		mode |= fs.ModeSocket
	case 0o020000:
		mode |= fs.ModeDevice | fs.ModeCharDevice
	case 0o060000:
		mode |= fs.ModeDevice
	default:
		mode |= fs.ModeIrregular
	}
	if m&0o4000 != 0 {
		mode |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		mode |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		mode |= fs.ModeSticky
	}
	return mode
}
