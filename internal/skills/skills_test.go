package skills

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFrontMatter(t *testing.T) {
	cases := []struct{ md, name, desc, err string }{
		{"---\nname: a\ndescription: does a\n---\nbody", "a", "does a", ""},
		{"\ufeff---\r\nname: a\r\ndescription: \"quoted: yes\"\r\n---\r\n", "a", "quoted: yes", ""},
		{"---\nname: a\ndescription: |\n  two\n  lines\n---\n", "a", "two\nlines", ""},
		{"# no front matter\n", "", "", "no front matter"},
		{"---\nname: a\ndescription: x\n", "", "", "no closing"},
		{"---\ndescription: x\n---\n", "", "", "no name"},
		{"---\nname: a\n---\n", "", "", "no description"},
		{"---\nname: [a\n---\n", "", "", "not YAML"},
	}
	for _, c := range cases {
		name, desc, err := FrontMatter([]byte(c.md))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want %q", c.md, err, c.err)
			}
			continue
		}
		if err != nil || name != c.name || desc != c.desc {
			t.Errorf("%q: %q %q %v", c.md, name, desc, err)
		}
	}
}

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(root, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, map[string]string{
		"b/SKILL.md":       "---\nname: beta\ndescription: B\n---\n",
		"a/SKILL.md":       "---\nname: alpha\ndescription: A\n---\n",
		"a/scripts/run.sh": "echo",
		"README.md":        "not a skill",
		".git/config":      "ignored",
	})
	list, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Name != "alpha" || list[1].Name != "beta" || string(list[0].Files["scripts/run.sh"]) != "echo" {
		t.Fatalf("skills %+v", list)
	}
	d := list[0].Digest()
	write(t, dir, map[string]string{"a/scripts/run.sh": "echo 2"})
	list2, _ := Load(dir)
	if list2[0].Digest() == d {
		t.Error("the digest does not cover the files")
	}

	for name, files := range map[string]map[string]string{
		`skill folder "c": no SKILL.md`:                     {"c/notes.md": "x"},
		`skill folder "d": SKILL.md: no front matter`:       {"d/SKILL.md": "# D\n"},
		`names the skill "alpha", as the one in folder "a"`: {"e/SKILL.md": "---\nname: alpha\ndescription: again\n---\n"},
		`name "../up" is not a usable skill name`:           {"f/SKILL.md": "---\nname: ../up\ndescription: x\n---\n"},
		`the skills directory holds no skill`:               nil,
	} {
		d := t.TempDir()
		if files != nil {
			write(t, d, map[string]string{"a/SKILL.md": "---\nname: alpha\ndescription: A\n---\n"})
			write(t, d, files)
		}
		if _, err := Load(d); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("want an error containing %q, got %v", name, err)
		}
	}
}
