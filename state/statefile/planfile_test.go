package statefile

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentctl/agentctl/internal/seal"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/statetest"
)

func TestPlanFileRoundTripAndStaleness(t *testing.T) {
	var f memFile
	s := statetest.Sample()
	f.write(t, s)
	path := filepath.Join(t.TempDir(), "tfplan")
	p := PlanFile{
		AgentctlVersion: "1.0.0", Lineage: s.Lineage, Serial: s.Serial,
		ConfigDir: "/src/pipeline", ConfigDigest: "sha256:abc",
		Vars: map[string]json.RawMessage{"region": json.RawMessage(`"eu"`)},
		Plan: json.RawMessage(`{"actions":[{"addr":"run.a","action":"execute"}]}`),
	}
	if err := WritePlanFile(path, p, nil); err != nil {
		t.Fatal(err)
	}
	got, err := ReadPlanFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	p.Kind, p.FormatVersion = "agentctl-plan", PlanFormatVersion
	if diff := cmp.Diff(&p, got); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("plan file mode %v", fi.Mode().Perm())
	}

	cur := f.read(t)
	if err := got.CheckFresh(cur); err != nil {
		t.Fatalf("fresh plan refused: %v", err)
	}
	// Any change to state makes the plan stale.
	f.write(t, cur)
	cur = f.read(t)
	err = got.CheckFresh(cur)
	var se *StalePlanError
	if !errors.As(err, &se) || !strings.HasPrefix(err.Error(), "saved plan is stale") || !strings.Contains(err.Error(), "serial 1 then, 2 now") {
		t.Fatalf("stale serial: %v", err)
	}
	// A different state with the same serial is stale too.
	other := state.New()
	other.Serial = got.Serial
	if err := got.CheckFresh(other); err == nil || !strings.HasPrefix(err.Error(), "saved plan is stale") || !strings.Contains(err.Error(), "different state") {
		t.Fatalf("stale lineage: %v", err)
	}
}

func TestPlanFileAgainstEmptyState(t *testing.T) {
	var f memFile
	planned := f.read(t) // nothing written yet: a made-up lineage
	p := &PlanFile{Lineage: planned.Lineage, Serial: planned.Serial}
	applied := f.read(t)
	if err := p.CheckFresh(applied); err != nil {
		t.Fatalf("plan against an empty state refused: %v", err)
	}
	if applied.Lineage != planned.Lineage {
		t.Fatal("CheckFresh did not adopt the plan's lineage")
	}
	// Once something is written, a plan made against the empty state is stale.
	f.write(t, applied)
	cur := f.read(t)
	if err := p.CheckFresh(cur); err == nil {
		t.Fatal("plan made against an empty state accepted after a write")
	}
}

func TestReadPlanFileRefusals(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct{ content, want string }{
		"state file": {`{"format_version":1,"lineage":"l","serial":1}`, "is not an agentctl saved plan"},
		"hcl":        {"run \"a\" {}\n", "is not an agentctl saved plan"},
		"newer":      {`{"kind":"agentctl-plan","format_version":3,"lineage":"l"}`, "saved plan was written by a newer agentctl (format 3)"},
		"truncated":  {`{"kind":"agentctl-plan","format_version":1,"lineage":"l","plan":{`, "not valid JSON"},
		"no lineage": {`{"kind":"agentctl-plan","format_version":1}`, "no state lineage"},
	}
	for name, c := range cases {
		path := filepath.Join(dir, name)
		os.WriteFile(path, []byte(c.content), 0o600)
		_, err := ReadPlanFile(path, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if _, err := ReadPlanFile(filepath.Join(dir, "missing"), nil); err == nil || !strings.Contains(err.Error(), "plan -out") {
		t.Errorf("missing: %v", err)
	}
}

func TestEncryptedPlanFile(t *testing.T) {
	keys := testKeys(t, false)
	path := filepath.Join(t.TempDir(), "tfplan")
	p := PlanFile{
		Lineage: "l-1", Serial: 3, ConfigDir: "/src/pipeline",
		Plan: json.RawMessage(`{"actions":[{"addr":"run.a","output":"` + canary + `"}]}`),
	}
	if err := WritePlanFile(path, p, keys); err != nil {
		t.Fatal(err)
	}
	data := readFile(t, path)
	if strings.Contains(string(data), canary) {
		t.Fatalf("the encrypted plan holds the plan in clear:\n%s", data)
	}
	if head, ok := ReadPlanHead(path); !ok || !head.Encrypted || head.ConfigDir != p.ConfigDir {
		t.Fatalf("head %+v, %v", head, ok)
	}
	got, err := ReadPlanFile(path, keys)
	if err != nil || !got.Encrypted || string(got.Plan) != string(p.Plan) || got.Lineage != "l-1" {
		t.Fatalf("read back %+v, %v", got, err)
	}
	// decrypt = true still reads it.
	if _, err := ReadPlanFile(path, seal.NewKeys(keys.Key(), true)); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		keys *seal.Keys
		want error
	}{"no key": {nil, seal.ErrNoKey}, "another key": {testKeys(t, false), seal.ErrWrongKey}} {
		if _, err := ReadPlanFile(path, c.keys); !errors.Is(err, c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Another configuration directory written in clear does not
	// authenticate, nor does an altered plan.
	var f sealedPlanFile
	json.Unmarshal(data, &f)
	f.ConfigDir = "/src/other"
	moved, _ := json.Marshal(f)
	env, _ := seal.DecodeText([]byte(f.Data))
	env[len(env)-3] ^= 1
	f.ConfigDir, f.Data = p.ConfigDir, string(seal.EncodeText(env))
	altered, _ := json.Marshal(f)
	for name, data := range map[string][]byte{"moved": moved, "altered": altered} {
		os.WriteFile(path, data, 0o600)
		if _, err := ReadPlanFile(path, keys); !errors.Is(err, seal.ErrDamaged) || !strings.Contains(err.Error(), "plan -out again") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// An unencrypted plan is refused when the configuration encrypts.
	if err := WritePlanFile(path, p, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPlanFile(path, keys); err == nil || !strings.Contains(err.Error(), "is not encrypted") {
		t.Errorf("unencrypted plan: %v", err)
	}
	if _, err := ReadPlanFile(path, seal.NewKeys(keys.Key(), true)); err != nil {
		t.Errorf("unencrypted plan with decrypt = true: %v", err)
	}
}
