//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"

	"golang.org/x/term"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/sandbox"
)

// execAttached runs exec -i / -t: the command's streams stay attached to
// agentctl's while it runs; with -t on a terminal of this terminal's size,
// this terminal in raw mode meanwhile (keys go to the command as typed,
// Ctrl-C included), restored afterwards. It returns the exit code. The
// caller checked that standard input is a terminal for -t
// (checkExecTerminal).
func (m *meta) execAttached(ctx context.Context, ws *sandbox.Workspace, args *arguments.Exec) (int, error) {
	req := sandbox.ProcessRequest{Argv: args.Argv, TTY: args.TTY}
	if args.TTY {
		fd := int(os.Stdin.Fd())
		if w, h, err := term.GetSize(fd); err == nil && w > 0 && h > 0 {
			req.Rows, req.Cols = h, w
		}
		old, err := term.MakeRaw(fd)
		if err != nil {
			return 0, fmt.Errorf("putting the terminal in raw mode: %w", err)
		}
		defer term.Restore(fd, old)
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
