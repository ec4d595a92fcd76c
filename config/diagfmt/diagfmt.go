// Package diagfmt renders HCL diagnostics for people, in the style of
// Terraform (summary, "on FILE line N, in BLOCK:", a source snippet with
// the range underlined, detail), and as JSON in the shape of
// `terraform validate -json`.
package diagfmt

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcled"
)

const (
	ansiReset     = "\x1b[0m"
	ansiBold      = "\x1b[1m"
	ansiRed       = "\x1b[31m"
	ansiYellow    = "\x1b[33m"
	ansiUnderline = "\x1b[4m"
)

// WriteHuman writes every diagnostic in human form. files maps filenames
// to parsed files for snippets; it may be nil.
func WriteHuman(w io.Writer, diags hcl.Diagnostics, files map[string]*hcl.File, color bool) error {
	var b strings.Builder
	for _, d := range diags {
		b.WriteString(Human(d, files, color))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Human renders one diagnostic.
func Human(d *hcl.Diagnostic, files map[string]*hcl.File, color bool) string {
	var b strings.Builder
	b.WriteString("\n")
	label, c := "Error: ", ansiRed
	if d.Severity == hcl.DiagWarning {
		label, c = "Warning: ", ansiYellow
	}
	summary := termtext.Printable(d.Summary)
	if color {
		fmt.Fprintf(&b, "%s%s%s%s%s\n", ansiBold, c, label, ansiReset+ansiBold, summary+ansiReset)
	} else {
		fmt.Fprintf(&b, "%s%s\n", label, summary)
	}
	if d.Subject != nil {
		s := *d.Subject
		b.WriteString("\n")
		file := files[s.Filename]
		ctx := ""
		if file != nil {
			ctx = hcled.ContextString(file, s.Start.Byte)
		}
		if ctx != "" {
			fmt.Fprintf(&b, "  on %s line %d, in %s:\n", s.Filename, s.Start.Line, ctx)
		} else {
			fmt.Fprintf(&b, "  on %s line %d:\n", s.Filename, s.Start.Line)
		}
		if file != nil {
			writeSnippet(&b, file.Bytes, s, color)
		}
	}
	if d.Detail != "" {
		b.WriteString("\n")
		b.WriteString(termtext.Printable(d.Detail))
		b.WriteString("\n")
	}
	return b.String()
}

// writeSnippet prints the source lines of rng (at most three) with the
// range underlined: by ANSI underline in color, by carets otherwise.
func writeSnippet(b *strings.Builder, src []byte, rng hcl.Range, color bool) {
	sc := bufio.NewScanner(bytes.NewReader(src))
	sc.Buffer(make([]byte, 64*1024), len(src)+1)
	sc.Split(bufio.ScanLines)
	last := rng.End.Line
	if last < rng.Start.Line {
		last = rng.Start.Line
	}
	if last > rng.Start.Line+2 {
		last = rng.Start.Line + 2
	}
	width := len(fmt.Sprint(last))
	for line := 1; sc.Scan(); line++ {
		if line < rng.Start.Line {
			continue
		}
		if line > last {
			break
		}
		text := strings.TrimRight(sc.Text(), "\r\n")
		// Byte columns of the highlight on this line.
		startCol, endCol := 0, len(text)
		if line == rng.Start.Line {
			startCol = min(rng.Start.Column-1, len(text))
		}
		if line == rng.End.Line {
			endCol = min(max(rng.End.Column-1, startCol), len(text))
		}
		if startCol < 0 {
			startCol = 0
		}
		pre, hl, post := window(text, startCol, endCol)
		if color {
			fmt.Fprintf(b, "  %*d: %s%s%s%s\n", width, line, pre, ansiUnderline, hl, ansiReset+post)
		} else {
			fmt.Fprintf(b, "  %*d: %s%s%s\n", width, line, pre, hl, post)
			if hl != "" {
				pad := []rune(pre)
				for i := range pad {
					if pad[i] != '\t' {
						pad[i] = ' '
					}
				}
				fmt.Fprintf(b, "  %*s  %s%s\n", width, "", string(pad), strings.Repeat("^", runeCount(hl)))
			}
		}
	}
}

func runeCount(s string) int { return len([]rune(s)) }

// snippetWidth bounds the bytes of a source line a snippet shows: a file
// of one enormous line (minified, or not text at all) would otherwise be
// printed whole with every diagnostic.
const snippetWidth = 160

// window splits text around the highlight [start, end) into what a
// snippet prints before, in and after it: at most snippetWidth bytes in
// all (cut ends marked with …), control characters and invalid UTF-8
// escaped so the terminal shows them instead of obeying them.
func window(text string, start, end int) (pre, hl, post string) {
	from, to := 0, len(text)
	if len(text) > snippetWidth {
		from = max(0, start-snippetWidth/3)
		to = min(len(text), max(end, from+snippetWidth))
		end = min(end, from+snippetWidth)
		to = min(to, from+snippetWidth)
	}
	pre, hl, post = termtext.Printable(text[from:start]), termtext.Printable(text[start:end]), termtext.Printable(text[end:to])
	if from > 0 {
		pre = "…" + pre
	}
	if to < len(text) {
		post += "…"
	}
	return pre, hl, post
}

// JSON document types, as terraform validate -json.

type Pos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

type Range struct {
	Filename string `json:"filename"`
	Start    Pos    `json:"start"`
	End      Pos    `json:"end"`
}

type Snippet struct {
	Context              *string `json:"context"`
	Code                 string  `json:"code"`
	StartLine            int     `json:"start_line"`
	HighlightStartOffset int     `json:"highlight_start_offset"`
	HighlightEndOffset   int     `json:"highlight_end_offset"`
	Values               []any   `json:"values"`
}

type Diagnostic struct {
	Severity string   `json:"severity"`
	Summary  string   `json:"summary"`
	Detail   string   `json:"detail"`
	Address  string   `json:"address,omitempty"`
	Range    *Range   `json:"range,omitempty"`
	Snippet  *Snippet `json:"snippet,omitempty"`
}

// Validate is the document of validate -json.
type Validate struct {
	FormatVersion string       `json:"format_version"`
	Valid         bool         `json:"valid"`
	ErrorCount    int          `json:"error_count"`
	WarningCount  int          `json:"warning_count"`
	Diagnostics   []Diagnostic `json:"diagnostics"`
}

// NewValidate builds the validate -json document.
func NewValidate(diags hcl.Diagnostics, files map[string]*hcl.File) Validate {
	v := Validate{FormatVersion: "1.0", Diagnostics: []Diagnostic{}}
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			v.ErrorCount++
		} else {
			v.WarningCount++
		}
		v.Diagnostics = append(v.Diagnostics, JSONDiagnostic(d, files))
	}
	v.Valid = v.ErrorCount == 0
	return v
}

// WriteJSON writes the validate -json document, indented.
func WriteJSON(w io.Writer, diags hcl.Diagnostics, files map[string]*hcl.File) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(NewValidate(diags, files))
}

// JSONDiagnostic converts one diagnostic.
func JSONDiagnostic(d *hcl.Diagnostic, files map[string]*hcl.File) Diagnostic {
	out := Diagnostic{Severity: "error", Summary: d.Summary, Detail: d.Detail}
	if d.Severity == hcl.DiagWarning {
		out.Severity = "warning"
	}
	if d.Subject == nil {
		return out
	}
	s := *d.Subject
	out.Range = &Range{
		Filename: s.Filename,
		Start:    Pos{s.Start.Line, s.Start.Column, s.Start.Byte},
		End:      Pos{s.End.Line, s.End.Column, s.End.Byte},
	}
	file := files[s.Filename]
	if file == nil || s.Start.Byte > len(file.Bytes) || s.End.Byte > len(file.Bytes) {
		return out
	}
	src := file.Bytes
	// The code is the whole lines spanning the subject.
	start := bytes.LastIndexByte(src[:s.Start.Byte], '\n') + 1
	end := s.End.Byte
	if end < s.Start.Byte {
		end = s.Start.Byte
	}
	if i := bytes.IndexByte(src[end:], '\n'); i >= 0 {
		end += i
	} else {
		end = len(src)
	}
	if s.End.Byte > s.Start.Byte && s.End.Byte > start && src[s.End.Byte-1] == '\n' {
		end = s.End.Byte - 1
	}
	sn := &Snippet{
		Code:                 strings.TrimRight(string(src[start:end]), "\r"),
		StartLine:            s.Start.Line,
		HighlightStartOffset: s.Start.Byte - start,
		HighlightEndOffset:   min(max(s.End.Byte, s.Start.Byte), end) - start,
		Values:               []any{},
	}
	if ctx := hcled.ContextString(file, s.Start.Byte); ctx != "" {
		sn.Context = &ctx
	}
	out.Snippet = sn
	return out
}
