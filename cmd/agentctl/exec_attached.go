//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/sandbox"
)

// execAttached runs exec -i / -t: the command's streams stay attached to
// agentctl's while it runs; with -t on a terminal of this terminal's size,
// this terminal in raw mode meanwhile (keys go to the command as typed,
// Ctrl-C included), restored afterwards. It returns the exit code.
func (m *meta) execAttached(ctx context.Context, ws *sandbox.Workspace, args *arguments.Exec) (int, error) {
	req := sandbox.ProcessRequest{Argv: args.Argv, TTY: args.TTY}
	if args.TTY {
		fd := int(os.Stdin.Fd())
		if !stdinIsTerminal() {
			return 0, errors.New("-t needs standard input to be a terminal (it is not): drop -t to pipe input (-i), as docker exec does")
		}
		if ws, err := unix.IoctlGetWinsize(fd, unix.TIOCGWINSZ); err == nil && ws.Row > 0 && ws.Col > 0 {
			req.Rows, req.Cols = int(ws.Row), int(ws.Col)
		}
		restore, err := rawTerminal(fd)
		if err != nil {
			return 0, fmt.Errorf("putting the terminal in raw mode: %w", err)
		}
		defer restore()
	}
	p, err := ws.StartProcess(ctx, req)
	if err != nil {
		return 0, err
	}
	var out sync.WaitGroup
	out.Go(func() { io.Copy(os.Stdout, p.Stdout()) })
	out.Go(func() { io.Copy(os.Stderr, p.Stderr()) })
	if args.Interactive {
		go func() {
			io.Copy(p.Stdin(), os.Stdin)
			if !args.TTY {
				p.Stdin().Close()
			}
		}()
	} else {
		p.Stdin().Close()
	}
	out.Wait()
	return p.Wait()
}

// rawTerminal puts the terminal fd in raw mode (as cfmakeraw does) and
// returns the function that puts it back.
func rawTerminal(fd int) (func(), error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return nil, err
	}
	raw := *old
	raw.Iflag &^= unix.IGNBRK | unix.BRKINT | unix.PARMRK | unix.ISTRIP | unix.INLCR | unix.IGNCR | unix.ICRNL | unix.IXON
	raw.Oflag &^= unix.OPOST
	raw.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	raw.Cflag &^= unix.CSIZE | unix.PARENB
	raw.Cflag |= unix.CS8
	raw.Cc[unix.VMIN], raw.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &raw); err != nil {
		return nil, err
	}
	return func() { unix.IoctlSetTermios(fd, unix.TCSETS, old) }, nil
}
