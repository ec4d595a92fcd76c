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
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/sandbox"
)

// The secret corpus: two sensitive variables, one with every character
// an encoding treats specially, one that ends up in a file name.
const (
	corpusToken = `S3cr3t/T0k+en"x&y?z=`
	corpusName  = "FileNam3Secret"
)

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
	echo := "echo start"
	for _, f := range forms {
		echo += " && echo '" + f + "'"
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

provider "scripted" {
  script "leaker" {
    reply {
      call "exec_command" {
        arguments = { cmd = %s }
      }
    }
    reply {
      call "apply_patch" {
        arguments = { input = %s }
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
`, hclString(echo), hclString(patch), hclString(write), hclString("done: "+strings.Join(forms, " ")))
}

// TestSecretCorpus runs every encoding of two sensitive values through
// every path out of agentctl (tool output, apply_patch, file names,
// images, the model's text, the run output, outputs, journals, events)
// and greps every byte agentctl wrote for each of them.
func TestSecretCorpus(t *testing.T) {
	dir := t.TempDir()
	var forms []string
	forms = append(forms, secretForms(corpusToken)...)
	forms = append(forms, secretForms(corpusName)...)
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(corpusConfig(forms)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "AGENTCTL_VAR_token="+corpusToken, "AGENTCTL_VAR_name="+corpusName, "AGENTCTL_LOG=debug")
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
