package engine

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/agentctl/agentctl/state"
)

// A chat session holds the state lock only while a turn (or /reset)
// writes, so other agentctl commands (a teammate's apply, another chat of
// the same session) may change the state between its turns. Each turn
// starts from the state read again under the lock (Refresh): the session
// goes on from what they left, says what changed, and never writes its
// older copy over theirs.

// ChatGoneError is a session whose record another command removed or
// gave to another agent since the session's last turn: the session ends
// without writing over it.
type ChatGoneError struct {
	Session string
	// What happened, and Hint what to do.
	What, Hint string
}

func (e *ChatGoneError) Error() string {
	return fmt.Sprintf("%s %s since this session's last turn, so this session ends without writing over it (the line was not sent): %s", e.Session, e.What, e.Hint)
}

// Refresh makes st, the state just read under the lock before a turn (or
// /reset), the session's state, so that what other agentctl commands did
// since the session's last turn is seen and kept. It returns notices of
// what they changed that the session goes on with: the conversation
// continued or reset elsewhere, a sandbox of the session stopped,
// replaced or removed (opened again as OpenChat opens it). A record
// removed, or now a conversation with another agent, is a
// *ChatGoneError.
func (s *ChatSession) Refresh(ctx context.Context, st *state.State) ([]string, error) {
	s.a.mu.Lock()
	old := s.a.st
	s.a.mu.Unlock()
	notices, err := s.chatChanges(old.Chats[s.addr], st.Chats[s.addr])
	if err != nil {
		return nil, err
	}
	moved := s.sandboxChanges(old, st)
	if len(moved) == 0 {
		s.a.mu.Lock()
		s.a.st = st
		s.a.mu.Unlock()
		s.setOffsets(st.Chats[s.addr])
		return notices, nil
	}
	notices = append(notices, moved...)
	s.closeSandboxes()
	return notices, s.open(ctx, st)
}

// chatChanges compares the session's record as its last turn left it
// (old) with the state's now (cur).
func (s *ChatSession) chatChanges(old, cur *state.Chat) ([]string, error) {
	name := chatName(s.addr)
	switch {
	case cur == nil && old != nil:
		return nil, &ChatGoneError{Session: s.addr,
			What: fmt.Sprintf("was removed from the state by another agentctl command (agentctl destroy, or agentctl state rm %s)", s.addr),
			Hint: fmt.Sprintf("its conversation is gone; run agentctl chat -session %s agent.%s again to start a new one", name, s.agent)}
	case cur == nil:
		return nil, nil
	case cur.Agent != s.agent:
		return nil, &ChatGoneError{Session: s.addr,
			What: fmt.Sprintf("was made a conversation with agent.%s by another agentctl command", cur.Agent),
			Hint: fmt.Sprintf("continue it with agentctl chat -session %s agent.%s, or choose another -session name", name, cur.Agent)}
	case old == nil:
		return []string{fmt.Sprintf("%s was started by another agentctl command meanwhile (%d %s): this session continues that conversation.", s.addr, cur.Turns, turnsWord(cur.Turns))}, nil
	case cur.Journal == old.Journal && cur.Turns == old.Turns:
		return nil, nil
	case cur.Turns < old.Turns || cur.Journal == "":
		return []string{fmt.Sprintf("%s was reset by another agentctl command since this session's last turn: the conversation starts over.", s.addr)}, nil
	}
	return []string{fmt.Sprintf("%s was continued by another agentctl command since this session's last turn (%d %s now): this session follows on from them.", s.addr, cur.Turns, turnsWord(cur.Turns))}, nil
}

func turnsWord(n int) string {
	if n == 1 {
		return "turn"
	}
	return "turns"
}

// sandboxChanges says which of the session's sandboxes another command
// removed, replaced, stopped or left half restored in cur since the
// session opened them in old: they are opened again.
func (s *ChatSession) sandboxChanges(old, cur *state.State) []string {
	var out []string
	for _, addr := range sortedKeys(s.ws) {
		o, c := old.Sandboxes[addr], cur.Sandboxes[addr]
		var what, then string
		switch {
		case c == nil:
			what, then = "was removed from the state", "it is created again"
		case c.Status == statusDeleted:
			what, then = "was deleted", "it is created again"
		case o == nil || c.Session.ID != o.Session.ID:
			what, then = "was replaced", "the session uses the new one"
		case c.RestorePending != nil:
			what, then = "was left half restored", "it is restored again"
		case c.Status != statusRunning:
			what, then = "was stopped", "it is started again"
		default:
			continue
		}
		out = append(out, fmt.Sprintf("%s %s by another agentctl command since this session's last turn: %s.", addr, what, then))
	}
	return out
}

// closeSandboxes ends what the session's sandbox handles hold in this
// process (a local sandbox's init) before they are opened again.
func (s *ChatSession) closeSandboxes() {
	s.a.mu.Lock()
	sbs := slices.Collect(maps.Values(s.a.sbs))
	s.a.mu.Unlock()
	for _, sb := range sbs {
		if c, ok := sb.(io.Closer); ok {
			c.Close()
		}
	}
}
