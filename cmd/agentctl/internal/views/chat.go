package views

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/state"
)

// Chat shows agentctl chat: the replies as they stream, the tool calls
// the agents make, the history, and the session's notices.
type Chat interface {
	// Opened says which session this is: addr with agent, turns so far.
	Opened(addr, agent string, turns int)
	// Prompt asks for the next line when a person types them.
	Prompt()
	// Resuming says that the unfinished turn of input is carried on first.
	Resuming(input string)
	// Event shows one runtime event of a turn. It is safe for concurrent
	// use.
	Event(ev agentloop.Event)
	// Reply ends a turn with its result.
	Reply(res *agentloop.Result)
	// TurnFailed reports a turn (or a command) that did not end with a
	// reply.
	TurnFailed(err error)
	History(items []model.Item)
	Reset(addr string)
	// Unknown reports a line starting with / that is no command.
	Unknown(cmd string)
	// Notice says what another agentctl command changed since the
	// session's last turn.
	Notice(msg string)
	// WaitingForLock says that what (a turn, /reset, opening the
	// session) waits for the state lock, which holder holds (nil: not
	// known yet), for at most limit (0: until it is released).
	WaitingForLock(what string, holder *state.LockInfo, limit time.Duration)
	// LockTaken ends a wait for the lock that lasted waited.
	LockTaken(waited time.Duration)
}

// NewChat returns the chat view of viewType; interactive is whether a
// person types the lines (standard input is a terminal).
func NewChat(viewType arguments.ViewType, view *View, interactive bool) Chat {
	if viewType == arguments.ViewJSON {
		return &chatJSON{jsonEvents: newJSONEvents(view.Stdout)}
	}
	return &chatHuman{View: view, Interactive: interactive}
}

// chatHuman shows a chat to a person. Replies go to standard output;
// notices, which a scripted conversation's output should not hold, go
// to standard error.
type chatHuman struct {
	*View
	// Interactive is whether a person types the lines (standard input is
	// a terminal): only then is a prompt shown.
	Interactive bool

	mu sync.Mutex
	// streamed is whether the turn's reply text was streamed; midLine
	// whether the last thing written left a line open.
	streamed, midLine bool
}

// Opened says which session this is, on standard error.
func (v *chatHuman) Opened(addr, agent string, turns int) {
	if turns == 0 {
		fmt.Fprintf(v.Stderr, "%s: a new conversation with agent.%s.", addr, termtext.Line(agent))
	} else {
		fmt.Fprintf(v.Stderr, "%s: continuing the conversation with agent.%s (%d %s so far).", addr, termtext.Line(agent), turns, plural(turns, "turn", "turns"))
	}
	fmt.Fprintln(v.Stderr, " /history shows it, /reset starts it over, /exit ends the session.")
}

// Prompt asks for the next line when a person types them.
func (v *chatHuman) Prompt() {
	if v.Interactive {
		fmt.Fprint(v.Stdout, "> ")
	}
}

// Resuming says that the turn an earlier session left unfinished is
// carried on first.
func (v *chatHuman) Resuming(input string) {
	fmt.Fprintf(v.Stderr, "Resuming the unfinished turn %q from its last checkpoint.\n", termtext.Line(input))
}

// Event shows one runtime event of a turn: the top-level conversation's
// text as it streams, and the tool calls and handoffs of every agent.
func (v *chatHuman) Event(ev agentloop.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	switch ev.Type {
	case agentloop.EventTextDelta:
		if ev.Path != "" {
			return
		}
		text := termtext.Printable(ev.Text)
		if text == "" {
			return
		}
		fmt.Fprint(v.Stdout, text)
		v.streamed = true
		v.midLine = !strings.HasSuffix(text, "\n")
	case agentloop.EventToolCall:
		v.line(fmt.Sprintf("  [%s %s]", termtext.Line(ev.Name), termtext.Line(ev.Arguments)))
	case agentloop.EventHostedToolCall:
		v.line(fmt.Sprintf("  [hosted %s: %s]", termtext.Line(ev.Name), termtext.Line(ev.Text)))
	case agentloop.EventHandoff:
		v.line(fmt.Sprintf("  [handoff to agent.%s]", termtext.Line(ev.Text)))
	case agentloop.EventCompaction:
		v.line(fmt.Sprintf("  [compacting the conversation: %s]", termtext.Line(ev.Text)))
	case agentloop.EventPolicyError:
		v.line(fmt.Sprintf("  [the approval policy of %s failed, so the call was refused: %s]", termtext.Line(ev.Name), termtext.Line(ev.Text)))
	}
}

// line writes s on a line of its own; callers hold v.mu.
func (v *chatHuman) line(s string) {
	if v.midLine {
		fmt.Fprintln(v.Stdout)
	}
	fmt.Fprintln(v.Stdout, s)
	v.midLine = false
}

// Reply ends a turn: its final output when it was not streamed (a model
// that does not stream, a structured output), and a line break.
func (v *chatHuman) Reply(res *agentloop.Result) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.streamed && res != nil && len(res.Output) > 0 {
		v.line(termtext.Printable(renderValue(res.Output)))
	}
	if v.midLine {
		fmt.Fprintln(v.Stdout)
	}
	v.streamed, v.midLine = false, false
}

// TurnFailed reports a turn that did not end with a reply.
func (v *chatHuman) TurnFailed(err error) {
	v.mu.Lock()
	if v.midLine {
		fmt.Fprintln(v.Stdout)
	}
	v.streamed, v.midLine = false, false
	v.mu.Unlock()
	v.Error(err)
}

// History prints the conversation so far.
func (v *chatHuman) History(items []model.Item) {
	if len(items) == 0 {
		fmt.Fprintln(v.Stdout, "(the conversation is empty)")
		return
	}
	WriteHistory(v.Stdout, items)
}

// Notice says what another command changed, on standard error.
func (v *chatHuman) Notice(msg string) { fmt.Fprintln(v.Stderr, termtext.Line(msg)) }

// WaitingForLock says who holds the lock and what waits, on standard
// error.
func (v *chatHuman) WaitingForLock(what string, holder *state.LockInfo, limit time.Duration) {
	until := "once it is released (Ctrl-C gives up)"
	if limit > 0 {
		until = fmt.Sprintf("once it is released, waiting at most %s (-lock-timeout)", limit)
	}
	fmt.Fprintf(v.Stderr, "Waiting for the state lock held by %s: %s starts %s.\n", LockHolder(holder), what, until)
}

// LockTaken shows nothing: what waited shows by starting.
func (v *chatHuman) LockTaken(time.Duration) {}

// LockHolder names the holder of the state lock (nil: not known yet).
func LockHolder(i *state.LockInfo) string {
	if i == nil {
		return "another agentctl, which has not recorded itself yet"
	}
	who := i.Who
	if who == "" {
		who = "another agentctl"
	}
	return fmt.Sprintf("%s (PID %d) running %q since %s (lock ID %s)", termtext.Line(who), i.PID, termtext.Line(i.Operation), i.Created.UTC().Format("2006-01-02 15:04:05 MST"), termtext.Line(i.ID))
}

// Reset confirms that the conversation starts over.
func (v *chatHuman) Reset(addr string) {
	fmt.Fprintf(v.Stderr, "%s: the conversation starts over (the sandbox keeps its files).\n", addr)
}

// Unknown reports a line starting with / that is no command.
func (v *chatHuman) Unknown(cmd string) {
	fmt.Fprintf(v.Stderr, "Unknown command %s: the commands are /history, /reset and /exit (a line starting with // is sent as /...).\n", termtext.Line(cmd))
}

// WriteHistory prints a conversation: the user's lines after "> ", the
// agents' messages, their tool calls and a preview of each output.
func WriteHistory(w io.Writer, items []model.Item) {
	for _, it := range items {
		switch it.Type {
		case model.ItemMessage:
			switch it.Role {
			case "user":
				fmt.Fprintf(w, "> %s\n", termtext.Printable(it.Text))
			case "assistant":
				who := ""
				if it.Agent != "" {
					who = "agent." + termtext.Line(it.Agent) + ": "
				}
				fmt.Fprintf(w, "%s%s\n", who, termtext.Printable(it.Text))
			}
		case model.ItemFunctionCall:
			fmt.Fprintf(w, "  [%s %s]\n", termtext.Line(it.Name), termtext.Line(it.Arguments))
		case model.ItemHostedToolCall:
			fmt.Fprintf(w, "  [hosted %s: %s]\n", termtext.Line(it.Name), termtext.Line(it.Text))
		case model.ItemFunctionCallOutput:
			out := it.Output
			if _, after, ok := strings.Cut(out, "Output:\n"); ok {
				out = after // an exec_command result's own output
			}
			fmt.Fprintf(w, "  → %s\n", termtext.Line(outputPreview(out)))
		}
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// outputPreview is the first line of a tool's output, at most 120 bytes
// (cut at a character boundary), with "…" when there is more.
func outputPreview(s string) string {
	s = strings.TrimSpace(s)
	line, rest, more := strings.Cut(s, "\n")
	if len(line) > 120 {
		cut := 120
		for cut > 0 && !utf8.RuneStart(line[cut]) {
			cut--
		}
		line, more = line[:cut], true
	}
	if more || rest != "" {
		line += "…"
	}
	return line
}

// chatJSON writes a chat as newline-delimited JSON events.
type chatJSON struct {
	*jsonEvents
	mu   sync.Mutex
	addr string
}

func (v *chatJSON) address() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.addr
}

func (v *chatJSON) Opened(addr, agent string, turns int) {
	v.mu.Lock()
	v.addr = addr
	v.mu.Unlock()
	v.emit(map[string]any{"type": "chat_opened", "address": addr, "agent": agent, "turns": turns})
}

func (v *chatJSON) Prompt() {}

func (v *chatJSON) Resuming(input string) {
	v.emit(map[string]any{"type": "chat_resuming", "address": v.address(), "input": input})
}

// Event writes a runtime event as apply -json does: its type, and the
// event itself as run_event.
func (v *chatJSON) Event(ev agentloop.Event) {
	v.emit(map[string]any{"type": string(ev.Type), "address": v.address(), "run_event": ev})
}

func (v *chatJSON) Reply(res *agentloop.Result) {
	m := map[string]any{"type": "chat_reply", "address": v.address()}
	if res != nil {
		m["agent"], m["output"] = res.Agent, res.Output
	}
	v.emit(m)
}

func (v *chatJSON) TurnFailed(err error) {
	v.emit(map[string]any{"type": "diagnostic", "severity": "error", "address": v.address(), "summary": err.Error()})
}

func (v *chatJSON) History(items []model.Item) {
	if items == nil {
		items = []model.Item{}
	}
	v.emit(map[string]any{"type": "chat_history", "address": v.address(), "history": items})
}

func (v *chatJSON) Reset(addr string) {
	v.emit(map[string]any{"type": "chat_reset", "address": addr})
}

func (v *chatJSON) Unknown(cmd string) {
	v.emit(map[string]any{"type": "diagnostic", "severity": "warning", "summary": fmt.Sprintf("unknown command %s: the commands are /history, /reset and /exit", cmd)})
}

func (v *chatJSON) Notice(msg string) {
	v.emit(map[string]any{"type": "chat_notice", "address": v.address(), "message": msg})
}

func (v *chatJSON) WaitingForLock(what string, holder *state.LockInfo, limit time.Duration) {
	m := map[string]any{"type": "lock_waiting", "address": v.address(), "waiting": what, "message": "waiting for the state lock held by " + LockHolder(holder)}
	if holder != nil {
		m["holder"] = holder
	}
	if limit > 0 {
		m["timeout_seconds"] = limit.Seconds()
	}
	v.emit(m)
}

func (v *chatJSON) LockTaken(waited time.Duration) {
	v.emit(map[string]any{"type": "lock_taken", "address": v.address(), "waited_seconds": waited.Seconds()})
}
