//go:build unix && !linux

package hostfs

import "golang.org/x/sys/unix"

// haveOpenat2 is false outside Linux: os.Root confines instead.
func haveOpenat2(int) bool { return false }

func openBeneath(int, string, int, uint32) (int, error) { return -1, unix.ENOSYS }
