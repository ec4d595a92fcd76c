package tools

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/sandbox/hostfs"
)

func encodeImage(t *testing.T, format string) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	img.Set(1, 1, color.RGBA{255, 0, 0, 255})
	var buf bytes.Buffer
	var err error
	switch format {
	case "png":
		err = png.Encode(&buf, img)
	case "jpeg":
		err = jpeg.Encode(&buf, img, nil)
	case "gif":
		err = gif.Encode(&buf, img, nil)
	case "webp":
		// A minimal RIFF/WEBP container header is what sniffing looks at.
		buf.WriteString("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00")
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestViewImage(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	tool := NewViewImage(ws, FilesystemOptions{Root: "/workspace"})
	for _, f := range []struct{ format, media string }{
		{"png", "image/png"}, {"jpeg", "image/jpeg"}, {"gif", "image/gif"}, {"webp", "image/webp"},
	} {
		data := encodeImage(t, f.format)
		// A misleading extension: the media type comes from the content.
		name := "img/picture-" + f.format + ".bin"
		writeFiles(t, dir, map[string]string{name: string(data)})
		for _, p := range []string{name, "/workspace/" + name} {
			out, err := tool.Call(context.Background(), `{"path": "`+p+`"}`)
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			if len(out.Images) != 1 || out.Images[0].MediaType != f.media || !bytes.Equal(out.Images[0].Data, data) {
				t.Errorf("%s: got %d images, media %q", p, len(out.Images), mediaOf(out))
			}
		}
	}
}

func mediaOf(o Output) string {
	if len(o.Images) == 0 {
		return ""
	}
	return o.Images[0].MediaType
}

func TestViewImageFailures(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	writeFiles(t, dir, map[string]string{
		"notes.txt": "just text\n",
		"big.png":   string(encodeImage(t, "png")) + strings.Repeat("\x00", 2048),
		"d/x":       "",
		"fake.svg":  "<svg xmlns='http://www.w3.org/2000/svg'></svg>",
	})
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "o.png"), encodeImage(t, "png"), 0o644)
	os.Symlink(filepath.Join(outside, "o.png"), filepath.Join(dir, "link.png"))
	tool := NewViewImage(ws, FilesystemOptions{Root: "/workspace", MaxImageBytes: 1024})
	for _, tc := range []struct{ args, want string }{
		{`{"path": "notes.txt"}`, "image path `notes.txt` is not a supported image file"},
		{`{"path": "fake.svg"}`, "not a supported image file"},
		{`{"path": "big.png"}`, "image path `big.png` exceeded the allowed size of 1KB; resize or compress the image and try again"},
		{`{"path": "missing.png"}`, "image path `missing.png` was not found"},
		{`{"path": "d"}`, "is a directory"},
		{`{"path": "../x.png"}`, "leaves the workspace"},
		{`{"path": "/etc/hostname"}`, "outside the workspace root"},
		{`{"path": "link.png"}`, "escapes"},
		{`{}`, `"path" is required`},
		{`{"path": "a.png", "detail": "high"}`, `unknown field "detail"`},
		{`["a.png"]`, "invalid arguments"},
	} {
		out, err := tool.Call(context.Background(), tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.args, err, tc.want)
		}
		if len(out.Images) != 0 {
			t.Errorf("%s: returned an image with the error", tc.args)
		}
	}
}

func TestCommandTool(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	writeFiles(t, dir, map[string]string{"tools/echo.sh": "cat; echo; echo \"args: $#\" >&2; exit ${EXIT:-0}\n"})
	// The schema config builds from a command capability's parameters:
	// every property required, no others.
	params := json.RawMessage(`{"type": "object", "properties": {"sql": {"type": "string", "description": "the query"}, "limit": {"type": "integer", "minimum": 1}}, "required": ["limit", "sql"], "additionalProperties": false}`)
	tool, err := NewCommandTool(ws, "query_db", "Run a read-only SQL query", params, []string{"/bin/sh", "tools/echo.sh"}, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	def := tool.Definition()
	if def.Name != "query_db" || def.Description != "Run a read-only SQL query" {
		t.Errorf("definition %+v", def)
	}
	var schema map[string]any
	if err := json.Unmarshal(def.Parameters, &schema); err != nil || schema["additionalProperties"] != false {
		t.Errorf("parameters %s", def.Parameters)
	}
	args := `{"sql": "select 1", "limit": 5}`
	out, err := tool.Call(context.Background(), args)
	if err != nil {
		t.Fatal(err)
	}
	header, text := execOutput(t, out.Text)
	if header[0] != "Process exited with code 0" || text != args+"\nargs: 0\n" {
		t.Errorf("header %q output %q: the arguments must arrive on stdin", header, text)
	}

	ws.Env = map[string]string{"EXIT": "4"}
	out, err = tool.Call(context.Background(), args)
	if err != nil {
		t.Fatalf("non-zero exit must be output: %v", err)
	}
	if header, _ := execOutput(t, out.Text); header[0] != "Process exited with code 4" {
		t.Errorf("header %q", header)
	}

	for _, tc := range []struct{ args, want string }{
		{`{"sql": 1, "limit": 5}`, "do not match"},
		{`{"sql": "x"}`, "do not match"},
		{`{"sql": "x", "limit": 0}`, "do not match"},
		{`{"sql": "x", "limit": 1, "drop": true}`, "do not match"},
		{`{"sql": `, "not valid JSON"},
	} {
		if _, err := tool.Call(context.Background(), tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestCommandToolConstruction(t *testing.T) {
	ws, _ := newHostWorkspace(t)
	obj := json.RawMessage(`{"type": "object"}`)
	for _, tc := range []struct {
		name   string
		params json.RawMessage
		argv   []string
		want   string
	}{
		{"bad name!", obj, []string{"true"}, "name"},
		{"ok", obj, nil, "command is empty"},
		{"ok", json.RawMessage(`{"type": "array"}`), []string{"true"}, `"type": "object"`},
		{"ok", json.RawMessage(`{"type": "object", "properties": {"a": {"type": "nope"}}}`), []string{"true"}, "not a valid JSON Schema"},
		{"ok", json.RawMessage(`{`), []string{"true"}, "not valid JSON"},
	} {
		if _, err := NewCommandTool(ws, tc.name, "", tc.params, tc.argv, 0); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s %v: error %v, want %q", tc.name, tc.params, tc.argv, err, tc.want)
		}
	}
	// No parameters: a tool without arguments; empty arguments are {}.
	tool, err := NewCommandTool(ws, "now", "", nil, []string{"/bin/sh", "-c", "cat"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tool.Call(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, text := execOutput(t, out.Text); text != "{}" {
		t.Errorf("stdin = %q", text)
	}
}

func TestHandoffAndAgentToolDefinitions(t *testing.T) {
	h := HandoffTool("Copy Writer", "Writes client emails.")
	if h.Name != "transfer_to_copy_writer" || h.Description != "Handoff to the Copy Writer agent to handle the request. Writes client emails." || !h.Strict {
		t.Errorf("handoff %+v", h)
	}
	if got := HandoffTool("copywriter", "").Description; got != "Handoff to the copywriter agent to handle the request. " {
		t.Errorf("description %q", got)
	}
	if HandoffOutput("copywriter") != `{"assistant":"copywriter"}` {
		t.Errorf("handoff output %s", HandoffOutput("copywriter"))
	}
	a := AgentToolDefinition("review_pricing", "Review the pricing packet.")
	if a.Name != "review_pricing" || a.Description != "Review the pricing packet." || !a.Strict {
		t.Errorf("agent tool %+v", a)
	}
	for _, def := range []json.RawMessage{h.Parameters, a.Parameters} {
		var m map[string]any
		if err := json.Unmarshal(def, &m); err != nil || m["type"] != "object" || m["additionalProperties"] != false {
			t.Errorf("schema %s", def)
		}
	}
	if in, err := AgentToolInput(`{"input": "check Q1"}`); err != nil || in != "check Q1" {
		t.Errorf("input %q %v", in, err)
	}
	for _, bad := range []string{`{}`, `{"input": "x", "more": 1}`, `{"input": 3}`} {
		if _, err := AgentToolInput(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestToolDefinitions(t *testing.T) {
	ws, _ := newHostWorkspace(t)
	for _, tool := range []Tool{NewExecCommand(ws, ExecOptions{}, nil), NewApplyPatch(ws, FilesystemOptions{}), NewViewImage(ws, FilesystemOptions{})} {
		d := tool.Definition()
		var m map[string]any
		if err := json.Unmarshal(d.Parameters, &m); err != nil || m["type"] != "object" {
			t.Errorf("%s: parameters %s: %v", d.Name, d.Parameters, err)
		}
		if d.Description == "" {
			t.Errorf("%s: no description", d.Name)
		}
	}
	names := []string{NewExecCommand(ws, ExecOptions{}, nil).Definition().Name, NewApplyPatch(ws, FilesystemOptions{}).Definition().Name, NewViewImage(ws, FilesystemOptions{}).Definition().Name}
	if strings.Join(names, ",") != "exec_command,apply_patch,view_image" {
		t.Errorf("names %v", names)
	}
}

func TestRenderTree(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	writeFiles(t, dir, map[string]string{
		"data/sales.csv": "q\n", "brief.md": "b", "output/.keep": "", "a/b/c/d/deep.txt": "", ".git/HEAD": "",
	})
	got, err := RenderTree(context.Background(), ws, "/workspace", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := `/workspace
├── .git/          # /workspace/.git
├── a/             # /workspace/a
│   └── b/         # /workspace/a/b
│       └── c/     # /workspace/a/b/c
├── brief.md       # /workspace/brief.md
├── data/          # /workspace/data
│   └── sales.csv  # /workspace/data/sales.csv
└── output/        # /workspace/output
    └── .keep      # /workspace/output/.keep
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	got, err = RenderTree(context.Background(), ws, "/workspace", 3)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(got, "# /workspace") != 3 || !strings.Contains(got, "... (listing stopped after 3 entries)") || !strings.Contains(got, "Use `ls` to explore") {
		t.Errorf("truncated tree:\n%s", got)
	}
	var many = map[string]string{}
	for i := range 300 {
		many[filepath.Join("long-directory-name-for-padding", strings.Repeat("x", 40)+string(rune('a'+i%26))+string(rune('a'+i/26)))] = ""
	}
	writeFiles(t, dir, many)
	got, _ = RenderTree(context.Background(), ws, "/workspace", 1000)
	if n := len([]rune(got)); n > MaxTreeChars || !strings.Contains(got, "chars)") {
		t.Errorf("long tree is %d chars:\n%s", n, got[len(got)-300:])
	}
}

func TestBuildInstructions(t *testing.T) {
	got := BuildInstructions("Be brief.", []string{ShellInstructions, FilesystemInstructions}, "/workspace\n└── a  # /workspace/a\n")
	want := "# Agent instructions\n\nBe brief.\n\n# Sandbox capability instructions\n\n" + ShellInstructions +
		"\n\n# Filesystem\nYou have access to a container with a filesystem. The filesystem layout is:\n\n/workspace\n└── a  # /workspace/a"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
	if !strings.Contains(ShellInstructions, "`exec_command`") || strings.Contains(ShellInstructions, "write_stdin") {
		t.Errorf("shell instructions: %s", ShellInstructions)
	}
}

// errSandbox fails every exec, to check transport errors become tool errors.
type errSandbox struct{ *hostSandbox }

func (errSandbox) Exec(context.Context, sandbox.ExecRequest) (sandbox.ExecResult, error) {
	return sandbox.ExecResult{}, errors.New("connection reset by daemon")
}

func TestExecTransportFailureIsToolError(t *testing.T) {
	ws := &sandbox.Workspace{Sandbox: errSandbox{newHostSandbox(t, t.TempDir())}}
	_, err := NewExecCommand(ws, ExecOptions{}, nil).Call(context.Background(), `{"cmd": "true"}`)
	if err == nil || !strings.Contains(err.Error(), "connection reset by daemon") {
		t.Errorf("error %v", err)
	}
	tool, _ := NewCommandTool(ws, "t", "", nil, []string{"true"}, 0)
	if _, err := tool.Call(context.Background(), `{}`); err == nil {
		t.Error("command tool swallowed a transport error")
	}
}

// TestFileToolsRefuseFIFOs: in a host-directory workspace (the one `tool
// call -dir` uses) apply_patch and view_image on a FIFO return at once,
// before their context's deadline, with a message the model can read.
func TestFileToolsRefuseFIFOs(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"pipe", "pic.png"} {
		if err := syscall.Mkfifo(filepath.Join(dir, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	hd, err := hostfs.NewHostDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer hd.Close()
	ws := &sandbox.Workspace{Sandbox: hd}
	opts := FilesystemOptions{Root: "/workspace"}
	call := func(tool Tool, args string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := tool.Call(ctx, args)
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			t.Fatalf("%s %s did not return before its deadline", tool.Definition().Name, args)
		}
		return nil
	}
	for _, patch := range []string{
		`{"input": "*** Begin Patch\n*** Add File: pipe\n+x\n*** End Patch\n"}`,
		`{"input": "*** Begin Patch\n*** Update File: pipe\n@@\n-a\n+b\n*** End Patch\n"}`,
	} {
		err := call(NewApplyPatch(ws, opts), patch)
		if err == nil || !strings.Contains(err.Error(), "pipe: it is a named pipe (FIFO), not a regular file") {
			t.Errorf("apply_patch: %v", err)
		}
	}
	err = call(NewViewImage(ws, opts), `{"path": "pic.png"}`)
	if err == nil || !strings.Contains(err.Error(), "named pipe (FIFO)") {
		t.Errorf("view_image: %v", err)
	}
}

func TestRenderTreeScrubsSensitiveFileNames(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	ws.Scrub = sandbox.NewScrubber([]string{"hunter22"})
	writeFiles(t, dir, map[string]string{"key-hunter22.txt": "", "aHVudGVyMjI/x": "", "plain.txt": ""})
	got, err := RenderTree(context.Background(), ws, "/workspace", 0)
	if err != nil {
		t.Fatal(err)
	}
	// The base64 form's last character also carries bits of what would
	// follow the value, so only the part before it is the value's.
	want := `/workspace
├── (sensitive)I/        # /workspace/(sensitive)I
│   └── x                # /workspace/(sensitive)I/x
├── key-(sensitive).txt  # /workspace/key-(sensitive).txt
└── plain.txt            # /workspace/plain.txt
`
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}

func TestViewImageRefusesSensitiveBytes(t *testing.T) {
	ws, dir := newHostWorkspace(t)
	ws.Scrub = sandbox.NewScrubber([]string{"hunter22"})
	writeFiles(t, dir, map[string]string{"a.png": "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + hex.EncodeToString([]byte("hunter22"))})
	_, err := NewViewImage(ws, FilesystemOptions{}).Call(context.Background(), `{"path":"a.png"}`)
	if err == nil || !strings.Contains(err.Error(), "contains a sensitive value") {
		t.Fatalf("err = %v", err)
	}
}

// The first schemas compiled, from several goroutines at once and for
// several drafts, are checked against their metaschema; a draft other
// than 2020-12 and draft-07 is refused.
func TestCommandToolSchemasCheckedConcurrently(t *testing.T) {
	ws, _ := newHostWorkspace(t)
	for _, tc := range []struct {
		params json.RawMessage
		valid  bool
	}{
		{json.RawMessage(`{"type": "object", "properties": {"a": {"type": "string"}}}`), true},
		{json.RawMessage(`{"type": "object", "properties": {"a": {"type": "nope"}}}`), false},
		{json.RawMessage(`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {"minLength": -1}}}`), false},
		{json.RawMessage(`{"$schema": "http://json-schema.org/draft-04/schema#", "type": "object", "required": []}`), false},
		{json.RawMessage(`{"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "object", "properties": {"a": {"type": "integer"}}}`), false},
		{json.RawMessage(`{"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"a": {"type": "integer"}}}`), true},
		{json.RawMessage(`{"$schema": "http://json-schema.org/draft/2020-12/schema", "type": "object", "properties": {"a": {"type": "integer"}}}`), true},
	} {
		errs := make(chan error, 8)
		for range cap(errs) {
			go func() {
				_, err := NewCommandTool(ws, "t", "", tc.params, []string{"true"}, 0)
				errs <- err
			}()
		}
		for range cap(errs) {
			err := <-errs
			switch {
			case tc.valid && err != nil:
				t.Errorf("%s: %v", tc.params, err)
			case !tc.valid && (err == nil || !strings.Contains(err.Error(), "not a valid JSON Schema")):
				t.Errorf("%s: error %v, want one saying the schema is invalid", tc.params, err)
			}
		}
	}
}
