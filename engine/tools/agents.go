package tools

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/agentctl/agentctl/model"
)

var (
	whitespaceRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\s`) })
	nonWordRE    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-zA-Z0-9_]`) })
)

// FunctionName turns a name into a function-call name the way the Agents
// SDK does: whitespace and every character other than ASCII letters,
// digits and '_' become '_', and the result is lower-cased.
func FunctionName(name string) string {
	return strings.ToLower(nonWordRE().ReplaceAllString(whitespaceRE().ReplaceAllString(name, "_"), "_"))
}

// HandoffToolName is the tool name of a handoff to agentName:
// transfer_to_<agent_name>.
func HandoffToolName(agentName string) string {
	return FunctionName("transfer_to_" + agentName)
}

// emptyStrictSchema is the SDK's strict schema of a tool with no arguments.
const emptyStrictSchema = `{"additionalProperties": false, "type": "object", "properties": {}, "required": []}`

// HandoffTool is the definition of the tool that hands the conversation to
// agentName, named and described as the Agents SDK does:
// "Handoff to the <agent> agent to handle the request. <description>".
// description is the target agent's handoff description (may be empty).
// The runtime executes the call.
func HandoffTool(agentName, description string) model.Tool {
	return model.Tool{
		Name:        HandoffToolName(agentName),
		Description: fmt.Sprintf("Handoff to the %s agent to handle the request. %s", agentName, description),
		Parameters:  json.RawMessage(emptyStrictSchema),
		Strict:      true,
	}
}

// HandoffOutput is the tool output the SDK records for a handoff call:
// {"assistant": "<agent>"}.
func HandoffOutput(agentName string) string {
	b, _ := json.Marshal(map[string]string{"assistant": agentName})
	return string(b)
}

// agentToolSchema is the strict schema of the SDK's AgentAsToolInput.
const agentToolSchema = `{"properties": {"input": {"title": "Input", "type": "string"}}, "required": ["input"], "title": "AgentAsToolInput", "type": "object", "additionalProperties": false}`

// AgentToolDefinition is the definition of an agent used as a tool: one
// strict function taking {"input": string}, as the SDK's Agent.as_tool
// defines it. The runtime runs the nested agent on the input.
func AgentToolDefinition(name, description string) model.Tool {
	return model.Tool{
		Name:        FunctionName(name),
		Description: description,
		Parameters:  json.RawMessage(agentToolSchema),
		Strict:      true,
	}
}

// AgentToolInput decodes an agent tool call's arguments into the input
// given to the nested agent.
func AgentToolInput(arguments string) (string, error) {
	var a struct {
		Input *string `json:"input"`
	}
	if err := decodeArgs("agent tool", arguments, &a); err != nil {
		return "", err
	}
	if a.Input == nil {
		return "", fmt.Errorf(`agent tool: "input" is required: send {"input": "<the task for the agent>"}`)
	}
	return *a.Input, nil
}
