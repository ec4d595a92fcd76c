package diagfmt

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

const src = "agent \"a\" {\n  modle = \"x\"\n}\n"

func diag(t *testing.T) (*hcl.Diagnostic, map[string]*hcl.File) {
	t.Helper()
	f, diags := hclsyntax.ParseConfig([]byte(src), "main.hcl", hcl.Pos{Line: 1, Column: 1})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	content, _ := f.Body.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "agent", LabelNames: []string{"name"}}}})
	_, diags = content.Blocks[0].Body.Content(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "model"}}})
	if len(diags) != 1 {
		t.Fatalf("want one diagnostic, got %v", diags)
	}
	return diags[0], map[string]*hcl.File{"main.hcl": f}
}

func TestHumanNoColor(t *testing.T) {
	d, files := diag(t)
	got := Human(d, files, false)
	want := `
Error: Unsupported argument

  on main.hcl line 2, in agent "a":
  2:   modle = "x"
       ^^^^^

An argument named "modle" is not expected here. Did you mean "model"?
`
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestHumanColorUnderlines(t *testing.T) {
	d, files := diag(t)
	got := Human(d, files, true)
	if !strings.Contains(got, "  2:   \x1b[4mmodle\x1b[0m = \"x\"") {
		t.Errorf("range not underlined:\n%q", got)
	}
	if !strings.Contains(got, "\x1b[31mError: ") {
		t.Errorf("severity not colored:\n%q", got)
	}
}

func TestHumanWithoutRange(t *testing.T) {
	got := Human(&hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Something", Detail: "Fix it."}, nil, false)
	if got != "\nWarning: Something\n\nFix it.\n" {
		t.Errorf("got %q", got)
	}
}

func TestJSON(t *testing.T) {
	d, files := diag(t)
	var buf bytes.Buffer
	if err := WriteJSON(&buf, hcl.Diagnostics{d}, files); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"format_version": "1.0",
		"valid":          false,
		"error_count":    float64(1),
		"warning_count":  float64(0),
		"diagnostics": []any{map[string]any{
			"severity": "error",
			"summary":  "Unsupported argument",
			"detail":   `An argument named "modle" is not expected here. Did you mean "model"?`,
			"range": map[string]any{
				"filename": "main.hcl",
				"start":    map[string]any{"line": float64(2), "column": float64(3), "byte": float64(14)},
				"end":      map[string]any{"line": float64(2), "column": float64(8), "byte": float64(19)},
			},
			"snippet": map[string]any{
				"context":                `agent "a"`,
				"code":                   `  modle = "x"`,
				"start_line":             float64(2),
				"highlight_start_offset": float64(2),
				"highlight_end_offset":   float64(7),
				"values":                 []any{},
			},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	buf.Reset()
	if err := WriteJSON(&buf, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"valid": true`) || !strings.Contains(buf.String(), `"diagnostics": []`) {
		t.Errorf("empty result: %s", buf.String())
	}
}

// A snippet of a long line of binary shows a window around the range,
// with control characters escaped and the carets under the range.
func TestSnippetWindowAndEscapes(t *testing.T) {
	line := strings.Repeat("x", 500) + "\x1b]0;title\x07" + "BAD" + strings.Repeat("y", 500)
	start := strings.Index(line, "BAD")
	src := []byte("a = 1\n" + line + "\n")
	f := &hcl.File{Bytes: src}
	rng := hcl.Range{Filename: "f.hcl", Start: hcl.Pos{Line: 2, Column: start + 1, Byte: 6 + start}, End: hcl.Pos{Line: 2, Column: start + 4, Byte: 6 + start + 3}}
	out := Human(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Bad \x1b[2J thing", Subject: &rng}, map[string]*hcl.File{"f.hcl": f}, false)
	if strings.ContainsAny(out, "\x1b\x07") {
		t.Fatalf("control characters reach the terminal:\n%q", out)
	}
	if !strings.Contains(out, `Error: Bad \x1b[2J thing`) || !strings.Contains(out, `\x1b]0;title\x07BAD`) {
		t.Fatalf("escapes not shown:\n%s", out)
	}
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.Contains(l, "BAD") && strings.HasPrefix(l, "  2: ") {
			if len(l) > 200 || !strings.HasPrefix(l, "  2: …") || !strings.HasSuffix(l, "…") {
				t.Fatalf("snippet line not windowed (%d bytes): %q", len(l), l)
			}
			caret := lines[i+1]
			col := strings.Index(l, "BAD") - len("…") + 1 // … is three bytes, one column
			if strings.Index(caret, "^^^") != col || strings.Count(caret, "^") != 3 {
				t.Fatalf("carets misplaced:\n%s\n%s", l, caret)
			}
			return
		}
	}
	t.Fatalf("no snippet line:\n%s", out)
}
