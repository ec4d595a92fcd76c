package sandbox

import (
	"fmt"
	"path"
	"strings"
)

// Matcher matches workspace-relative paths against gitignore-like
// patterns, as used by local_dir's exclude and snapshot exclusions:
//
//   - a pattern without a slash ("node_modules", "*.tmp") matches an
//     entry with that name at any depth;
//   - a pattern with a slash ("build/out", "/dist") is anchored at the
//     top of the tree; a leading slash is optional;
//   - a trailing slash ("cache/") matches directories only;
//   - "*", "?" and "[...]" match within one path element (path.Match);
//     a "**" element matches any number of elements ("**/test", "a/**/b",
//     "logs/**");
//   - a leading "!" re-includes what an earlier pattern excluded (the last
//     matching pattern wins); "#" starts a comment line.
//
// An excluded directory excludes everything below it.
type Matcher struct {
	rules []matchRule
}

type matchRule struct {
	segs     []string
	anchored bool
	dirOnly  bool
	negate   bool
}

// CompileExclude parses patterns; a malformed pattern is an error naming it.
func CompileExclude(patterns []string) (*Matcher, error) {
	m := &Matcher{}
	for _, raw := range patterns {
		p := strings.TrimSpace(raw)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		var r matchRule
		if strings.HasPrefix(p, "!") {
			r.negate, p = true, p[1:]
		}
		if strings.HasSuffix(p, "/") {
			r.dirOnly, p = true, strings.TrimRight(p, "/")
		}
		if strings.Contains(p, "/") {
			r.anchored = true
			p = strings.TrimLeft(p, "/")
		}
		if p == "" {
			return nil, fmt.Errorf("exclude pattern %q matches nothing; remove it", raw)
		}
		r.segs = strings.Split(p, "/")
		for _, s := range r.segs {
			if s == "**" {
				continue
			}
			if _, err := path.Match(s, ""); err != nil {
				return nil, fmt.Errorf("exclude pattern %q: %v; escape special characters with a backslash", raw, err)
			}
		}
		m.rules = append(m.rules, r)
	}
	return m, nil
}

// Match reports whether rel (slash-separated, relative to the tree's top)
// is excluded. A nil Matcher excludes nothing.
func (m *Matcher) Match(rel string, isDir bool) bool {
	if m == nil || len(m.rules) == 0 {
		return false
	}
	segs := strings.Split(rel, "/")
	excluded := false
	for _, r := range m.rules {
		if r.dirOnly && !isDir {
			continue
		}
		var ok bool
		if r.anchored {
			ok = matchSegs(r.segs, segs)
		} else {
			ok = matchSegs(r.segs, segs[len(segs)-1:])
		}
		if ok {
			excluded = !r.negate
		}
	}
	return excluded
}

func matchSegs(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			for i := 0; i <= len(segs); i++ {
				if matchSegs(rest, segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}
