package views

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/agentctl/agentctl/model"
)

// Chat shows agentctl chat: the replies as they stream, the tool calls
// the agents make, the history, and the session's notices. Replies go to
// standard output; notices, which a scripted conversation's output should
// not hold, go to standard error.
type Chat struct {
	*View
	// Interactive is whether a person types the lines (standard input is
	// a terminal): only then is a prompt shown.
	Interactive bool

	mu sync.Mutex
	// streamed is whether the turn's reply text was streamed; midLine
	// whether the last thing written left a line open.
	streamed, midLine bool
}

// NewChat returns the chat view.
func NewChat(view *View, interactive bool) *Chat { return &Chat{View: view, Interactive: interactive} }

// Opened says which session this is, on standard error.
func (v *Chat) Opened(addr, agent string, turns int) {
	if turns == 0 {
		fmt.Fprintf(v.Stderr, "%s: a new conversation with agent.%s.", addr, termtext.Line(agent))
	} else {
		fmt.Fprintf(v.Stderr, "%s: continuing the conversation with agent.%s (%d %s so far).", addr, termtext.Line(agent), turns, plural(turns, "turn", "turns"))
	}
	fmt.Fprintln(v.Stderr, " /history shows it, /reset starts it over, /exit ends the session.")
}

// Prompt asks for the next line when a person types them.
func (v *Chat) Prompt() {
	if v.Interactive {
		fmt.Fprint(v.Stdout, "> ")
	}
}

// Resuming says that the turn an earlier session left unfinished is
// carried on first.
func (v *Chat) Resuming(input string) {
	fmt.Fprintf(v.Stderr, "Resuming the unfinished turn %q from its last checkpoint.\n", termtext.Line(input))
}

// Event shows one runtime event of a turn: the top-level conversation's
// text as it streams, and the tool calls and handoffs of every agent.
func (v *Chat) Event(ev agentloop.Event) {
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
func (v *Chat) line(s string) {
	if v.midLine {
		fmt.Fprintln(v.Stdout)
	}
	fmt.Fprintln(v.Stdout, s)
	v.midLine = false
}

// Reply ends a turn: its final output when it was not streamed (a model
// that does not stream, a structured output), and a line break.
func (v *Chat) Reply(res *agentloop.Result) {
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
func (v *Chat) TurnFailed(err error) {
	v.mu.Lock()
	if v.midLine {
		fmt.Fprintln(v.Stdout)
	}
	v.streamed, v.midLine = false, false
	v.mu.Unlock()
	v.Error(err)
}

// History prints the conversation so far.
func (v *Chat) History(items []model.Item) {
	if len(items) == 0 {
		fmt.Fprintln(v.Stdout, "(the conversation is empty)")
		return
	}
	WriteHistory(v.Stdout, items)
}

// Reset confirms that the conversation starts over.
func (v *Chat) Reset(addr string) {
	fmt.Fprintf(v.Stderr, "%s: the conversation starts over (the sandbox keeps its files).\n", addr)
}

// Unknown reports a line starting with / that is no command.
func (v *Chat) Unknown(cmd string) {
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
