package arguments

import (
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
}

// ParseChat parses chat's arguments: flags and one agent.NAME.
func ParseChat(args []string) (*Chat, hcl.Diagnostics) {
	a := &Chat{}
	fs := newFlagSet("chat")
	a.Backend.register(fs, true)
	registerNoColor(fs, &a.NoColor)
	fs.StringVar(&a.Session, "session", "default", "The conversation to start or continue, kept in the state as chat.NAME.")
	pos, diags := parse(fs, args)
	if diags.HasErrors() {
		return a, diags
	}
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
