package chat

import (
	"context"
	"fmt"

	"github.com/agentctl/agentctl/state"
)

// A chat session holds the state lock only while a turn (or /reset)
// writes, so other agentctl commands (a teammate's apply, another chat of
// the same session) may change the state between its turns. Each turn
// starts from the state read again under the lock (Refresh): the session
// goes on from what they left, says what changed, and never writes its
// older copy over theirs.

// GoneError is a session whose record another command removed or gave to
// another agent since the session's last turn: the session ends without
// writing over it.
type GoneError struct {
	Session string
	// What happened, and Hint what to do.
	What, Hint string
}

func (e *GoneError) Error() string {
	return fmt.Sprintf("%s %s since this session's last turn, so this session ends without writing over it (the line was not sent): %s", e.Session, e.What, e.Hint)
}

// Refresh makes st, the state just read under the lock before a turn (or
// /reset), the session's state, so that what other agentctl commands did
// since the session's last turn is seen and kept. It returns notices of
// what they changed that the session goes on with: the conversation
// continued or reset elsewhere, a sandbox of the session stopped,
// replaced or removed (opened again as Open opens it). A record removed,
// or now a conversation with another agent, is a *GoneError.
func (s *Session) Refresh(ctx context.Context, st *state.State) ([]string, error) {
	notices, err := s.chatChanges(s.Record(), st.Chats[s.key])
	if err != nil {
		return nil, err
	}
	moved, err := s.sess.Refresh(ctx, st)
	notices = append(notices, moved...)
	if err != nil {
		return notices, err
	}
	s.setOffsets(st.Chats[s.key])
	return notices, nil
}

// chatChanges compares the session's record as its last turn left it
// (old) with the state's now (cur).
func (s *Session) chatChanges(old, cur *state.Chat) ([]string, error) {
	name := s.addr.Name
	switch {
	case cur == nil && old != nil:
		return nil, &GoneError{Session: s.key,
			What: fmt.Sprintf("was removed from the state by another agentctl command (agentctl destroy, or agentctl state rm %s)", s.key),
			Hint: fmt.Sprintf("its conversation is gone; run agentctl chat -session %s agent.%s again to start a new one", name, s.agent)}
	case cur == nil:
		return nil, nil
	case cur.Agent != s.agent:
		return nil, &GoneError{Session: s.key,
			What: fmt.Sprintf("was made a conversation with agent.%s by another agentctl command", cur.Agent),
			Hint: fmt.Sprintf("continue it with agentctl chat -session %s agent.%s, or choose another -session name", name, cur.Agent)}
	case old == nil:
		return []string{fmt.Sprintf("%s was started by another agentctl command meanwhile (%d %s): this session continues that conversation.", s.key, cur.Turns, turnsWord(cur.Turns))}, nil
	case cur.Journal == old.Journal && cur.Turns == old.Turns:
		return nil, nil
	case cur.Turns < old.Turns || cur.Journal == "":
		return []string{fmt.Sprintf("%s was reset by another agentctl command since this session's last turn: the conversation starts over.", s.key)}, nil
	}
	return []string{fmt.Sprintf("%s was continued by another agentctl command since this session's last turn (%d %s now): this session follows on from them.", s.key, cur.Turns, turnsWord(cur.Turns))}, nil
}

func turnsWord(n int) string {
	if n == 1 {
		return "turn"
	}
	return "turns"
}
