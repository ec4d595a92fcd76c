package arguments

import (
	"flag"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Chat are the arguments of agentctl chat.
type Chat struct {
	Backend
	// Session is the chat session's name (-session; its address is
	// chat.NAME).
	Session string
	// Agent is the agent to talk to, without its agent. prefix.
	Agent   string
	NoColor bool
	// ViewType is ViewHuman or ViewJSON (-json).
	ViewType ViewType
	// WaitForLock is true when -lock-timeout was not given: the chat
	// takes the state lock for each turn only, and a turn waits for it
	// for as long as another command holds it.
	WaitForLock bool
}

// ParseChat parses chat's arguments: flags and one agent.NAME.
func ParseChat(args []string) (*Chat, hcl.Diagnostics) {
	a := &Chat{}
	var jsonOut bool
	fs := newFlagSet("chat")
	a.Backend.register(fs, true)
	registerNoColor(fs, &a.NoColor)
	fs.StringVar(&a.Session, "session", "default", "The conversation to start or continue, kept in the state as chat.NAME.")
	fs.BoolVar(&jsonOut, "json", false, "Print newline-delimited JSON events instead of text.")
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
	a.ViewType = viewType(jsonOut)
	a.WaitForLock = true
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "lock-timeout" {
			a.WaitForLock = false
		}
	})
	if len(pos) != 1 {
		return a, hcl.Diagnostics{errorf("Chat needs exactly one agent to talk to: agentctl chat [-session NAME] agent.NAME")}
	}
	name, ok := strings.CutPrefix(pos[0], "agent.")
	if !ok || !hclsyntax.ValidIdentifier(name) {
		return a, hcl.Diagnostics{errorf("Chat needs an agent address like agent.assistant, not %q", pos[0])}
	}
	a.Agent = name
	if !hclsyntax.ValidIdentifier(a.Session) {
		return a, hcl.Diagnostics{errorf("Invalid -session %q: a session name is an identifier (letters, digits, _ and -, not starting with a digit), like -session demo", a.Session)}
	}
	return a, nil
}
