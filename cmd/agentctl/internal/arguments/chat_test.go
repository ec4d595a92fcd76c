package arguments

import (
	"testing"
	"time"
)

func TestParseChat(t *testing.T) {
	runParseCases(t, ParseChat, []parseCase[Chat]{
		{name: "default session", args: []string{"agent.assistant"}, want: &Chat{
			Backend: backendDefaults, Session: "default", Agent: "assistant", ViewType: ViewHuman, WaitForLock: true,
		}},
		{name: "json, and a bounded wait for the lock", args: []string{"-json", "-lock-timeout", "30s", "agent.assistant"}, want: &Chat{
			Backend: func() Backend { b := backendDefaults; b.State.LockTimeout = 30 * time.Second; return b }(), Session: "default", Agent: "assistant", ViewType: ViewJSON,
		}},
		{name: "named session and config", args: []string{"-session", "demo", "-config", "examples/chat.hcl", "agent.helper"}, want: &Chat{
			Backend: func() Backend { b := backendDefaults; b.Config = "examples/chat.hcl"; return b }(), Session: "demo", Agent: "helper", ViewType: ViewHuman, WaitForLock: true,
		}},
		{name: "no agent", args: []string{"-session", "demo"}, diags: []string{"Chat needs exactly one agent to talk to: agentctl chat [-session NAME] agent.NAME"}},
		{name: "two agents", args: []string{"agent.a", "agent.b"}, diags: []string{"Chat needs exactly one agent to talk to: agentctl chat [-session NAME] agent.NAME"}},
		{name: "not an agent", args: []string{"run.a"}, diags: []string{`Chat needs an agent address like agent.assistant, not "run.a"`}},
		{name: "bad session", args: []string{"-session", "two words", "agent.a"}, diags: []string{`Invalid -session "two words": a session name is an identifier (letters, digits, _ and -, not starting with a digit), like -session demo`}},
	})
}
