package config

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

func validIdent(s string) bool { return hclsyntax.ValidIdentifier(s) }

var manifestSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "root"}, {Name: "env"}},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "file", LabelNames: []string{"path"}},
		{Type: "dir", LabelNames: []string{"path"}},
		{Type: "local_file", LabelNames: []string{"path"}},
		{Type: "local_dir", LabelNames: []string{"path"}},
		{Type: "git_repo", LabelNames: []string{"path"}},
		{Type: "env", LabelNames: []string{"name"}},
		{Type: "user", LabelNames: []string{"name"}},
		{Type: "group", LabelNames: []string{"name"}},
		{Type: "s3", LabelNames: []string{"path"}},
		{Type: "r2", LabelNames: []string{"path"}},
		{Type: "s3_files", LabelNames: []string{"path"}},
		{Type: "gcs", LabelNames: []string{"path"}},
		{Type: "azure_blob", LabelNames: []string{"path"}},
		{Type: "box", LabelNames: []string{"path"}},
	},
}

var entrySchemas = map[string]*hcl.BodySchema{
	"file":       {Attributes: []hcl.AttributeSchema{{Name: "content", Required: true}, {Name: "mode"}}},
	"dir":        {},
	"local_file": {Attributes: []hcl.AttributeSchema{{Name: "source", Required: true}}},
	"local_dir":  {Attributes: []hcl.AttributeSchema{{Name: "source", Required: true}, {Name: "exclude"}}},
	"git_repo":   {Attributes: []hcl.AttributeSchema{{Name: "repo", Required: true}, {Name: "ref"}, {Name: "subpath"}}},
	"env":        {Attributes: []hcl.AttributeSchema{{Name: "value", Required: true}, {Name: "ephemeral"}}},
	"user":       {Attributes: []hcl.AttributeSchema{{Name: "uid"}}},
	"group":      {Attributes: []hcl.AttributeSchema{{Name: "gid"}, {Name: "users"}}},
}

var envNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })
var toolNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })

// checkWorkspacePath validates a workspace-relative path and returns it
// cleaned.
func checkWorkspacePath(p string) (string, error) {
	switch {
	case p == "":
		return "", fmt.Errorf("the path is empty")
	case strings.Contains(p, `\`):
		return "", fmt.Errorf("%q contains a backslash; use forward slashes", p)
	case strings.HasPrefix(p, "/"):
		return "", fmt.Errorf("%q is absolute; paths are relative to the workspace root", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%q has a \"..\" segment, which could leave the workspace", p)
		}
	}
	c := path.Clean(p)
	if c == "." {
		return "", fmt.Errorf("%q names the workspace root itself", p)
	}
	return c, nil
}

func (l *loader) decodeManifest(b *hcl.Block) {
	m := &Manifest{Name: b.Labels[0], Env: map[string]string{}, EphemeralEnv: map[string]string{}, DeclRange: b.DefRange}
	l.cfg.Manifests[m.Name] = m
	content, diags := b.Body.Content(manifestSchema)
	l.diags = append(l.diags, diags...)
	sc := scope{where: "a manifest"}
	if a, ok := content.Attributes["root"]; ok {
		if v, ok := l.eval(a.Expr, sc, nil, nil); ok && l.noSensitive(v, a.Expr.Range(), "The manifest root") {
			if s, ok := l.toString(v, a.Expr.Range(), "root"); ok {
				if !strings.HasPrefix(s, "/") || strings.Contains(s, `\`) || strings.Contains("/"+s+"/", "/../") {
					l.errorf(a.Expr.Range(), "Invalid manifest root", "root must be an absolute path inside the sandbox without \"..\", like \"/workspace\"; got %q.", s)
				} else {
					m.Root = path.Clean(s)
				}
			}
		}
	}
	envRanges := map[string]hcl.Range{}
	if a, ok := content.Attributes["env"]; ok {
		if v, ok := l.eval(a.Expr, sc, nil, nil); ok && l.noSensitive(v, a.Expr.Range(), "The env map") {
			if env, ok := l.toStringMap(v, a.Expr.Range(), "env"); ok {
				for k, val := range env {
					if !envNameRe().MatchString(k) {
						l.errorf(a.Expr.Range(), "Invalid environment variable name", "%q is not a valid environment variable name: use letters, digits and underscores, not starting with a digit.", k)
						continue
					}
					m.Env[k] = val
					envRanges[k] = a.Expr.Range()
				}
			}
		}
	}
	paths := map[string]hcl.Range{}
	var accounts []*hcl.Block
	for _, eb := range content.Blocks {
		schema := entrySchemas[eb.Type]
		if mountKinds[eb.Type] {
			schema = mountSchemas[eb.Type]
		}
		ec, diags := eb.Body.Content(schema)
		l.diags = append(l.diags, diags...)
		if diags.HasErrors() {
			continue
		}
		if eb.Type == "env" {
			l.decodeEnvBlock(m, eb, ec, envRanges)
			continue
		}
		if eb.Type == "user" || eb.Type == "group" {
			accounts = append(accounts, eb)
			continue
		}
		p, err := checkWorkspacePath(eb.Labels[0])
		if err != nil {
			l.errorf(eb.LabelRanges[0], "Invalid manifest path", "%s. Manifest entry paths are relative to the workspace root, like \"data/sales.csv\".", capitalize(err.Error()))
			continue
		}
		if prev, ok := paths[p]; ok {
			l.errorf(eb.LabelRanges[0], "Duplicate manifest entry", "The path %q is already declared at %s. Each path may appear once.", p, rangeString(prev))
			continue
		}
		paths[p] = eb.DefRange
		if mountKinds[eb.Type] {
			if mt, ok := l.decodeMount(eb, ec, p); ok {
				m.Mounts = append(m.Mounts, mt)
			}
			continue
		}
		e := ManifestEntry{Kind: eb.Type, Path: p, DeclRange: eb.DefRange}
		what := fmt.Sprintf("The %s %q", eb.Type, p)
		str := func(name string) (string, bool) {
			a, ok := ec.Attributes[name]
			if !ok {
				return "", true
			}
			v, ok := l.eval(a.Expr, sc, nil, nil)
			if !ok || !l.noSensitive(v, a.Expr.Range(), what) {
				return "", false
			}
			return l.toString(v, a.Expr.Range(), name)
		}
		ok := true
		switch eb.Type {
		case "file":
			e.Content, ok = str("content")
			if a, has := ec.Attributes["mode"]; has && ok {
				var ms string
				if ms, ok = str("mode"); ok {
					mode, err := strconv.ParseUint(ms, 8, 32)
					switch {
					case err != nil || mode > 0o7777:
						l.errorf(a.Expr.Range(), "Invalid file mode", "mode must be an octal permission string like \"0644\" or \"0755\"; got %q.", ms)
						ok = false
					case mode != 0o644 && mode != 0o755:
						// Every provider writes workspace files 0644, or
						// 0755 when executable (docs/sandbox.md): another
						// mode would be silently changed.
						l.errorf(a.Expr.Range(), "Unsupported file mode", "mode %q cannot be honoured: files in a sandbox workspace are written 0644, or 0755 when executable. Use \"0644\" or \"0755\".", ms)
						ok = false
					}
					e.Mode = uint32(mode)
				}
			}
		case "local_file", "local_dir":
			var src string
			if src, ok = str("source"); ok {
				e.Source, ok = l.checkSource(src, eb.Type, ec.Attributes["source"].Expr.Range())
			}
			if a, has := ec.Attributes["exclude"]; has && ok {
				if v, good := l.eval(a.Expr, sc, nil, nil); good && l.noSensitive(v, a.Expr.Range(), what) {
					e.Exclude, ok = l.toStringList(v, a.Expr.Range(), "exclude")
				}
			}
		case "git_repo":
			e.Repo, ok = str("repo")
			if ok && e.Repo == "" {
				l.errorf(ec.Attributes["repo"].Expr.Range(), "Invalid git repository", "repo must be \"owner/name\" (a GitHub repository) or a URL git accepts.")
			}
			e.Ref, _ = str("ref")
			if sp, good := str("subpath"); good && sp != "" {
				c, err := checkWorkspacePath(sp)
				if err != nil {
					l.errorf(ec.Attributes["subpath"].Expr.Range(), "Invalid subpath", "%s. subpath is a path inside the repository.", capitalize(err.Error()))
				}
				e.Subpath = c
			}
		}
		if ok {
			m.Entries = append(m.Entries, e)
		}
	}
	l.checkMountPaths(m)
	l.decodeAccounts(m, accounts)
}

func (l *loader) decodeEnvBlock(m *Manifest, eb *hcl.Block, ec *hcl.BodyContent, envRanges map[string]hcl.Range) {
	name := eb.Labels[0]
	if !envNameRe().MatchString(name) {
		l.errorf(eb.LabelRanges[0], "Invalid environment variable name", "%q is not a valid environment variable name: use letters, digits and underscores, not starting with a digit.", name)
		return
	}
	if prev, ok := envRanges[name]; ok {
		l.errorf(eb.LabelRanges[0], "Duplicate environment variable", "%s is already set at %s.", name, rangeString(prev))
		return
	}
	envRanges[name] = eb.DefRange
	ephemeral := false
	if a, ok := ec.Attributes["ephemeral"]; ok {
		if v, ok := l.eval(a.Expr, scope{where: "a manifest"}, nil, nil); ok {
			ephemeral, _ = l.toBool(v, a.Expr.Range(), "ephemeral")
		}
	}
	a := ec.Attributes["value"]
	v, ok := l.eval(a.Expr, scope{where: "a manifest"}, nil, nil)
	if !ok {
		return
	}
	if !ephemeral && !l.noSensitive(v, a.Expr.Range(), fmt.Sprintf("The non-ephemeral env entry %s (add ephemeral = true to inject it without persisting it)", name)) {
		return
	}
	s, ok := l.toString(v, a.Expr.Range(), "value")
	if !ok {
		return
	}
	if ephemeral {
		if v.ContainsMarked() {
			l.col.add(s)
		}
		m.EphemeralEnv[name] = s
	} else {
		m.Env[name] = s
	}
}

// checkSource resolves a local_file/local_dir source against the
// configuration directory; it must stay inside it and not be a symlink.
func (l *loader) checkSource(src, kind string, rng hcl.Range) (string, bool) {
	if src == "" {
		l.errorf(rng, "Invalid source", "source must name a path relative to the configuration directory.")
		return "", false
	}
	abs := src
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(l.cfg.Dir, src)
	}
	abs = filepath.Clean(abs)
	rel, err := filepath.Rel(l.cfg.Dir, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		l.errorf(rng, "Source outside the configuration directory",
			"%q resolves to %s, outside the configuration directory %s. Move the files into the configuration directory.", src, abs, l.cfg.Dir)
		return "", false
	}
	// Every component from the configuration directory down must be a
	// real directory or file, never a symlink.
	cur := l.cfg.Dir
	if rel != "." {
		for _, part := range strings.Split(rel, string(filepath.Separator)) {
			cur = filepath.Join(cur, part)
			fi, err := os.Lstat(cur)
			if err != nil {
				l.errorf(rng, "Source not found", "%q does not exist (looked for %s). Fix the path; it is relative to the configuration directory.", src, cur)
				return "", false
			}
			if fi.Mode()&os.ModeSymlink != 0 {
				l.errorf(rng, "Source is a symlink", "%s is a symbolic link. Sources must be regular files and directories inside the configuration directory; copy the target instead.", cur)
				return "", false
			}
		}
	}
	fi, err := os.Stat(abs)
	if err != nil {
		l.errorf(rng, "Source not found", "%q does not exist.", src)
		return "", false
	}
	if kind == "local_file" && !fi.Mode().IsRegular() {
		l.errorf(rng, "Source is not a file", "%q is not a regular file; use local_dir for directories.", src)
		return "", false
	}
	if kind == "local_dir" && !fi.IsDir() {
		l.errorf(rng, "Source is not a directory", "%q is not a directory; use local_file for single files.", src)
		return "", false
	}
	return abs, true
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
