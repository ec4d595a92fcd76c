package e2bfake

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// team is the fake team's namespace in snapshot names.
const team = "fake-team"

// snapshot is a persistent snapshot: a template holding copies of what
// the sandbox had created under Root.
type snapshot struct {
	name string
	dir  string
	tops []string
}

func (sn *snapshot) info() map[string]any {
	id := team + "/" + sn.name + ":default"
	return map[string]any{"snapshotID": id, "names": []string{id}}
}

// Snapshots returns the names of the snapshots, sorted.
func (s *Server) Snapshots() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for n := range s.snapshots {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// snapshot copies what b created under Root into a new template; callers
// hold s.mu.
func (s *Server) snapshot(w http.ResponseWriter, b *fsb, in map[string]any) {
	name, _ := in["name"].(string)
	if name == "" {
		s.seq++
		name = fmt.Sprintf("snapshot-%d", s.seq)
	}
	dir, err := os.MkdirTemp(s.internal, "snapshot-")
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err.Error())
		return
	}
	sn := &snapshot{name: name, dir: dir}
	for top := range b.owned {
		src := filepath.Join(s.Root, top)
		if _, err := os.Lstat(src); err != nil {
			continue
		}
		if out, err := exec.Command("cp", "-a", src, filepath.Join(dir, top)).CombinedOutput(); err != nil {
			writeErr(w, http.StatusInternalServerError, fmt.Sprintf("snapshot: %v: %s", err, out))
			return
		}
		sn.tops = append(sn.tops, top)
	}
	if old := s.snapshots[name]; old != nil {
		os.RemoveAll(old.dir)
	}
	s.snapshots[name] = sn
	s.Templates[name] = true
	writeJSON(w, http.StatusCreated, sn.info())
}

// restoreFiles gives a sandbox created from a snapshot its files; callers
// hold s.mu.
func (s *Server) restoreFiles(b *fsb, sn *snapshot) {
	for _, top := range sn.tops {
		dst := filepath.Join(s.Root, top)
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		if out, err := exec.Command("cp", "-a", filepath.Join(sn.dir, top), dst).CombinedOutput(); err != nil {
			s.violations.Add("restoring snapshot %s: %v: %s", sn.name, err, out)
			continue
		}
		b.owned[top] = true
	}
}

func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request) {
	want := r.URL.Query().Get("name")
	out := []any{}
	var names []string
	for n := range s.snapshots {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		sn := s.snapshots[n]
		id := sn.info()["snapshotID"].(string)
		if want == "" || want == n || want == id || want == team+"/"+n || strings.TrimSuffix(want, ":default") == n {
			out = append(out, sn.info())
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteTemplate(w http.ResponseWriter, id string) {
	name := strings.TrimSuffix(strings.TrimPrefix(id, team+"/"), ":default")
	sn := s.snapshots[name]
	if sn == nil {
		writeErr(w, http.StatusNotFound, fmt.Sprintf("template '%s' not found", id))
		return
	}
	os.RemoveAll(sn.dir)
	delete(s.snapshots, name)
	delete(s.Templates, name)
	w.WriteHeader(http.StatusNoContent)
}
