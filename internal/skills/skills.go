// Package skills reads Agent Skills from a directory: a folder per skill
// holding a SKILL.md whose YAML front matter (between "---" lines) gives
// the skill's name and description; the folder's other files are the
// skill's scripts, references and assets.
package skills

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"

	"go.yaml.in/yaml/v3"
)

// Limits on what a skills directory may hold, so a wrong source (a home
// directory) is an error rather than a copy of everything.
const (
	MaxFiles      = 2000
	MaxTotalBytes = 32 << 20
)

// Skill is one skill of a directory.
type Skill struct {
	Name        string
	Description string
	// Folder is the skill's folder name in the directory.
	Folder string
	// Files are the folder's regular files by slash-separated path
	// relative to the folder, SKILL.md included; Modes their permissions.
	Files map[string][]byte
	Modes map[string]fs.FileMode
}

// Problem is a skills directory that cannot be used, naming the folder.
type Problem struct {
	Folder string
	Msg    string
}

func (p *Problem) Error() string {
	if p.Folder == "" {
		return p.Msg
	}
	return fmt.Sprintf("skill folder %q: %s", p.Folder, p.Msg)
}

var safeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`) })

// Load reads every skill of dir, sorted by name. Hidden entries (".git")
// and files at the top level are skipped; a folder without SKILL.md, a
// SKILL.md without front matter, name or description, a name that is not
// a safe folder name, and two skills with one name are errors.
func Load(dir string) ([]Skill, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, &Problem{Msg: fmt.Sprintf("reading the skills directory: %v", err)}
	}
	var out []Skill
	byName := map[string]string{}
	files, total := 0, int64(0)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.IsDir() {
			continue
		}
		s, err := loadSkill(filepath.Join(dir, e.Name()), e.Name(), &files, &total)
		if err != nil {
			return nil, err
		}
		if prev, ok := byName[s.Name]; ok {
			return nil, &Problem{Folder: e.Name(), Msg: fmt.Sprintf("its SKILL.md names the skill %q, as the one in folder %q does; skill names must be unique", s.Name, prev)}
		}
		byName[s.Name] = e.Name()
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, &Problem{Msg: "the skills directory holds no skill: put each skill in a folder of its own with a SKILL.md"}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func loadSkill(dir, folder string, files *int, total *int64) (Skill, error) {
	s := Skill{Folder: folder, Files: map[string][]byte{}, Modes: map[string]fs.FileMode{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symlink; skills hold regular files only", rel)
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file", rel)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		*files++
		*total += info.Size()
		if *files > MaxFiles || *total > MaxTotalBytes {
			return fmt.Errorf("the skills hold more than %d files or %d MiB; point source at a directory of skills only", MaxFiles, MaxTotalBytes>>20)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		s.Files[rel] = b
		s.Modes[rel] = info.Mode().Perm()
		return nil
	})
	if err != nil {
		return s, &Problem{Folder: folder, Msg: err.Error()}
	}
	md, ok := s.Files["SKILL.md"]
	if !ok {
		return s, &Problem{Folder: folder, Msg: "no SKILL.md: a skill is a folder with a SKILL.md whose front matter has name and description"}
	}
	name, desc, err := FrontMatter(md)
	if err != nil {
		return s, &Problem{Folder: folder, Msg: "SKILL.md: " + err.Error()}
	}
	if !safeName().MatchString(name) {
		return s, &Problem{Folder: folder, Msg: fmt.Sprintf("SKILL.md: name %q is not a usable skill name: use up to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)}
	}
	s.Name, s.Description = name, desc
	return s, nil
}

// FrontMatter reads name and description from a SKILL.md's YAML front
// matter.
func FrontMatter(md []byte) (name, description string, err error) {
	md = bytes.TrimPrefix(md, []byte("\ufeff"))
	text := strings.ReplaceAll(string(md), "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") {
		return "", "", errors.New("no front matter: start the file with a line \"---\", then name: and description:, then \"---\"")
	}
	body, _, found := strings.Cut(text[4:], "\n---")
	if !found {
		return "", "", errors.New("the front matter has no closing \"---\" line")
	}
	var fm struct {
		Name        any `yaml:"name"`
		Description any `yaml:"description"`
	}
	if err := yaml.Unmarshal([]byte(body), &fm); err != nil {
		return "", "", fmt.Errorf("the front matter is not YAML: %v", err)
	}
	name, _ = fm.Name.(string)
	description, _ = fm.Description.(string)
	name, description = strings.TrimSpace(name), strings.TrimSpace(description)
	switch {
	case name == "":
		return "", "", errors.New("the front matter has no name (a string)")
	case description == "":
		return "", "", errors.New("the front matter has no description (a string)")
	}
	return name, description, nil
}

// Digest is the hex SHA-256 of a skill's name, description and files
// (paths, modes and contents).
func (s Skill) Digest() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", s.Name, s.Description)
	paths := make([]string, 0, len(s.Files))
	for p := range s.Files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00", p, s.Modes[p], len(s.Files[p]))
		h.Write(s.Files[p])
	}
	return hex.EncodeToString(h.Sum(nil))
}
