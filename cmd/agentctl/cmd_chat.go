package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/engine/chat"
	"github.com/agentctl/agentctl/state"
)

func chatCommand() *command {
	return &command{
		Name:       "chat",
		ShortUsage: "agentctl chat [options] agent.NAME",
		ShortHelp:  "Talk with an agent, one turn per line; the conversation is kept.",
		LongHelp: "  Each line is a turn: the agent (with its handoffs and tools) answers it\n" +
			"  in its sandbox, created if needed and kept between turns. The\n" +
			"  conversation is checkpointed per step and kept in the state as\n" +
			"  chat.NAME (-session, default \"default\"), so running the command again\n" +
			"  continues it, also after a crash. /history prints it, /reset starts it\n" +
			"  over, /exit or end of input ends the session. Calls that need approval\n" +
			"  are asked on the terminal; when standard input is not a terminal they\n" +
			"  are refused for the turn. The state lock is taken for each turn only,\n" +
			"  so other commands can apply between turns; a turn that finds it held\n" +
			"  says so and waits (at most -lock-timeout, when given).",
		Run: leaf(arguments.ParseChat, (*meta).chat),
	}
}

func (m *meta) chat(ctx context.Context, args *arguments.Chat) error {
	m.noColor = args.NoColor
	interactive := views.IsTerminal(os.Stdin)
	view := views.NewChat(args.ViewType, m.view(), interactive)
	b, err := m.openBackend(args.Config, args.Vars, args.State)
	if err != nil {
		return err
	}
	ctx, interrupt, stop := interrupts(ctx, func() {
		fmt.Fprintln(m.Stderr, "\nInterrupt received: stopping the turn and checkpointing it (the next chat resumes it). Press Ctrl-C again to stop at once.")
	})
	defer stop()
	c := &chatCmd{m: m, b: b, args: args, view: view, interrupt: interrupt, human: args.ViewType != arguments.ViewJSON, interactive: interactive}
	e := b.engine(0, nil, interrupt)
	if interactive && c.human {
		e.Approver = &terminalApprover{m: m, chat: true}
	}
	if err := c.open(ctx, e); err != nil {
		view.TurnFailed(err)
		return exitCode(exitError)
	}
	return c.loop(ctx)
}

// chatCmd is one agentctl chat session. It holds the state lock only
// while it opens the session and while a turn, /history or /reset runs
// (a turn's approval prompts included), and reads the state again each
// time it takes it: between turns, other commands (a teammate's apply,
// another chat) use the state, and the next turn goes on from what they
// left.
type chatCmd struct {
	m         *meta
	b         *backend
	args      *arguments.Chat
	view      views.Chat
	interrupt <-chan struct{}
	s         *chat.Session
	// human is whether the view is for people; interactive whether a
	// person types the lines.
	human, interactive bool
	// failed is whether a turn failed: the session then exits 1.
	failed bool
}

// open opens the session under the lock and finishes a turn an earlier
// session left unfinished.
func (c *chatCmd) open(ctx context.Context, e *engine.Engine) error {
	return c.locked(ctx, "the session", func(st *state.State) error {
		s, err := chat.Open(ctx, e, st, c.args.Session, c.args.Agent)
		if err != nil {
			return err
		}
		s.Events = c.view.Event
		c.s = s
		turns := 0
		if r := s.Record(); r != nil {
			turns = r.Turns
		}
		c.view.Opened(s.Address(), c.args.Agent, turns)
		return c.resume(ctx)
	})
}

// loop reads the lines and carries them out until the input ends,
// /exit or Ctrl-C.
func (c *chatCmd) loop(ctx context.Context) error {
	lines := c.m.lineReader()
	for {
		c.view.Prompt()
		var r readResult
		select {
		case <-c.interrupt:
			if c.human {
				fmt.Fprintln(c.m.Stdout)
			}
			return nil
		case r = <-lines():
		}
		if !r.ok {
			if c.interactive && c.human {
				fmt.Fprintln(c.m.Stdout)
			}
			return chatExit(c.failed)
		}
		line := strings.TrimRight(r.line, "\r\n")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if stop, err := c.do(ctx, line); stop {
			return err
		}
	}
}

// do carries out one line: a command, or a turn. stop ends the session
// with err.
func (c *chatCmd) do(ctx context.Context, line string) (stop bool, err error) {
	if strings.HasPrefix(line, "/") && !strings.HasPrefix(line, "//") {
		switch cmd := strings.Fields(line)[0]; cmd {
		case "/exit", "/quit":
			return true, chatExit(c.failed)
		case "/history":
			return c.outcome(c.inTurn(ctx, "/history", func() error {
				items, err := c.s.History(ctx)
				if err == nil {
					c.view.History(items)
				}
				return err
			}))
		case "/reset":
			return c.outcome(c.inTurn(ctx, "/reset", func() error {
				err := c.s.Reset(ctx)
				if err == nil {
					c.view.Reset(c.s.Address())
				}
				return err
			}))
		default:
			c.view.Unknown(cmd)
			return false, nil
		}
	}
	line = strings.TrimPrefix(line, "/")
	var reply func()
	err = c.inTurn(ctx, "this turn", func() error {
		res, err := c.s.Turn(ctx, line)
		if err == nil {
			reply = func() { c.view.Reply(res) }
		}
		return err
	})
	if reply != nil {
		// The reply is shown once the turn is recorded and the lock
		// released: whoever reads it may start the next command at once.
		reply()
	}
	return c.outcome(err)
}

// inTurn runs fn holding the lock, once the session has the state read
// under it: what other commands changed since the last turn is said,
// and a turn one of them left unfinished is finished first.
func (c *chatCmd) inTurn(ctx context.Context, what string, fn func() error) error {
	return c.locked(ctx, what, func(st *state.State) error {
		notices, err := c.s.Refresh(ctx, st)
		for _, n := range notices {
			c.view.Notice(n)
		}
		if err != nil {
			return err
		}
		if err := c.resume(ctx); err != nil {
			return err
		}
		return fn()
	})
}

// resume finishes the turn an earlier session left unfinished, if there
// is one. A resumed turn that fails is reported and the session goes on.
func (c *chatCmd) resume(ctx context.Context) error {
	input, ok := c.s.Interrupted()
	if !ok {
		return nil
	}
	c.view.Resuming(input)
	res, err := c.s.Resume(ctx)
	if err == nil {
		c.view.Reply(res)
		return nil
	}
	var te *chat.TurnError
	if errors.As(err, &te) {
		c.view.TurnFailed(err)
		c.failed = true
		return nil
	}
	return err
}

// outcome reports err. A turn that failed and was dropped, or that could
// not start because the lock stayed held up to -lock-timeout, fails the
// turn and the session goes on (and exits 1); anything else ends the
// session.
func (c *chatCmd) outcome(err error) (stop bool, _ error) {
	var te *chat.TurnError
	var le *state.LockedError
	switch {
	case err == nil:
		return false, nil
	case errors.As(err, &te), errors.As(err, &le):
		c.view.TurnFailed(err)
		c.failed = true
		return false, nil
	default:
		c.view.TurnFailed(err)
		return true, exitCode(exitError)
	}
}

// locked runs fn holding the state lock (unless -lock=false), with the
// state read under it.
func (c *chatCmd) locked(ctx context.Context, what string, fn func(*state.State) error) error {
	if err := c.lock(ctx, what); err != nil {
		return err
	}
	defer c.b.unlock(ctx)
	st, err := c.b.store.Read(ctx)
	if err != nil {
		return err
	}
	return fn(st)
}

// lock takes the state lock for what. When another command holds it,
// lock says so and waits: for as long as it takes, or up to
// -lock-timeout when that was given; the first Ctrl-C gives up.
func (c *chatCmd) lock(ctx context.Context, what string) error {
	if !c.args.State.Lock {
		return nil
	}
	info := state.LockInfo{Operation: fmt.Sprintf("chat (%s)", chat.Address(c.args.Session))}
	l, err := c.b.store.Lock(ctx, info, 0)
	var le *state.LockedError
	if errors.As(err, &le) {
		limit := c.args.State.LockTimeout
		if c.args.WaitForLock {
			limit = 0
		}
		c.view.WaitingForLock(what, le.Info, limit)
		start := time.Now()
		l, err = c.waitLock(ctx, info)
		switch {
		case err == nil:
			c.view.LockTaken(time.Since(start))
		case errors.As(err, &le):
			err = &chatLockError{what: what, le: le}
		case c.interrupted():
			err = fmt.Errorf("gave up waiting for the state lock: %s did not start", what)
		}
	}
	if err != nil {
		return err
	}
	c.b.lock = l
	return nil
}

// chatLockError is a wait for the lock that -lock-timeout ended.
type chatLockError struct {
	what string
	le   *state.LockedError
}

func (e *chatLockError) Error() string {
	return fmt.Sprintf("%s did not start: the state lock is still held after waiting %s (-lock-timeout) by %s; leave -lock-timeout out to wait for as long as it takes",
		e.what, e.le.Waited, views.LockHolder(e.le.Info))
}

func (e *chatLockError) Unwrap() error { return e.le }

// waitLock waits for the state lock: up to -lock-timeout when given,
// otherwise until it is free. The first Ctrl-C gives up.
func (c *chatCmd) waitLock(ctx context.Context, info state.LockInfo) (state.Lease, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-c.interrupt:
			cancel()
		case <-ctx.Done():
		}
	}()
	if !c.args.WaitForLock {
		return c.b.store.Lock(ctx, info, c.args.State.LockTimeout)
	}
	for {
		l, err := c.b.store.Lock(ctx, info, time.Minute)
		var le *state.LockedError
		if !errors.As(err, &le) {
			return l, err
		}
	}
}

// interrupted reports whether Ctrl-C was pressed.
func (c *chatCmd) interrupted() bool {
	select {
	case <-c.interrupt:
		return true
	default:
		return false
	}
}

// chatExit is the session's exit status: 1 when a turn failed, so that a
// scripted conversation notices.
func chatExit(failed bool) error {
	if failed {
		return exitCode(exitError)
	}
	return nil
}

// readResult is one line of standard input, or its end.
type readResult struct {
	line string
	ok   bool
}

// lineReader returns a function that starts reading the next line of
// standard input and returns where it arrives. Only one line is read at a
// time, and only when asked, so that the approval prompt of a turn reads
// its own answers from the same input.
func (m *meta) lineReader() func() <-chan readResult {
	return func() <-chan readResult {
		ch := make(chan readResult, 1)
		go func() {
			line, err := m.stdinReader().ReadString('\n')
			ch <- readResult{line: line, ok: err == nil || line != ""}
		}()
		return ch
	}
}
