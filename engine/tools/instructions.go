package tools

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/agentctl/agentctl/sandbox"
)

// ShellInstructions is the shell capability's instruction fragment, the
// Agents SDK's text without its write_stdin lines (commands here run to
// completion; there are no interactive sessions).
const ShellInstructions = "When using the shell:\n" +
	"- Use `exec_command` for shell execution.\n" +
	"- Prefer `rg` and `rg --files` for text/file discovery when available.\n" +
	"- Avoid using Python scripts just to print large file chunks."

// ShellInstructionsInteractive is the shell capability's instruction
// fragment where commands can run as sessions (the SDK's text).
const ShellInstructionsInteractive = "When using the shell:\n" +
	"- Use `exec_command` for shell execution.\n" +
	"- Use `write_stdin` to send input to, or poll, a session `exec_command` left running (pass `tty=true` to drive an interactive program).\n" +
	"- Prefer `rg` and `rg --files` for text/file discovery when available.\n" +
	"- Avoid using Python scripts just to print large file chunks."

// FilesystemInstructions is the filesystem capability's instruction
// fragment. As in the Agents SDK it is empty: the apply_patch and
// view_image descriptions carry what the model needs, and the workspace
// layout comes from FilesystemSection.
const FilesystemInstructions = ""

// Defaults of RenderTree.
const (
	DefaultTreeEntries = 200
	// TreeDepth is how many levels below the root are shown (the SDK's 3).
	TreeDepth = 3
	// MaxTreeChars caps the rendering (the SDK's 5000).
	MaxTreeChars = 5000
)

const treeTruncatedNote = "\n\nThe filesystem layout above was truncated. Use `ls` to explore specific directories before relying on omitted paths.\n"

type treeLine struct {
	prefix, name, full string
}

// RenderTree renders the live workspace as the Agents SDK renders a
// workspace for instructions: the root, then each entry up to TreeDepth
// levels deep in name order, with tree connectors and an aligned
// "# <absolute path>" comment; directories end in "/". root is the
// workspace root inside the sandbox (e.g. /workspace; "" shows "."). At
// most maxEntries entries are listed (<= 0: DefaultTreeEntries); .git is
// listed but not expanded. A cut rendering ends with a note telling the
// model to use ls.
func RenderTree(ctx context.Context, ws *sandbox.Workspace, root string, maxEntries int) (string, error) {
	if maxEntries <= 0 {
		maxEntries = DefaultTreeEntries
	}
	label := strings.TrimRight(root, "/")
	switch {
	case root == "":
		label = "."
	case label == "":
		label = "/"
	}
	var lines []treeLine
	truncated := false
	var walk func(rel, prefix string, depth int) error
	walk = func(rel, prefix string, depth int) error {
		ents, err := ws.ReadDir(ctx, rel)
		if err != nil {
			return fmt.Errorf("listing %q in the workspace: %w", rel, err)
		}
		sort.Slice(ents, func(i, j int) bool { return path.Base(ents[i].Path) < path.Base(ents[j].Path) })
		for i, e := range ents {
			if len(lines) >= maxEntries {
				truncated = true
				return nil
			}
			name := path.Base(e.Path)
			childRel := path.Join(rel, name)
			last := i == len(ents)-1
			conn, ext := "├── ", "│   "
			if last {
				conn, ext = "└── ", "    "
			}
			display := name
			if e.Mode.IsDir() {
				display += "/"
			}
			lines = append(lines, treeLine{prefix + conn, display, path.Join(label, childRel)})
			if e.Mode.IsDir() && depth < TreeDepth && name != ".git" {
				if err := walk(childRel, prefix+ext, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := walk("", "", 1); err != nil {
		return "", err
	}
	// File names may hold a sensitive value: the tree goes into the
	// instructions (and so to the model and the journal) scrubbed.
	label = ws.Scrub.String(label)
	for i := range lines {
		lines[i].name = ws.Scrub.String(lines[i].name)
		lines[i].full = ws.Scrub.String(lines[i].full)
	}
	width := 0
	for _, l := range lines {
		width = max(width, utf8.RuneCountInString(l.prefix+l.name))
	}
	var b strings.Builder
	b.WriteString(label + "\n")
	for _, l := range lines {
		pad := width - utf8.RuneCountInString(l.prefix+l.name) + 2
		fmt.Fprintf(&b, "%s%s%s# %s\n", l.prefix, l.name, strings.Repeat(" ", pad), l.full)
	}
	out := b.String()
	if truncated {
		out += fmt.Sprintf("... (listing stopped after %d entries)%s", maxEntries, treeTruncatedNote)
	}
	if utf8.RuneCountInString(out) > MaxTreeChars {
		out = truncateTree(out)
	}
	return out, nil
}

// truncateTree cuts a rendering to MaxTreeChars characters, ending it with
// the SDK's marker.
func truncateTree(s string) string {
	runes := []rune(s)
	omitted := len(runes) - MaxTreeChars
	for {
		marker := fmt.Sprintf("\n... (truncated %d chars)%s", omitted, treeTruncatedNote)
		keep := max(0, MaxTreeChars-utf8.RuneCountInString(marker))
		if len(runes)-keep == omitted {
			return strings.TrimRight(string(runes[:keep]), " \t\n") + marker
		}
		omitted = len(runes) - keep
	}
}

// FilesystemSection is the instructions section describing the workspace,
// as the SDK appends it after the capability instructions; tree is a
// RenderTree result.
func FilesystemSection(tree string) string {
	return "# Filesystem\nYou have access to a container with a filesystem. The filesystem layout is:\n\n" + strings.TrimSpace(tree)
}

// BuildInstructions assembles a sandbox agent's instructions in the SDK's
// order: "# Agent instructions" (the agent's own), "# Sandbox capability
// instructions" (the non-empty fragments, blank-line separated), then the
// filesystem section when tree is not empty. Empty parts are left out.
func BuildInstructions(agentInstructions string, capabilityFragments []string, tree string) string {
	var parts []string
	if agentInstructions != "" {
		parts = append(parts, "# Agent instructions\n\n"+agentInstructions)
	}
	var frags []string
	for _, f := range capabilityFragments {
		if f != "" {
			frags = append(frags, f)
		}
	}
	if len(frags) > 0 {
		parts = append(parts, "# Sandbox capability instructions\n\n"+strings.Join(frags, "\n\n"))
	}
	if strings.TrimSpace(tree) != "" {
		parts = append(parts, FilesystemSection(tree))
	}
	return strings.Join(parts, "\n\n")
}
