package local

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/internal/digest"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/statetest"
)

func openTestDir(t *testing.T, opts ...Option) *Dir {
	t.Helper()
	d, err := OpenDir(filepath.Join(t.TempDir(), ".agentctl"), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestReadCreatesNothing: reading a state directory that does not exist
// (what the suite's "empty store" reads) leaves it so.
func TestReadCreatesNothing(t *testing.T) {
	d := openTestDir(t)
	if _, err := d.Read(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.Path()); !os.IsNotExist(err) {
		t.Fatalf("Read created the state directory: %v", err)
	}
}

// TestStateFileAndDirectory: the state file is the documented JSON,
// private, and the directory holds it, its backup and a .gitignore.
func TestStateFileAndDirectory(t *testing.T) {
	d := openTestDir(t, WithAgentctlVersion("1.2.3"))
	s := statetest.Sample()
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if s.Serial != 1 {
		t.Fatalf("serial after first write = %d, want 1", s.Serial)
	}
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	got, err := d.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got.Serial != 2 || got.AgentctlVersion != "1.2.3" || got.Lineage != s.Lineage {
		t.Fatalf("serial %d version %q lineage %q", got.Serial, got.AgentctlVersion, got.Lineage)
	}
	// The file is the documented JSON with snake_case keys.
	data, _ := os.ReadFile(d.StateFile())
	for _, key := range []string{`"format_version": 2`, `"digest_algorithm": "blake3"`, `"serial": 2`, `"lineage"`, `"manifest_digest"`, `"digest_inputs"`, `"git_commit"`, `"input_tokens": 100`, `"sensitive": true`} {
		if !strings.Contains(string(data), key) {
			t.Errorf("state.json lacks %s:\n%s", key, data)
		}
	}
	// No temporary files are left behind, the previous state is the
	// backup, and the directory ignores itself.
	entries, _ := os.ReadDir(d.Path())
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{".gitignore", "state.json", "state.json.backup"}, names); diff != "" {
		t.Errorf("state dir entries (-want +got):\n%s", diff)
	}
	if fi, _ := os.Stat(d.StateFile()); fi.Mode().Perm() != 0o600 {
		t.Errorf("state.json mode = %v, want 0600", fi.Mode().Perm())
	}
}

func TestWriteFailureKeepsSerialAndFile(t *testing.T) {
	d := openTestDir(t)
	s := statetest.Sample()
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(d.StateFile())
	s.Runs[`run.review["pricing"]`].Output = json.RawMessage(`{not json`)
	if err := d.Write(context.Background(), s); err == nil {
		t.Fatal("Write of an invalid output succeeded")
	}
	if s.Serial != 1 {
		t.Fatalf("serial after failed write = %d, want 1", s.Serial)
	}
	after, _ := os.ReadFile(d.StateFile())
	if string(before) != string(after) {
		t.Fatal("failed write changed state.json")
	}
}

func TestStateFileOverride(t *testing.T) {
	tmp := t.TempDir()
	sf := filepath.Join(tmp, "elsewhere", "prod.json")
	d, err := OpenDir(filepath.Join(tmp, ".agentctl"), WithStateFile(sf))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Write(context.Background(), statetest.Sample()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sf); err != nil {
		t.Fatalf("state not written to the -state path: %v", err)
	}
	if _, err := os.Stat(filepath.Join(tmp, ".agentctl", "state.json")); !os.IsNotExist(err) {
		t.Fatal("state.json written in the directory despite -state")
	}
	if got := d.JournalPath("run.a"); !strings.HasPrefix(got, filepath.Join(tmp, ".agentctl", "journals")+string(filepath.Separator)) {
		t.Fatalf("journal path %s is not in the state directory", got)
	}
	s, err := d.Read(context.Background())
	if err != nil || s.Serial != 1 {
		t.Fatalf("read back: %v serial %d", err, s.Serial)
	}
}

func TestReadNewerFormatRefused(t *testing.T) {
	d := openTestDir(t)
	os.MkdirAll(d.Path(), 0o755)
	os.WriteFile(d.StateFile(), []byte(`{"format_version": 7, "serial": 3, "lineage": "x", "runs": []}`), 0o600)
	_, err := d.Read(context.Background())
	var nf *state.NewerFormatError
	if !errors.As(err, &nf) || nf.Format != 7 {
		t.Fatalf("err = %v, want NewerFormatError", err)
	}
	if !strings.Contains(err.Error(), "state was written by a newer agentctl (format 7); upgrade agentctl") {
		t.Fatalf("message: %v", err)
	}
}

// TestDigestAlgorithmFormats: a new state records BLAKE3 content digests
// and is written as format 2, which earlier versions refuse; a state
// created before (format 1, no digest_algorithm) keeps SHA-256 and is
// written as format 1 again; an algorithm this version does not know,
// or BLAKE3 in a format 1 file, is refused with what to do.
func TestDigestAlgorithmFormats(t *testing.T) {
	if s := state.New(); s.Digests() != digest.BLAKE3 || s.WrittenFormat() != 2 {
		t.Fatalf("new state: digests %q, format %d", s.Digests(), s.WrittenFormat())
	}
	d := openTestDir(t)
	os.MkdirAll(d.Path(), 0o755)
	os.WriteFile(d.StateFile(), []byte(`{"format_version": 1, "serial": 3, "lineage": "x"}`), 0o600)
	s, err := d.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Digests() != digest.SHA256 {
		t.Fatalf("a format 1 state's digests are %q, want sha256", s.Digests())
	}
	if err := d.Write(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(d.StateFile())
	if !strings.Contains(string(data), `"format_version": 1,`) || strings.Contains(string(data), "digest_algorithm") {
		t.Errorf("a SHA-256 state was not written as format 1:\n%s", data)
	}
	for _, c := range []struct{ content, want string }{
		{`{"format_version": 2, "serial": 3, "lineage": "x", "digest_algorithm": "blake9"}`, `digest_algorithm "blake9" is not one this agentctl knows (blake3, sha256); upgrade agentctl`},
		{`{"format_version": 1, "serial": 3, "lineage": "x", "digest_algorithm": "blake3"}`, `digest_algorithm "blake3" needs format_version 2, the file has 1`},
	} {
		os.WriteFile(d.StateFile(), []byte(c.content), 0o600)
		if _, err := d.Read(context.Background()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.content, err, c.want)
		}
	}
}

func TestReadDamagedStateErrors(t *testing.T) {
	cases := []struct {
		name, content string
		want          []string
	}{
		{"truncated", "{\n  \"format_version\": 1,\n  \"serial\": 3,\n  \"lin", []string{"line 4", "not valid JSON", "byte offset"}},
		{"garbage in the middle", "{\n  \"format_version\": 1,\n  \"serial\": x3\n}", []string{"line 3, column 14", "not valid JSON"}},
		{"empty", "", []string{"is empty"}},
		{"wrong type", "{\"format_version\": 1, \"lineage\": \"l\", \"serial\": \"3\"}", []string{"string where a uint64 is expected", "serial"}},
		{"not an object", "[1,2]", []string{"array where a"}},
		{"no format version", "{\"serial\": 1}", []string{"not an agentctl state file"}},
		{"no lineage", "{\"format_version\": 1}", []string{"no lineage"}},
		{"null run", "{\"format_version\": 1, \"lineage\": \"l\", \"runs\": {\"run.a\": null}}", []string{`runs["run.a"] is null`}},
		{"address mismatch", "{\"format_version\": 1, \"lineage\": \"l\", \"runs\": {\"run.a\": {\"address\": \"run.b\"}}}", []string{"must match"}},
		{"format zero", "{\"format_version\": 0, \"lineage\": \"l\"}", []string{"unsupported state format_version 0"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := openTestDir(t)
			os.MkdirAll(d.Path(), 0o755)
			os.WriteFile(d.StateFile(), []byte(c.content), 0o600)
			_, err := d.Read(context.Background())
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, d.StateFile()) {
				t.Errorf("error does not name the file: %v", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestReadFillsAddressesAndMaps(t *testing.T) {
	d := openTestDir(t)
	os.MkdirAll(d.Path(), 0o755)
	os.WriteFile(d.StateFile(), []byte(`{"format_version":1,"lineage":"l","serial":4,"runs":{"run.a":{"status":"completed"}}}`), 0o600)
	s, err := d.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s.Runs["run.a"].Address != "run.a" || s.Sandboxes == nil || s.Outputs == nil {
		t.Fatalf("state: %+v", s)
	}
	if got := s.RunAddresses(); len(got) != 1 || got[0] != "run.a" {
		t.Fatalf("RunAddresses = %v", got)
	}
}

func TestOpenDirRejectsFile(t *testing.T) {
	f := filepath.Join(t.TempDir(), "file")
	os.WriteFile(f, nil, 0o644)
	if _, err := OpenDir(f); err == nil || !strings.Contains(err.Error(), "is a file") {
		t.Fatalf("err = %v", err)
	}
}
