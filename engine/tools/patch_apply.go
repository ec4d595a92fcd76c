//lint:file-ignore ST1005 these errors are apply_patch tool output the model reads; they are worded as the reference apply_patch words them ("Failed to find expected lines in ...", "No files were modified.") so a model trained on it recognises them.

package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentctl/agentctl/sandbox"
)

// PatchFS is the file access ApplyPatch needs. Every path is
// workspace-relative with forward slashes. sandbox.Sandbox and
// *sandbox.Workspace satisfy it; the apply_patch tool passes the
// workspace's Sandbox so files are read unscrubbed (reading through the
// Workspace would write "(sensitive)" back over secrets in patched files).
type PatchFS interface {
	ReadFile(ctx context.Context, path string, limit int64) ([]byte, error)
	WriteFile(ctx context.Context, path string, data []byte, mode fs.FileMode) error
	Remove(ctx context.Context, path string) error
	Stat(ctx context.Context, path string) (sandbox.FileInfo, error)
}

// MaxPatchFileSize is the largest file apply_patch reads to update.
const MaxPatchFileSize = 64 << 20

// ApplyPatch applies a patch to fsys and returns the summary the reference
// apply_patch prints:
//
//	Success. Updated the following files:
//	A added/path
//	M modified/path
//	D deleted/path
//
// The patch is either the V4A text format ("*** Begin Patch" ... "*** End
// Patch") or the JSON operation form ({"type": "create_file" |
// "update_file" | "delete_file", "path", "diff"}, a list of them, or
// {"operations": [...]}). root is the workspace root inside the sandbox:
// absolute patch paths must lie under it (root "" refuses them).
//
// The whole patch is parsed and every path checked before anything is
// changed. Operations then run in order; when one fails, the ones before
// it stay applied (there is no rollback) and the error says which were.
func ApplyPatch(ctx context.Context, fsys PatchFS, root, patch string) (string, error) {
	ops, err := parsePatch(patch)
	if err != nil {
		return "", err
	}
	if len(ops) == 0 {
		return "", errors.New("No files were modified.")
	}
	for i := range ops {
		op := &ops[i]
		if op.rel, err = checkPatchPath(root, op.path); err != nil {
			return "", err
		}
		if op.movePath != "" {
			if op.moveRel, err = checkPatchPath(root, op.movePath); err != nil {
				return "", err
			}
		}
	}
	var added, modified, deleted []string
	for _, op := range ops {
		if err := ctx.Err(); err != nil {
			return "", partialErr(err, added, modified, deleted)
		}
		switch op.kind {
		case opAdd:
			if err := fsys.WriteFile(ctx, op.rel, []byte(op.contents), 0o644); err != nil {
				return "", partialErr(fmt.Errorf("Failed to write file %s: %w", op.path, err), added, modified, deleted)
			}
			added = append(added, op.path)
		case opDelete:
			if err := deleteFile(ctx, fsys, op); err != nil {
				return "", partialErr(err, added, modified, deleted)
			}
			deleted = append(deleted, op.path)
		case opUpdate:
			dest, err := updateFile(ctx, fsys, op)
			if err != nil {
				return "", partialErr(err, added, modified, deleted)
			}
			modified = append(modified, dest)
		}
	}
	return summary(added, modified, deleted), nil
}

func checkPatchPath(root, p string) (string, error) {
	rel, err := toolPath(root, p)
	if err != nil {
		return "", err
	}
	if rel == "" {
		return "", fmt.Errorf("path %q is the workspace root, not a file: name a file inside it", p)
	}
	return rel, nil
}

func summary(added, modified, deleted []string) string {
	var b strings.Builder
	b.WriteString("Success. Updated the following files:\n")
	for _, p := range added {
		fmt.Fprintf(&b, "A %s\n", p)
	}
	for _, p := range modified {
		fmt.Fprintf(&b, "M %s\n", p)
	}
	for _, p := range deleted {
		fmt.Fprintf(&b, "D %s\n", p)
	}
	return b.String()
}

// partialErr adds to err the operations that were applied before it.
func partialErr(err error, added, modified, deleted []string) error {
	if len(added)+len(modified)+len(deleted) == 0 {
		return err
	}
	var b strings.Builder
	b.WriteString("\nThese changes were applied before the failure and are kept:\n")
	for _, p := range added {
		fmt.Fprintf(&b, "A %s\n", p)
	}
	for _, p := range modified {
		fmt.Fprintf(&b, "M %s\n", p)
	}
	for _, p := range deleted {
		fmt.Fprintf(&b, "D %s\n", p)
	}
	return fmt.Errorf("%w%s", err, strings.TrimSuffix(b.String(), "\n"))
}

func notExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

func deleteFile(ctx context.Context, fsys PatchFS, op patchOp) error {
	fi, err := fsys.Stat(ctx, op.rel)
	if err != nil {
		if notExist(err) {
			return fmt.Errorf("Failed to delete file %s: no such file", op.path)
		}
		return fmt.Errorf("Failed to delete file %s: %w", op.path, err)
	}
	if fi.Mode.IsDir() {
		return fmt.Errorf("Failed to delete file %s: it is a directory; apply_patch deletes files only", op.path)
	}
	if err := fsys.Remove(ctx, op.rel); err != nil {
		return fmt.Errorf("Failed to delete file %s: %w", op.path, err)
	}
	return nil
}

// updateFile applies an update and returns the path it reports (the move
// destination when there is one).
func updateFile(ctx context.Context, fsys PatchFS, op patchOp) (string, error) {
	mode := fs.FileMode(0o644)
	fi, err := fsys.Stat(ctx, op.rel)
	switch {
	case err != nil && notExist(err):
		return "", fmt.Errorf("Failed to read file to update %s: no such file; use *** Add File: to create it", op.path)
	case err != nil:
		return "", fmt.Errorf("Failed to read file to update %s: %w", op.path, err)
	case fi.Mode.IsDir():
		return "", fmt.Errorf("Failed to read file to update %s: it is a directory", op.path)
	case fi.Mode.IsRegular():
		mode = fi.Mode.Perm()
	}
	data, err := fsys.ReadFile(ctx, op.rel, MaxPatchFileSize)
	if err != nil {
		return "", fmt.Errorf("Failed to read file to update %s: %w", op.path, err)
	}
	if !utf8.Valid(data) {
		return "", fmt.Errorf("Failed to read file to update %s: the file is not valid UTF-8 text", op.path)
	}
	updated, err := applyChunks(string(data), op.path, op.chunks)
	if err != nil {
		return "", err
	}
	if op.movePath == "" || op.moveRel == op.rel {
		if err := fsys.WriteFile(ctx, op.rel, []byte(updated), mode); err != nil {
			return "", fmt.Errorf("Failed to write file %s: %w", op.path, err)
		}
		if op.movePath != "" {
			return op.movePath, nil
		}
		return op.path, nil
	}
	if err := fsys.WriteFile(ctx, op.moveRel, []byte(updated), mode); err != nil {
		return "", fmt.Errorf("Failed to write file %s: %w", op.movePath, err)
	}
	if err := fsys.Remove(ctx, op.rel); err != nil {
		return "", fmt.Errorf("Failed to remove original %s: %w", op.path, err)
	}
	return op.movePath, nil
}

type replacement struct {
	start, oldLen int
	lines         []string
}

// applyChunks applies an update's chunks to a file's content the way the
// reference does; the result always ends with a newline.
func applyChunks(content, path string, chunks []patchChunk) (string, error) {
	lines := strings.Split(content, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var reps []replacement
	idx := 0
	for _, c := range chunks {
		for _, ctxLine := range c.contexts {
			at := seekSequence(lines, []string{ctxLine}, idx, false)
			if at < 0 {
				return "", fmt.Errorf("Failed to find context '%s' in %s", ctxLine, path)
			}
			idx = at + 1
		}
		if len(c.oldLines) == 0 {
			at := len(lines)
			if at > 0 && lines[at-1] == "" {
				at--
			}
			reps = append(reps, replacement{start: at, lines: c.newLines})
			continue
		}
		pattern, newLines := c.oldLines, c.newLines
		at := seekSequence(lines, pattern, idx, c.eof)
		if at < 0 && pattern[len(pattern)-1] == "" {
			pattern = pattern[:len(pattern)-1]
			if len(newLines) > 0 && newLines[len(newLines)-1] == "" {
				newLines = newLines[:len(newLines)-1]
			}
			at = seekSequence(lines, pattern, idx, c.eof)
		}
		if at < 0 {
			return "", fmt.Errorf("Failed to find expected lines in %s:\n%s", path, strings.Join(c.oldLines, "\n"))
		}
		// Context lines keep the file's text: a fuzzy match must not
		// rewrite their whitespace or punctuation.
		kept := make([]string, len(newLines))
		for i, l := range newLines {
			if k := c.ctxOf[i]; k >= 0 && k < len(pattern) {
				l = lines[at+k]
			}
			kept[i] = l
		}
		reps = append(reps, replacement{start: at, oldLen: len(pattern), lines: kept})
		idx = at + len(pattern)
	}
	sort.SliceStable(reps, func(i, j int) bool { return reps[i].start < reps[j].start })
	for i := len(reps) - 1; i >= 0; i-- {
		r := reps[i]
		end := min(r.start+r.oldLen, len(lines))
		tail := append([]string(nil), lines[end:]...)
		lines = append(append(lines[:r.start], r.lines...), tail...)
	}
	if len(lines) == 0 || lines[len(lines)-1] != "" {
		lines = append(lines, "")
	}
	return strings.Join(lines, "\n"), nil
}

// seekSequence finds pattern in lines at or after start, trying an exact
// match, then ignoring trailing whitespace, then ignoring surrounding
// whitespace, then also normalizing typographic punctuation. With eof it
// first tries the end of the file, then falls back to searching from
// start. It returns -1 when there is no match.
func seekSequence(lines, pattern []string, start int, eof bool) int {
	if len(pattern) == 0 {
		return start
	}
	if len(pattern) > len(lines) {
		return -1
	}
	if eof {
		if at := seekFrom(lines, pattern, len(lines)-len(pattern)); at >= 0 {
			return at
		}
	}
	return seekFrom(lines, pattern, start)
}

func seekFrom(lines, pattern []string, from int) int {
	for _, norm := range []func(string) string{
		func(s string) string { return s },
		func(s string) string { return strings.TrimRightFunc(s, unicode.IsSpace) },
		strings.TrimSpace,
		normalizePunct,
	} {
		for i := from; i <= len(lines)-len(pattern); i++ {
			ok := true
			for j, p := range pattern {
				if norm(lines[i+j]) != norm(p) {
					ok = false
					break
				}
			}
			if ok {
				return i
			}
		}
	}
	return -1
}

var punctReplacer = strings.NewReplacer(
	"\u2010", "-", "\u2011", "-", "\u2012", "-", "\u2013", "-", "\u2014", "-", "\u2015", "-", "\u2212", "-",
	"\u2018", "'", "\u2019", "'", "\u201A", "'", "\u201B", "'",
	"\u201C", "\"", "\u201D", "\"", "\u201E", "\"", "\u201F", "\"",
	"\u00A0", " ", "\u2002", " ", "\u2003", " ", "\u2004", " ", "\u2005", " ", "\u2006", " ",
	"\u2007", " ", "\u2008", " ", "\u2009", " ", "\u200A", " ", "\u202F", " ", "\u205F", " ", "\u3000", " ",
)

func normalizePunct(s string) string { return punctReplacer.Replace(strings.TrimSpace(s)) }
