package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/engine"
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
			"  are refused for the turn. Holds the state lock while it runs.",
		Run: leaf(arguments.ParseChat, (*meta).chat),
	}
}

func (m *meta) chat(ctx context.Context, args *arguments.Chat) error {
	m.noColor = args.NoColor
	interactive := views.IsTerminal(os.Stdin)
	view := views.NewChat(m.view(), interactive)
	b, st, err := m.lockedState(ctx, args.Backend, "chat")
	if err != nil {
		return err
	}
	defer b.unlock()
	ctx, interrupt, stop := interrupts(ctx, func() {
		fmt.Fprintln(m.Stderr, "\nInterrupt received: stopping the turn and checkpointing it (the next chat resumes it). Press Ctrl-C again to stop at once.")
	})
	defer stop()
	e := b.engine(0, nil, interrupt)
	if interactive {
		e.Approver = &terminalApprover{m: m, chat: true}
	}
	s, err := e.OpenChat(ctx, st, args.Session, args.Agent)
	if err != nil {
		return err
	}
	s.Events = view.Event
	turns := 0
	if r := s.Record(); r != nil {
		turns = r.Turns
	}
	view.Opened(s.Address(), args.Agent, turns)
	failed := false
	// turn reports one turn's outcome; an interrupted turn ends the
	// session (the next one resumes it).
	turn := func(run func() error) (stopSession bool, err error) {
		err = run()
		var te *engine.ChatTurnError
		switch {
		case err == nil:
			return false, nil
		case errors.As(err, &te):
			view.TurnFailed(err)
			failed = true
			return false, nil
		default:
			view.TurnFailed(err)
			return true, exitCode(exitError)
		}
	}
	if input, ok := s.Interrupted(); ok {
		view.Resuming(input)
		if stopSession, err := turn(func() error {
			res, err := s.Resume(ctx)
			if err == nil {
				view.Reply(res)
			}
			return err
		}); stopSession {
			return err
		}
	}
	lines := m.lineReader()
	for {
		view.Prompt()
		var line string
		var ok bool
		select {
		case <-interrupt:
			fmt.Fprintln(m.Stdout)
			return nil
		case r := <-lines():
			line, ok = r.line, r.ok
		}
		if !ok {
			if interactive {
				fmt.Fprintln(m.Stdout)
			}
			break
		}
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" {
			continue
		}
		if strings.HasPrefix(line, "/") && !strings.HasPrefix(line, "//") {
			switch cmd := strings.Fields(line)[0]; cmd {
			case "/exit", "/quit":
				return chatExit(failed)
			case "/history":
				items, err := s.History()
				if err != nil {
					return err
				}
				view.History(items)
			case "/reset":
				if err := s.Reset(); err != nil {
					return err
				}
				view.Reset(s.Address())
			default:
				view.Unknown(cmd)
			}
			continue
		}
		if strings.HasPrefix(line, "//") {
			line = line[1:]
		}
		if stopSession, err := turn(func() error {
			res, err := s.Turn(ctx, line)
			if err == nil {
				view.Reply(res)
			}
			return err
		}); stopSession {
			return err
		}
	}
	return chatExit(failed)
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
