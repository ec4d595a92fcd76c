package main

import (
	"archive/tar"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testenv"
	"github.com/agentctl/agentctl/sandbox"
)

// The secret corpus: three sensitive variables, one with every character
// an encoding treats specially, one that ends up in a file name, and a
// long one (corpusLong) that tools wrap and dump over lines.
const (
	corpusToken = `S3cr3t/T0k+en"x&y?z=`
	corpusName  = "FileNam3Secret"
)

// corpusLong is a value of 94 random printable bytes (without the quotes
// and backslash the corpus's shell commands would need to escape), the
// same on every run; with other, it returns another such value that
// differs from it in both hex digits of every byte.
func corpusLong(other bool) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#%&*+,-./:;<=>?@^_~"
	r := rand.New(rand.NewChaCha8([32]byte{'c', 'o', 'r', 'p', 'u', 's'}))
	b := make([]byte, 94)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	for i, c := range b {
		for other {
			if d := alphabet[r.IntN(len(alphabet))]; d>>4 != c>>4 && d&15 != c&15 {
				b[i] = d
				break
			}
		}
	}
	return string(b)
}

// corpusTools are the commands that wrap or dump a value over lines.
var corpusTools = []string{
	"base64", "base64 -w0 | fold", "base64 | fold -w 64", "xxd", "xxd -p",
	"hexdump -C", "od", "od -c", "od -An -tx1",
}

// layoutCommand is a shell command writing the values of the variables
// vars (after two bytes, so that they start inside a base64 group and a
// dump line) through every corpus tool.
func layoutCommand(vars ...string) string {
	var cmds []string
	for _, v := range vars {
		for _, tool := range corpusTools {
			cmds = append(cmds, fmt.Sprintf(`printf 'xy%%s' "$%s" | %s`, v, tool))
		}
	}
	return strings.Join(cmds, "; ")
}

// layoutForms runs the corpus tools over v and returns, for every line
// of their output, the text from the first to the last character that
// v determines, and every such stretch between two blanks or an ASCII
// column's delimiters: none may survive scrubbing. A character is v's
// when the same tool writes another at its place for another value.
func layoutForms(t *testing.T, v, other string) []string {
	t.Helper()
	var forms []string
	for _, tool := range corpusTools {
		for _, name := range strings.Fields(tool) {
			if _, err := exec.LookPath(name); err != nil && (name == "base64" || name == "fold" || name == "xxd" || name == "hexdump" || name == "od") {
				testenv.Missing(t, "%s is not installed", name)
			}
		}
		outs := make([][]byte, 2)
		for i, val := range []string{v, other} {
			cmd := exec.Command("sh", "-c", fmt.Sprintf(`printf 'xy%%s' "$V" | %s`, tool))
			cmd.Env = append(os.Environ(), "V="+val)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: %v", tool, err)
			}
			outs[i] = out
		}
		lines, others := bytes.Split(outs[0], []byte("\n")), bytes.Split(outs[1], []byte("\n"))
		for i, l := range lines {
			if i >= len(others) || len(others[i]) != len(l) {
				t.Fatalf("%s: the layout depends on the value", tool)
			}
			forms = append(forms, derivedStretches(l, others[i])...)
		}
	}
	return forms
}

// derivedStretches returns, of line l, the stretch from the first to
// the last byte that differs in o, and each such stretch of its parts
// between two blanks or '|', '>', '<', when it holds six differing bytes
// or more.
func derivedStretches(l, o []byte) []string {
	var out []string
	stretch := func(lo, hi int) {
		first, last, n := -1, -1, 0
		for i := lo; i < hi; i++ {
			if l[i] != o[i] {
				if first < 0 {
					first = i
				}
				last, n = i, n+1
			}
		}
		if n >= 6 {
			out = append(out, string(l[first:last+1]))
		}
	}
	stretch(0, len(l))
	start := 0
	for i := 0; i <= len(l); i++ {
		if i == len(l) || bytes.IndexByte([]byte("|<>"), l[i]) >= 0 || i+1 < len(l) && l[i] == ' ' && l[i+1] == ' ' {
			stretch(start, i)
			start = i + 1
		}
	}
	return out
}

// secretForms is every form of v the corpus writes and then greps for:
// the encodings with their padding and the stable parts the scrubber
// matches.
func secretForms(v string) []string {
	j, _ := json.Marshal(v)
	j2, _ := json.Marshal(string(j[1 : len(j)-1])) // escaped twice: JSON in JSON
	forms := []string{
		string(j[1 : len(j)-1]), string(j2[1 : len(j2)-1]),
		base64.StdEncoding.EncodeToString([]byte(v)),
		base64.URLEncoding.EncodeToString([]byte(v)),
		base64.StdEncoding.EncodeToString([]byte("x" + v)),
		base64.StdEncoding.EncodeToString([]byte("xy" + v)),
		hex.EncodeToString([]byte(v)),
		strings.ToUpper(hex.EncodeToString([]byte(v))),
		url.QueryEscape(v), url.PathEscape(v),
	}
	return append(forms, sandbox.Encodings(v)...)
}

// hclString quotes s as an HCL string literal.
func hclString(s string) string {
	q := strconv.Quote(s)
	q = strings.ReplaceAll(q, "${", "$${")
	return strings.ReplaceAll(q, "%{", "%%{")
}

func corpusConfig(forms []string) string {
	// printf, not echo: dash's echo rewrites backslashes.
	echo := "echo start"
	for _, f := range forms {
		echo += " && printf '%s\\n' '" + f + "'"
	}
	patch := "*** Begin Patch\n*** Add File: leak.txt\n"
	for _, f := range forms {
		patch += "+" + f + "\n"
	}
	patch += "*** End Patch\n"
	write := `mkdir -p secrets && printf '%s' "$TOKEN" > secrets/key.txt && echo x > "name-$NAME.txt" && ` +
		`{ printf '\211PNG\r\n\032\n\0\0\0\rIHDR'; printf '%s' "$TOKEN"; } > img.png`
	return fmt.Sprintf(`
variable "token" {
  type      = string
  sensitive = true
}
variable "name" {
  type      = string
  sensitive = true
}
variable "long" {
  type      = string
  sensitive = true
}

provider "scripted" {
  script "leaker" {
    reply {
      call "exec_command" {
        arguments = { cmd = %s }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = %[5]s }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = %[5]s, yield_time_ms = 10000 }
      }
    }
    reply {
      call "apply_patch" {
        arguments = { input = %[2]s }
      }
    }
    reply {
      call "exec_command" {
        arguments = { cmd = %s }
      }
    }
    reply {
      call "view_image" {
        arguments = { path = "img.png" }
      }
    }
    reply { text = %s }
  }
}

provider "local" {}

manifest "ws" {
  env "TOKEN" {
    value     = var.token
    ephemeral = true
  }
  env "NAME" {
    value     = var.name
    ephemeral = true
  }
  env "LONG" {
    value     = var.long
    ephemeral = true
  }
}

sandbox "box" {
  provider         = provider.local
  manifest         = manifest.ws
  snapshot_exclude = ["secrets/"]
}

capability "shell" "default" {}
capability "filesystem" "default" {}

agent "leaker" {
  provider     = provider.scripted
  instructions = "Leak."
  sandbox      = sandbox.box
  capabilities = [capability.shell.default, capability.filesystem.default]
}

run "leak" {
  agent = agent.leaker
  input = "Go."
}

output "said" { value = run.leak.output }
`, hclString(echo), hclString(patch), hclString(write), hclString("done: "+strings.Join(forms, " ")), hclString(layoutCommand("LONG", "TOKEN")))
}

// TestSecretCorpus runs every encoding of three sensitive values through
// every path out of agentctl (tool output, apply_patch, file names,
// images, the model's text, the run output, outputs, journals, events)
// and greps every byte agentctl wrote for each of them; two of them also
// through base64, fold, xxd, hexdump and od (as a command's output and
// as a session's streamed output), grepping for each line's part of the
// value.
func TestSecretCorpus(t *testing.T) {
	dir := t.TempDir()
	long := corpusLong(false)
	var forms []string
	forms = append(forms, secretForms(corpusToken)...)
	forms = append(forms, secretForms(corpusName)...)
	forms = append(forms, secretForms(long)...)
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(corpusConfig(forms)), 0o600); err != nil {
		t.Fatal(err)
	}
	forms = append(forms, layoutForms(t, long, corpusLong(true))...)
	forms = append(forms, layoutForms(t, corpusToken, `x0M&_e!t-P)i\]q%Kt;G`)...)
	env := append(os.Environ(), "AGENTCTL_VAR_token="+corpusToken, "AGENTCTL_VAR_name="+corpusName, "AGENTCTL_VAR_long="+long, "AGENTCTL_LOG=debug")
	// run's -chdir changes this process's working directory, which the
	// temporary directory's removal would leave dangling for the tests
	// after this one: t.Chdir puts the old one back when the test ends.
	t.Chdir(dir)
	var all bytes.Buffer
	agentctl := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		code := run(append([]string{"-chdir=" + dir, "-no-color"}, args...), &out, &errb, env)
		all.Write(out.Bytes())
		all.Write(errb.Bytes())
		if code != 0 {
			t.Fatalf("agentctl %s: exit %d\n%s\n%s", strings.Join(args, " "), code, out.String(), errb.String())
		}
		return out.String() + errb.String()
	}

	human := agentctl("apply", "-auto-approve")
	// The model saw the refusal, not the image.
	if !strings.Contains(human, "contains a sensitive value") {
		t.Errorf("view_image did not refuse the image:\n%s", human)
	}
	// The snapshot warning names the files, never the value; the
	// excluded file is not in the snapshot.
	for _, want := range []string{"sandbox.box holds a sensitive value", "leak.txt", "name-(sensitive).txt", "img.png", "snapshot_exclude"} {
		if !strings.Contains(human, want) {
			t.Errorf("apply output lacks %q:\n%s", want, human)
		}
	}
	for _, line := range strings.Split(human, "\n") {
		if strings.Contains(line, "warning: the snapshot") && strings.Contains(line, "secrets/key.txt") {
			t.Errorf("an excluded file was reported: %s", line)
		}
	}
	agentctl("apply", "-auto-approve", "-json", "-replace=run.leak")
	agentctl("show", "run.leak")
	agentctl("show", "-json", "run.leak")
	agentctl("output", "-json")
	agentctl("state", "show", "run.leak")

	state := filepath.Join(dir, ".agentctl")
	files := map[string][]byte{"command output": all.Bytes()}
	err := filepath.WalkDir(state, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "workspace" && filepath.Base(filepath.Dir(filepath.Dir(p))) == "sandboxes" {
				return fs.SkipDir // the local sandbox's workspace: the agent's files
			}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if filepath.Base(filepath.Dir(p)) == "snapshots" {
			members, err := tarMembers(b)
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			if _, ok := members["secrets/key.txt"]; ok {
				t.Errorf("%s holds secrets/key.txt, which snapshot_exclude keeps out", rel)
			}
			// The workspace files the agent wrote hold the secret, as
			// the warning says: only agentctl's own writing is checked.
			return nil
		}
		files[rel] = b
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var journals, stateFiles int
	for name := range files {
		switch {
		case strings.Contains(name, "journals"+string(filepath.Separator)):
			journals++
		case strings.HasPrefix(filepath.Base(name), "state.json"):
			stateFiles++
		}
	}
	if journals == 0 || stateFiles < 2 {
		t.Fatalf("checked %d journals and %d state files (with its backup), want them all: %v", journals, stateFiles, sortedNames(files))
	}
	// The tools ran, and their layout is kept around the value: xxd's
	// and hexdump -C's last line of the long value, with its end.
	for _, want := range []string{"00000050: (sensitive)", "00000050  (sensitive)"} {
		if !bytes.Contains(all.Bytes(), []byte(want)) {
			t.Errorf("the output of the layout tools lacks %q", want)
		}
	}
	for name, b := range files {
		for _, f := range forms {
			if len(f) < sandbox.MinSensitiveLen {
				continue
			}
			if i := bytes.Index(b, []byte(f)); i >= 0 {
				lo, hi := max(0, i-60), min(len(b), i+len(f)+60)
				t.Errorf("%s holds %q: ...%s...", name, f, b[lo:hi])
			}
		}
	}
}

func tarMembers(b []byte) (map[string]bool, error) {
	tr := tar.NewReader(bytes.NewReader(b))
	m := map[string]bool{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return m, nil
		}
		if err != nil {
			return nil, err
		}
		m[strings.TrimPrefix(strings.TrimSuffix(hdr.Name, "/"), "./")] = true
	}
}

func sortedNames(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
