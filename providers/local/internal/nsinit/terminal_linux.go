//go:build linux

package nsinit

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// readRequest reads one command's request from conn: the header with the
// command's stdin, stdout and stderr (none when it asks for a terminal,
// which the init opens), then the request itself.
func readRequest(conn *os.File) (ExecRequest, []int, error) {
	var req ExecRequest
	hdr := make([]byte, 8)
	n, stdio, err := recvmsg(conn, hdr, 3)
	if err == nil && n < 8 {
		_, err = io.ReadFull(conn, hdr[n:])
	}
	if err != nil {
		return req, stdio, fmt.Errorf("malformed request: %w", err)
	}
	size := binary.LittleEndian.Uint64(hdr)
	if size > MaxMessage {
		return req, stdio, fmt.Errorf("request too large (%d bytes)", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(conn, body); err != nil {
		return req, stdio, fmt.Errorf("malformed request: %w", err)
	}
	if err := json.Unmarshal(body, &req); err != nil || len(req.Argv) == 0 {
		return req, stdio, fmt.Errorf("malformed request: %v", err)
	}
	want := 3
	if req.TTY {
		want = 0
	}
	if len(stdio) != want {
		return req, stdio, fmt.Errorf("malformed request: %d descriptors, want %d (terminal %v)", len(stdio), want, req.TTY)
	}
	return req, stdio, nil
}

// terminal opens the command's terminal from the sandbox's own devpts
// (so that the command finds it by name at /dev/pts/N, as ttyname(3)
// does), of the requested size and, for a manifest user, owned by the
// user, as login(1) would make it. It sends the terminal's controlling
// side to agentctl (PtyByte) and returns the command's side three
// times, as its stdin, stdout and stderr.
func (srv *server) terminal(conn *os.File, req ExecRequest) ([]int, error) {
	if srv.ptsErr != nil {
		return nil, fmt.Errorf("opening a terminal: the sandbox has no /dev/pts (%w)", srv.ptsErr)
	}
	master, err := unix.Open("/dev/pts/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening a terminal (/dev/pts/ptmx): %w", err)
	}
	defer unix.Close(master)
	if err := unix.IoctlSetPointerInt(master, unix.TIOCSPTLCK, 0); err != nil {
		return nil, fmt.Errorf("unlocking the terminal: %w", err)
	}
	if err := unix.IoctlSetWinsize(master, unix.TIOCSWINSZ, &unix.Winsize{Row: req.Rows, Col: req.Cols}); err != nil {
		return nil, fmt.Errorf("sizing the terminal: %w", err)
	}
	// The command's side, opened through the controlling side rather
	// than by its name (Linux 4.13 or later).
	peer, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(master), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if errno != 0 {
		return nil, fmt.Errorf("opening the terminal's device: %w", errno)
	}
	stdio := []int{int(peer)}
	for len(stdio) < 3 {
		fd, err := unix.FcntlInt(peer, unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			closeFDs(stdio...)
			return nil, fmt.Errorf("duplicating the terminal's descriptor: %w", err)
		}
		stdio = append(stdio, fd)
	}
	if req.Cred != nil {
		if err := unix.Fchown(stdio[0], req.Cred.UID, req.Cred.GID); err != nil {
			closeFDs(stdio...)
			return nil, fmt.Errorf("giving the terminal to user %d: %w", req.Cred.UID, err)
		}
	}
	if err := sendFD(conn, PtyByte, master); err != nil {
		closeFDs(stdio...)
		return nil, fmt.Errorf("sending the terminal: %w", err)
	}
	return stdio, nil
}

// sendFD writes byte b on the socket f, with descriptor fd along.
func sendFD(f *os.File, b byte, fd int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = rc.Write(func(s uintptr) bool {
		for {
			serr = unix.Sendmsg(int(s), []byte{b}, unix.UnixRights(fd), nil, 0)
			if serr != unix.EINTR {
				return serr != unix.EAGAIN
			}
		}
	})
	if err != nil {
		return err
	}
	return serr
}
