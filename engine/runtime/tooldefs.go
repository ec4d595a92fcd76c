package runtime

import (
	"encoding/json"
	"strings"

	"github.com/agentctl/agentctl/engine/model"
)

// handoffToolName is the Agents SDK's name for a handoff to agent:
// transfer_to_<name>, lower-cased, with spaces as underscores.
func handoffToolName(agent string) string {
	return "transfer_to_" + strings.ReplaceAll(strings.ToLower(agent), " ", "_")
}

// handoffTool is the function tool a handoff appears as.
func handoffTool(agent, description string) model.Tool {
	d := "Handoff to the " + agent + " agent to handle the request."
	if description != "" {
		d += " " + description
	}
	return model.Tool{
		Name:        handoffToolName(agent),
		Description: d,
		Parameters:  json.RawMessage(`{"type":"object","properties":{},"required":[],"additionalProperties":false}`),
		Strict:      true,
	}
}

// agentToolDefinition is the function tool an agent used as a tool appears
// as, with the Agents SDK's single string "input" parameter.
func agentToolDefinition(name, description string) model.Tool {
	return model.Tool{
		Name:        name,
		Description: description,
		Parameters:  json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"The input to send to the agent."}},"required":["input"],"additionalProperties":false}`),
		Strict:      true,
	}
}
