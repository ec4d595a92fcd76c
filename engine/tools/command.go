package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentctl/agentctl/internal/jsonschema"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
)

// CommandOutputLimit is the number of bytes of each output stream a
// command tool keeps (head and tail halves).
const CommandOutputLimit = 64 << 10

var toolNameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`) })

// CommandTool is a custom tool of a "command" capability: a program in
// the sandbox that receives the call's JSON arguments on stdin.
type CommandTool struct {
	ws         *sandbox.Workspace
	name, desc string
	params     json.RawMessage
	schema     *jsonschema.Schema
	argv       []string
	timeout    time.Duration
	user       string
}

// RunAs makes the tool run its command as the manifest user name (the
// capability's run_as; "" is the sandbox's default user) and returns it.
func (t *CommandTool) RunAs(name string) *CommandTool {
	t.user = name
	return t
}

// NewCommandTool returns a command tool named name. parameters is the JSON
// Schema (an object schema) the arguments must match; argv runs at the
// workspace root with the arguments as JSON on stdin, killed after timeout
// (0: DefaultExecTimeout), with the workspace's URLs in its environment
// (URLEnv). Its output is formatted as exec_command's.
func NewCommandTool(ws *sandbox.Workspace, name, description string, parameters json.RawMessage, argv []string, timeout time.Duration) (*CommandTool, error) {
	if !toolNameRE().MatchString(name) {
		return nil, fmt.Errorf("command tool name %q is invalid: use 1 to 64 letters, digits, '_' or '-'", name)
	}
	if len(argv) == 0 || argv[0] == "" {
		return nil, fmt.Errorf("command tool %s: the command is empty: give the program and its arguments, e.g. [\"python3\", \"tools/query.py\"]", name)
	}
	if len(bytes.TrimSpace(parameters)) == 0 {
		parameters = json.RawMessage(`{"type": "object", "properties": {}, "additionalProperties": false}`)
	}
	var doc any
	if err := json.Unmarshal(parameters, &doc); err != nil {
		return nil, fmt.Errorf("command tool %s: parameters are not valid JSON: %w", name, err)
	}
	if m, ok := doc.(map[string]any); !ok || m["type"] != "object" {
		return nil, fmt.Errorf("command tool %s: parameters must be a JSON Schema with \"type\": \"object\"", name)
	}
	sch, err := jsonschema.Compile(parameters)
	if err != nil {
		return nil, fmt.Errorf("command tool %s: parameters are not a valid JSON Schema: %w", name, err)
	}
	if timeout <= 0 {
		timeout = DefaultExecTimeout
	}
	return &CommandTool{
		ws: ws, name: name, desc: description, params: parameters, schema: sch,
		argv: append([]string(nil), argv...), timeout: timeout,
	}, nil
}

// URLEnv is the environment that gives a command its sandbox's URLs:
// AGENTCTL_URL_8080=<the URL of port 8080>, one variable per exposed port
// (nil without any).
func URLEnv(urls map[string]string) map[string]string {
	if len(urls) == 0 {
		return nil
	}
	env := make(map[string]string, len(urls))
	for port, u := range urls {
		env["AGENTCTL_URL_"+port] = u
	}
	return env
}

// Definition implements Tool.
func (t *CommandTool) Definition() model.Tool {
	return model.Tool{Name: t.name, Description: t.desc, Parameters: t.params}
}

// Call implements Tool.
func (t *CommandTool) Call(ctx context.Context, arguments string) (Output, error) {
	if strings.TrimSpace(arguments) == "" {
		arguments = "{}"
	}
	if err := t.schema.Validate([]byte(arguments)); err != nil {
		if errors.Is(err, jsonschema.ErrNotJSON) {
			return Output{}, fmt.Errorf("%s: invalid arguments: %v", t.name, err)
		}
		return Output{}, fmt.Errorf("%s: arguments do not match the tool's parameters: %v", t.name, err)
	}
	start := time.Now()
	res, err := t.ws.Exec(ctx, sandbox.ExecRequest{
		Argv:        t.argv,
		Env:         URLEnv(t.ws.URLs),
		Stdin:       strings.NewReader(arguments),
		Timeout:     t.timeout,
		OutputLimit: CommandOutputLimit,
		User:        t.user,
	})
	wall := time.Since(start)
	if ctx.Err() != nil {
		// The run is being cancelled: no result is recorded, so the call
		// runs again when the run resumes.
		return Output{}, fmt.Errorf("%s: cancelled: %w", t.name, ctx.Err())
	}
	var notices []string
	if outputLost(err) {
		notices = append(notices, OutputLostNotice)
		err = nil
	}
	if err != nil && !res.TimedOut {
		if ctx.Err() != nil {
			return Output{}, fmt.Errorf("%s: %w", t.name, ctx.Err())
		}
		return Output{}, scrubErr(t.ws, fmt.Errorf("%s: running %s in the sandbox: %w", t.name, strings.Join(t.argv, " "), err))
	}
	if res.TimedOut {
		notices = append(notices, TimeoutNotice(t.timeout))
	}
	res.Wall = wall
	return Output{ExitCode: exitCode(res), Text: FormatExecOutput(res, 0, notices...)}, nil
}

// Describe implements Describer: the tool's argv (its arguments go to
// the program's standard input as JSON).
func (t *CommandTool) Describe(arguments string) (Invocation, error) {
	return Invocation{Argv: append([]string(nil), t.argv...)}, nil
}
