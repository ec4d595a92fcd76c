package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// The V4A patch format ("*** Begin Patch"), parsed with the reference
// implementation's leniency: whitespace around the begin, end and file
// header markers is ignored, the first chunk of an update may omit "@@",
// blank lines between chunks are skipped, and a heredoc wrapper
// (<<'EOF' ... EOF) around the whole patch is removed.

const (
	markerBegin     = "*** Begin Patch"
	markerEnd       = "*** End Patch"
	markerAdd       = "*** Add File: "
	markerDelete    = "*** Delete File: "
	markerUpdate    = "*** Update File: "
	markerMove      = "*** Move to: "
	markerEOF       = "*** End of File"
	markerContext   = "@@ "
	markerEmptyHunk = "@@"
)

type opKind int

const (
	opAdd opKind = iota
	opDelete
	opUpdate
)

// patchOp is one file operation of a parsed patch.
type patchOp struct {
	kind     opKind
	path     string // as written in the patch
	movePath string // Update with "*** Move to:"; "" otherwise
	contents string // Add: the new file's content
	chunks   []patchChunk

	// rel and moveRel are the checked workspace-relative paths.
	rel, moveRel string
}

// patchChunk is one "@@" section of an update.
type patchChunk struct {
	// contexts are "@@ <line>" anchors, sought in order before oldLines.
	contexts []string
	oldLines []string
	newLines []string
	// ctxOf[i] is, for a context line newLines[i], its index in oldLines
	// (so the file's own text of a fuzzily matched line is kept); -1 for
	// an added line.
	ctxOf []int
	// eof anchors oldLines at the end of the file ("*** End of File").
	eof bool
}

// errPatch marks a patch that could not be parsed; nothing was changed.
var errPatch = errors.New("invalid patch")

func parseErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errPatch, fmt.Sprintf(format, args...))
}

func hunkErr(line int, format string, args ...any) error {
	return fmt.Errorf("%w: invalid hunk at line %d, %s", errPatch, line, fmt.Sprintf(format, args...))
}

// splitLines splits text into lines as Rust's str::lines does: on "\n",
// dropping one trailing "\r" per line and the empty piece after a final
// newline.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

var heredocStart = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^<<(EOF|'EOF'|"EOF")$`) })

// parseV4A parses a whole "*** Begin Patch" text.
func parseV4A(patch string) ([]patchOp, error) {
	lines := splitLines(strings.TrimSpace(patch))
	body, err := patchBody(lines)
	if err != nil {
		if n := len(lines); n >= 4 && heredocStart().MatchString(lines[0]) && strings.HasSuffix(lines[n-1], "EOF") {
			body, err = patchBody(lines[1 : n-1])
		}
		if err != nil {
			return nil, err
		}
	}
	var ops []patchOp
	lineNo := 2
	for len(body) > 0 {
		op, n, err := parseFileOp(body, lineNo)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
		body = body[n:]
		lineNo += n
	}
	return ops, nil
}

func patchBody(lines []string) ([]string, error) {
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != markerBegin {
		return nil, parseErr("The first line of the patch must be '%s'", markerBegin)
	}
	if len(lines) < 2 || strings.TrimSpace(lines[len(lines)-1]) != markerEnd {
		return nil, parseErr("The last line of the patch must be '%s'", markerEnd)
	}
	return lines[1 : len(lines)-1], nil
}

// parseFileOp parses one file operation at the start of lines and returns
// it with the number of lines it used.
func parseFileOp(lines []string, lineNo int) (patchOp, int, error) {
	first := strings.TrimSpace(lines[0])
	if p, ok := strings.CutPrefix(first, markerAdd); ok {
		var b strings.Builder
		n := 1
		for _, l := range lines[1:] {
			c, ok := strings.CutPrefix(l, "+")
			if !ok {
				break
			}
			b.WriteString(c)
			b.WriteByte('\n')
			n++
		}
		return patchOp{kind: opAdd, path: p, contents: b.String()}, n, nil
	}
	if p, ok := strings.CutPrefix(first, markerDelete); ok {
		return patchOp{kind: opDelete, path: p}, 1, nil
	}
	if p, ok := strings.CutPrefix(first, markerUpdate); ok {
		op := patchOp{kind: opUpdate, path: p}
		n := 1
		rest := lines[1:]
		if len(rest) > 0 {
			if m, ok := strings.CutPrefix(strings.TrimSpace(rest[0]), markerMove); ok {
				op.movePath = m
				rest = rest[1:]
				n++
			}
		}
		chunks, used, err := parseChunks(rest, lineNo+n, true)
		if err != nil {
			return patchOp{}, 0, err
		}
		if len(chunks) == 0 {
			return patchOp{}, 0, hunkErr(lineNo, "Update file hunk for path '%s' is empty", p)
		}
		op.chunks = chunks
		return op, n + used, nil
	}
	return patchOp{}, 0, hunkErr(lineNo, "'%s' is not a valid hunk header. Valid hunk headers: '*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'", first)
}

// parseChunks parses the chunks of an update until a line starting with
// '*' (the next file operation) or the end; stopAtStar is false for the
// JSON form, whose diff holds one file's chunks only.
func parseChunks(lines []string, lineNo int, stopAtStar bool) ([]patchChunk, int, error) {
	var chunks []patchChunk
	used := 0
	for used < len(lines) {
		l := lines[used]
		if strings.TrimSpace(l) == "" {
			used++
			continue
		}
		if strings.HasPrefix(l, "*") && (stopAtStar || l != markerEOF) {
			break
		}
		c, n, err := parseChunk(lines[used:], lineNo+used, len(chunks) == 0)
		if err != nil {
			return nil, 0, err
		}
		chunks = append(chunks, c)
		used += n
	}
	return chunks, used, nil
}

func isContextMarker(l string) (string, bool) {
	if l == markerEmptyHunk {
		return "", true
	}
	if c, ok := strings.CutPrefix(l, markerContext); ok {
		return c, true
	}
	return "", false
}

func parseChunk(lines []string, lineNo int, allowNoContext bool) (patchChunk, int, error) {
	var c patchChunk
	start := 0
	for start < len(lines) {
		ctx, ok := isContextMarker(lines[start])
		if !ok {
			break
		}
		if strings.TrimSpace(ctx) != "" {
			c.contexts = append(c.contexts, ctx)
		}
		start++
	}
	if start == 0 && !allowNoContext {
		return c, 0, hunkErr(lineNo, "Expected update hunk to start with a @@ context marker, got: '%s'", lines[0])
	}
	if start >= len(lines) {
		return c, 0, hunkErr(lineNo+1, "Update hunk does not contain any lines")
	}
	n := 0
loop:
	for _, l := range lines[start:] {
		if l == markerEOF {
			if n == 0 {
				return c, 0, hunkErr(lineNo+1, "Update hunk does not contain any lines")
			}
			c.eof = true
			n++
			break
		}
		switch {
		case l == "":
			c.ctxOf = append(c.ctxOf, len(c.oldLines))
			c.oldLines = append(c.oldLines, "")
			c.newLines = append(c.newLines, "")
		case l[0] == ' ':
			c.ctxOf = append(c.ctxOf, len(c.oldLines))
			c.oldLines = append(c.oldLines, l[1:])
			c.newLines = append(c.newLines, l[1:])
		case l[0] == '+':
			c.ctxOf = append(c.ctxOf, -1)
			c.newLines = append(c.newLines, l[1:])
		case l[0] == '-':
			c.oldLines = append(c.oldLines, l[1:])
		default:
			if n == 0 {
				return c, 0, hunkErr(lineNo+1, "Unexpected line found in update hunk: '%s'. Every line should start with ' ' (context line), '+' (added line), or '-' (removed line)", l)
			}
			break loop
		}
		n++
	}
	return c, start + n, nil
}

// The JSON operation form: the Responses API apply_patch_call operation
// {"type": "create_file"|"update_file"|"delete_file", "path", "diff"}
// (plus "move_to"), alone, wrapped as {"operation": {...}} or
// {"operations": [...]}, or as an array.

type jsonOp struct {
	Type   string  `json:"type"`
	Path   *string `json:"path"`
	Diff   *string `json:"diff"`
	MoveTo *string `json:"move_to"`
}

func parseJSONOps(payload string) ([]patchOp, error) {
	var raw any
	dec := json.NewDecoder(strings.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, parseErr("apply_patch JSON input is not valid JSON: %v", err)
	}
	var items []json.RawMessage
	switch v := raw.(type) {
	case []any:
		if err := json.Unmarshal([]byte(payload), &items); err != nil {
			return nil, parseErr("%v", err)
		}
	case map[string]any:
		var wrap struct {
			Operations []json.RawMessage `json:"operations"`
			Operation  json.RawMessage   `json:"operation"`
		}
		if err := json.Unmarshal([]byte(payload), &wrap); err != nil {
			return nil, parseErr("apply_patch JSON input: %v", err)
		}
		switch {
		case v["operations"] != nil:
			items = wrap.Operations
		case v["operation"] != nil:
			items = []json.RawMessage{wrap.Operation}
		default:
			items = []json.RawMessage{json.RawMessage(payload)}
		}
	default:
		return nil, parseErr("apply_patch JSON input must be an object or array")
	}
	ops := make([]patchOp, 0, len(items))
	for i, it := range items {
		op, err := parseJSONOp(it)
		if err != nil {
			return nil, fmt.Errorf("operation %d: %w", i+1, err)
		}
		ops = append(ops, op)
	}
	return ops, nil
}

func parseJSONOp(item json.RawMessage) (patchOp, error) {
	var j jsonOp
	dec := json.NewDecoder(strings.NewReader(string(item)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return patchOp{}, parseErr("apply_patch operation must be an object with type, path and diff: %v", err)
	}
	if j.Type != "create_file" && j.Type != "update_file" && j.Type != "delete_file" {
		return patchOp{}, parseErr("Invalid apply_patch operation type: %q: use create_file, update_file or delete_file", j.Type)
	}
	if j.Path == nil || *j.Path == "" {
		return patchOp{}, parseErr("apply_patch operation is missing a path")
	}
	if j.Type != "delete_file" && j.Diff == nil {
		return patchOp{}, parseErr("apply_patch operation %s is missing a diff", j.Type)
	}
	switch j.Type {
	case "delete_file":
		return patchOp{kind: opDelete, path: *j.Path}, nil
	case "create_file":
		contents, err := createDiffContents(*j.Diff)
		if err != nil {
			return patchOp{}, err
		}
		return patchOp{kind: opAdd, path: *j.Path, contents: contents}, nil
	}
	op := patchOp{kind: opUpdate, path: *j.Path}
	if j.MoveTo != nil {
		op.movePath = *j.MoveTo
	}
	chunks, used, err := parseChunks(splitLines(*j.Diff), 1, false)
	if err != nil {
		return patchOp{}, err
	}
	lines := splitLines(*j.Diff)
	if used < len(lines) {
		return patchOp{}, parseErr("Invalid Line: %s", lines[used])
	}
	if len(chunks) == 0 {
		return patchOp{}, parseErr("Update file diff for path '%s' is empty", *j.Path)
	}
	op.chunks = chunks
	return op, nil
}

// createDiffContents turns a create_file diff ("+" lines) into the file's
// content as the SDK does: lines joined with the diff's newline style, no
// newline added after the last one.
func createDiffContents(diff string) (string, error) {
	nl := "\n"
	if strings.Contains(diff, "\r\n") {
		nl = "\r\n"
	}
	var out []string
	for _, l := range splitLines(diff) {
		if strings.HasPrefix(l, markerEnd) || strings.HasPrefix(l, "*** Update File:") ||
			strings.HasPrefix(l, "*** Delete File:") || strings.HasPrefix(l, "*** Add File:") {
			break
		}
		c, ok := strings.CutPrefix(l, "+")
		if !ok {
			return "", parseErr("Invalid Add File Line: %s", l)
		}
		out = append(out, c)
	}
	return strings.Join(out, nl), nil
}

// parsePatch parses either form: JSON when the text starts with '{' or
// '[', the V4A text format otherwise.
func parsePatch(patch string) ([]patchOp, error) {
	t := strings.TrimLeft(patch, " \t\r\n")
	if strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
		return parseJSONOps(patch)
	}
	return parseV4A(patch)
}
