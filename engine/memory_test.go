package engine

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/providers/scripted"
	"github.com/agentctl/agentctl/sandbox"
	"github.com/agentctl/agentctl/state/local"
)

// The "memory" provider type keeps its sandboxes' workspaces in memory:
// engine tests plan and apply with it without a container engine, a
// network or the host's file system.

// memSettings are a memory sandbox's own arguments.
type memSettings struct {
	Greeting string `hcl:"greeting,optional" json:"greeting,omitempty"`
}

// memProvider creates memory sandboxes and records the specs it got.
type memProvider struct {
	// stopDiscards makes Stop lose the workspace (sandbox.StopDiscarder),
	// as a Kubernetes Pod without a volume claim does.
	stopDiscards bool

	mu      sync.Mutex
	next    int
	boxes   map[string]*memSandbox
	created []sandbox.Spec
}

func memType(p *memProvider) *registry.Type {
	schema, _ := gohcl.ImpliedBodySchema(&memSettings{})
	return &registry.Type{
		Name: "memory", Role: registry.RoleSandbox, DefaultNetwork: "none", SandboxSchema: schema,
		DecodeProvider: func(body hcl.Body) (any, hcl.Diagnostics) {
			_, diags := body.Content(&hcl.BodySchema{})
			return struct{}{}, diags
		},
		DecodeSandbox: func(args *registry.SandboxArgs) (any, hcl.Diagnostics) {
			s := &memSettings{}
			content, diags := args.Body.Content(schema)
			if registry.Attr(content.Attributes, "greeting", &s.Greeting, &diags) && s.Greeting == "" {
				diags = append(diags, registry.Errorf(content.Attributes["greeting"].Expr.Range(), "Invalid greeting", "greeting must not be empty."))
			}
			return s, diags
		},
		NewSandbox: func(context.Context, any, registry.Env) (sandbox.Provider, error) { return p, nil },
	}
}

func (p *memProvider) Kind() string { return "memory" }

func (p *memProvider) Create(_ context.Context, spec sandbox.Spec) (sandbox.Sandbox, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := spec.Settings.(*memSettings); !ok {
		return nil, fmt.Errorf("memory: settings are %T", spec.Settings)
	}
	p.next++
	sb := &memSandbox{id: fmt.Sprintf("mem-%d", p.next), files: map[string]*memFile{}, status: sandbox.StatusRunning, stopDiscards: p.stopDiscards}
	if p.boxes == nil {
		p.boxes = map[string]*memSandbox{}
	}
	p.boxes[sb.id] = sb
	p.created = append(p.created, spec)
	return sb, nil
}

func (p *memProvider) Open(_ context.Context, _ sandbox.Spec, ss sandbox.SessionState) (sandbox.Sandbox, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if sb, ok := p.boxes[ss.ID]; ok && sb.status != sandbox.StatusMissing {
		return sb, nil
	}
	return nil, fmt.Errorf("memory sandbox %s: %w", ss.ID, sandbox.ErrNotFound)
}

type memFile struct {
	data []byte
	mode fs.FileMode
}

// memSandbox is a workspace held in a map of workspace-relative paths.
type memSandbox struct {
	mu           sync.Mutex
	id           string
	status       sandbox.Status
	files        map[string]*memFile
	stopDiscards bool
	discarded    map[string]*memFile // what the last discarding Stop lost
	copyOutErr   error               // CopyOut fails with it (a sandbox that cannot be read)
}

func (s *memSandbox) ID() string { return s.id }
func (s *memSandbox) Session() sandbox.SessionState {
	return sandbox.SessionState{Provider: "memory", ID: s.id}
}
func (s *memSandbox) Start(context.Context) error { s.set(sandbox.StatusRunning); return nil }
func (s *memSandbox) Stop(context.Context) error {
	if s.stopDiscards {
		s.mu.Lock()
		s.discarded, s.files = s.files, map[string]*memFile{}
		s.mu.Unlock()
		s.set(sandbox.StatusMissing)
		return nil
	}
	s.set(sandbox.StatusStopped)
	return nil
}
func (s *memSandbox) StopDiscardsWorkspace() bool { return s.stopDiscards }
func (s *memSandbox) Delete(context.Context) error {
	s.set(sandbox.StatusMissing)
	return nil
}
func (s *memSandbox) set(st sandbox.Status) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = st
}
func (s *memSandbox) Refresh(context.Context) (sandbox.Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status, nil
}
func (s *memSandbox) Exec(context.Context, sandbox.ExecRequest) (sandbox.ExecResult, error) {
	return sandbox.ExecResult{ExitCode: 127, Stderr: []byte("the memory sandbox runs no commands")}, nil
}
func (s *memSandbox) PortURL(context.Context, int) (string, error) {
	return "", fmt.Errorf("the memory sandbox has no ports")
}

func clean(p string) string { return strings.TrimPrefix(path.Clean("/"+p), "/") }

func (s *memSandbox) ReadFile(_ context.Context, p string, limit int64) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.files[clean(p)]
	if !ok || f.mode.IsDir() {
		return nil, &fs.PathError{Op: "read", Path: p, Err: fs.ErrNotExist}
	}
	if limit > 0 && int64(len(f.data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, limit)
	}
	return bytes.Clone(f.data), nil
}

func (s *memSandbox) WriteFile(_ context.Context, p string, data []byte, mode fs.FileMode) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mkdirLocked(path.Dir(clean(p)))
	s.files[clean(p)] = &memFile{data: bytes.Clone(data), mode: mode.Perm()}
	return nil
}

func (s *memSandbox) mkdirLocked(p string) {
	for p = clean(p); p != "" && p != "."; p = path.Dir(p) {
		if _, ok := s.files[p]; !ok {
			s.files[p] = &memFile{mode: fs.ModeDir | 0o755}
		}
	}
}

func (s *memSandbox) Mkdir(_ context.Context, p string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mkdirLocked(p)
	return nil
}

func (s *memSandbox) Remove(_ context.Context, p string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.files, clean(p))
	return nil
}

func (s *memSandbox) info(p string, f *memFile) sandbox.FileInfo {
	return sandbox.FileInfo{Path: p, Size: int64(len(f.data)), Mode: f.mode, ModTime: time.Unix(0, 0)}
}

func (s *memSandbox) Stat(_ context.Context, p string) (sandbox.FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p = clean(p)
	if p == "" || p == "." {
		return sandbox.FileInfo{Path: ".", Mode: fs.ModeDir | 0o755}, nil
	}
	f, ok := s.files[p]
	if !ok {
		return sandbox.FileInfo{}, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
	}
	return s.info(p, f), nil
}

// under lists the paths below dir, sorted.
func (s *memSandbox) under(dir string) []string {
	dir = clean(dir)
	var out []string
	for p := range s.files {
		if dir == "" || dir == "." || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

func (s *memSandbox) ReadDir(_ context.Context, dir string) ([]sandbox.FileInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []sandbox.FileInfo
	for _, p := range s.under(dir) {
		if path.Dir(p) == clean(dir) || (clean(dir) == "" && !strings.Contains(p, "/")) {
			out = append(out, s.info(p, s.files[p]))
		}
	}
	return out, nil
}

func (s *memSandbox) CopyIn(_ context.Context, dir string, r io.Reader) error {
	tr := tar.NewReader(r)
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := clean(path.Join(dir, h.Name))
		if h.Typeflag == tar.TypeDir {
			s.mkdirLocked(p)
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		s.mkdirLocked(path.Dir(p))
		s.files[p] = &memFile{data: data, mode: fs.FileMode(h.Mode).Perm()}
	}
}

func (s *memSandbox) CopyOut(_ context.Context, dir string) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.copyOutErr != nil {
		return nil, s.copyOutErr
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	base := clean(dir)
	for _, p := range s.under(dir) {
		f := s.files[p]
		name := p
		if base != "" && base != "." {
			name = strings.TrimPrefix(p, base+"/")
		}
		h := &tar.Header{Name: name, Mode: int64(f.mode.Perm()), Size: int64(len(f.data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if f.mode.IsDir() {
			h.Name, h.Typeflag, h.Size = name+"/", tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return io.NopCloser(&buf), nil
}

// newMemEngine loads src as dir/main.hcl with the scripted model type and
// the memory sandbox type creating its sandboxes with mp.
func newMemEngine(t *testing.T, dir, src string, mp *memProvider) *Engine {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := registry.New(scripted.Type(), memType(mp))
	cfg, diags := config.Load(dir, config.Options{Registry: reg})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	sd, err := local.OpenDir(filepath.Join(dir, ".agentctl"))
	if err != nil {
		t.Fatal(err)
	}
	return &Engine{Config: cfg, State: sd, Version: "test", Registry: reg}
}

const memConfig = `
provider "scripted" {
  script "a" {
    reply { text = "done" }
  }
}
manifest "m" {
  file "hello.txt" { content = "hello" }
}
sandbox "s" {
  provider = provider.memory
  manifest = manifest.m
  greeting = %q
}
agent "a" {
  provider     = provider.scripted
  instructions = "x"
  sandbox      = sandbox.s
}
run "r" {
  agent = agent.a
  input = "go"
}
`

func actions(p *Plan) map[string]Action {
	out := map[string]Action{}
	for _, c := range p.Changes {
		out[c.Address] = c.Action
	}
	return out
}

// TestMemoryProviderPlanApply: the engine plans and applies with a
// provider type registered by the caller; the sandbox's typed settings
// reach Create, and changing them replaces the sandbox.
func TestMemoryProviderPlanApply(t *testing.T) {
	ctx := context.Background()
	dir, mp := t.TempDir(), &memProvider{}
	e := newMemEngine(t, dir, fmt.Sprintf(memConfig, "hi"), mp)
	st, err := e.State.Read(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p, err := e.Plan(ctx, st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(p); got["sandbox.s"] != ActionCreate || got["run.r"] != ActionExecute {
		t.Fatalf("first plan: %v", got)
	}
	if err := e.Apply(ctx, st, p); err != nil {
		t.Fatal(err)
	}
	if st.Runs["run.r"].Status != RunCompleted {
		t.Fatalf("run.r: %s %s", st.Runs["run.r"].Status, st.Runs["run.r"].Error)
	}
	if len(mp.created) != 1 || mp.created[0].Settings.(*memSettings).Greeting != "hi" {
		t.Fatalf("created: %+v", mp.created)
	}
	ss := st.Sandboxes["sandbox.s"]
	if ss == nil || ss.Provider != "provider.memory" {
		t.Fatalf("state sandbox: %+v", ss)
	}
	if data, err := mp.boxes[ss.Session.ID].ReadFile(ctx, "hello.txt", 0); err != nil || string(data) != "hello" {
		t.Fatalf("manifest file: %q %v", data, err)
	}

	// Nothing changed: nothing to do.
	p, err = e.Plan(ctx, st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if p.HasChanges() {
		t.Fatalf("second plan has changes: %v", actions(p))
	}

	// A different sandbox setting replaces the sandbox.
	e = newMemEngine(t, dir, fmt.Sprintf(memConfig, "hello"), mp)
	p, err = e.Plan(ctx, st, PlanOptions{Refresh: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(p)["sandbox.s"]; got != ActionReplace {
		t.Fatalf("plan after a settings change: %v", actions(p))
	}
	if err := e.Apply(ctx, st, p); err != nil {
		t.Fatal(err)
	}
	if len(mp.created) != 2 || mp.created[1].Settings.(*memSettings).Greeting != "hello" {
		t.Fatalf("created: %+v", mp.created)
	}
}

// TestMemoryProviderSettingsDiagnostics: a registered type's sandbox
// arguments are checked at load, at their range, and arguments of no type
// are refused.
func TestMemoryProviderSettingsDiagnostics(t *testing.T) {
	for src, want := range map[string]string{
		`greeting = ""`:       "main.hcl:4,14-16: Invalid greeting",
		`greeting = ["x"]`:    "main.hcl:4,14-19: Unsuitable value type",
		`greting = "x"`:       `Did you mean "greeting"?`,
		`greeting = var.nope`: "Reference to undeclared input variable",
	} {
		dir := t.TempDir()
		hclSrc := "sandbox \"s\" {\n  provider = provider.memory\n\n  " + src + "\n}\n"
		if err := os.WriteFile(filepath.Join(dir, "main.hcl"), []byte(hclSrc), 0o644); err != nil {
			t.Fatal(err)
		}
		_, diags := config.Load(dir, config.Options{Registry: registry.New(memType(&memProvider{}))})
		if !diags.HasErrors() || !strings.Contains(diags.Error(), want) {
			t.Errorf("%s: %v, want %q", src, diags, want)
		}
	}
}
