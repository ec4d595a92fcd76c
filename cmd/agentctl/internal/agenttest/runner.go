package agenttest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/providers/registry"
	"github.com/agentctl/agentctl/sandbox/hostfs"
	"github.com/agentctl/agentctl/state"
	"github.com/agentctl/agentctl/state/local"
)

// Options are agentctl test's inputs.
type Options struct {
	// ConfigPath is the configuration under test: a directory or a .hcl
	// file.
	ConfigPath string
	// Files are the test files to run; empty means every file Discover
	// finds.
	Files []string
	// Vars and VarFiles are -var and -var-file, for every run; a test's
	// variables blocks win over them.
	Vars, VarFiles []string
	// Environ is the process environment (credentials, AGENTCTL_VAR_*).
	Environ  []string
	Registry *registry.Registry
	// TracerProvider receives the engine's spans; nil records nothing.
	TracerProvider trace.TracerProvider
	// Version is agentctl's version, recorded in the temporary state.
	Version     string
	Parallelism int
	// Events receives progress, in order, from one goroutine.
	Events func(Event)
	// Replay, when not "", is a directory of recorded cassettes (apply
	// -record) that every model provider calling a model over HTTP
	// answers from instead of the network (agentctl test -replay DIR);
	// a request that was not recorded fails its run, naming it.
	Replay string
}

// EventType names a test event.
type EventType string

const (
	// EventFileStart: a test file starts (its name in File).
	EventFileStart EventType = "test_file_start"
	// EventRun: a run block finished with Status; Diagnostics say why
	// it did not pass.
	EventRun EventType = "test_run"
	// EventTeardown: the file's sandboxes are being destroyed.
	EventTeardown EventType = "test_teardown"
	// EventFileEnd: a test file finished with Status; Diagnostics are
	// the file's own (it could not be read, or its teardown failed).
	EventFileEnd EventType = "test_file"
)

// Status is a run's or a file's outcome.
type Status string

const (
	StatusPass  Status = "pass"
	StatusFail  Status = "fail"  // an assertion did not hold
	StatusError Status = "error" // the run could not be carried out
	StatusSkip  Status = "skip"  // not run: an earlier run errored
)

// Event is what Run reports as it goes.
type Event struct {
	Type        EventType
	File        string
	Run         string
	Status      Status
	Diagnostics hcl.Diagnostics
	// Sources are the parsed files the diagnostics point into.
	Sources map[string]*hcl.File
}

// Summary counts the runs by outcome.
type Summary struct {
	Passed, Failed, Errored, Skipped int
	// Files is the number of test files run.
	Files int
}

// OK reports whether every run passed.
func (s Summary) OK() bool { return s.Failed == 0 && s.Errored == 0 && s.Skipped == 0 }

// Test runs the test files and reports each run through opts.Events.
func Test(ctx context.Context, opts Options) (Summary, error) {
	var sum Summary
	files := opts.Files
	if len(files) == 0 {
		var err error
		if files, err = Discover(opts.ConfigPath); err != nil {
			return sum, err
		}
	}
	if len(files) == 0 {
		return sum, fmt.Errorf("no test files for %s: write NAME.test.hcl beside the configuration (or in its tests/ directory)", opts.ConfigPath)
	}
	for _, path := range files {
		sum.Files++
		runFile(ctx, opts, path, &sum)
	}
	return sum, nil
}

func (o *Options) emit(ev Event) {
	if o.Events != nil {
		o.Events(ev)
	}
}

// displayName is path relative to the configuration's directory when it
// is inside it.
func displayName(cfgPath, path string) string {
	dir := cfgPath
	if fi, err := os.Stat(cfgPath); err == nil && !fi.IsDir() {
		dir = filepath.Dir(cfgPath)
	}
	if rel, err := filepath.Rel(dir, path); err == nil && filepath.IsLocal(rel) {
		return filepath.ToSlash(rel)
	}
	return path
}

// runFile runs one test file in a temporary state directory and destroys
// what it created.
func runFile(ctx context.Context, opts Options, path string, sum *Summary) {
	name := displayName(opts.ConfigPath, path)
	opts.emit(Event{Type: EventFileStart, File: name})
	f, diags := ParseFile(path, name)
	sources := map[string]*hcl.File{}
	if f != nil && f.HCL != nil {
		sources[path] = f.HCL
	}
	if diags.HasErrors() {
		if f != nil {
			sum.Skipped += len(f.Runs)
		}
		opts.emit(Event{Type: EventFileEnd, File: name, Status: StatusError, Diagnostics: diags, Sources: sources})
		return
	}
	tmp, err := os.MkdirTemp("", "agentctl-test-")
	if err != nil {
		opts.emit(Event{Type: EventFileEnd, File: name, Status: StatusError, Diagnostics: errDiags(fmt.Errorf("creating the temporary state directory: %w", err))})
		return
	}
	dir, err := local.OpenDir(filepath.Join(tmp, ".agentctl"), local.WithAgentctlVersion(opts.Version))
	if err != nil {
		_ = os.RemoveAll(tmp)
		opts.emit(Event{Type: EventFileEnd, File: name, Status: StatusError, Diagnostics: errDiags(err)})
		return
	}
	fileStatus := StatusPass
	var last *engine.Engine // the last configuration loaded: teardown destroys with it
	errored := false
	for _, r := range f.Runs {
		if errored {
			sum.Skipped++
			opts.emit(Event{Type: EventRun, File: name, Run: r.Name, Status: StatusSkip})
			continue
		}
		e, status, diags := runBlock(ctx, opts, f, r, dir, sources)
		if e != nil {
			last = e
		}
		switch status {
		case StatusPass:
			sum.Passed++
		case StatusFail:
			sum.Failed++
			fileStatus = StatusFail
		default:
			sum.Errored++
			fileStatus, errored = StatusFail, true
		}
		opts.emit(Event{Type: EventRun, File: name, Run: r.Name, Status: status, Diagnostics: diags, Sources: sources})
	}
	opts.emit(Event{Type: EventTeardown, File: name})
	var tdiags hcl.Diagnostics
	// The teardown runs after an interrupt too.
	if err := teardown(context.WithoutCancel(ctx), last, dir); err != nil {
		fileStatus = StatusError
		tdiags = errDiags(fmt.Errorf("destroying what %s created: %w; the temporary state is kept at %s (agentctl destroy -state %s with the same configuration removes it)", name, err, tmp, dir.StateFile()))
	} else if err := hostfs.RemoveAll(tmp); err != nil {
		tdiags = hcl.Diagnostics{{Severity: hcl.DiagWarning, Summary: fmt.Sprintf("Removing the temporary state %s: %v", tmp, err)}}
	}
	opts.emit(Event{Type: EventFileEnd, File: name, Status: fileStatus, Diagnostics: tdiags})
}

// teardown destroys every sandbox the file's runs created.
func teardown(ctx context.Context, e *engine.Engine, dir *local.Dir) error {
	if e == nil {
		return nil
	}
	st, err := dir.Read(ctx)
	if err != nil {
		return err
	}
	if len(st.Sandboxes) == 0 && len(st.Runs) == 0 {
		return nil
	}
	p, err := e.Plan(ctx, st, engine.PlanOptions{Destroy: true})
	if err != nil {
		return err
	}
	return e.Apply(ctx, st, p)
}

func errDiags(err error) hcl.Diagnostics {
	return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: err.Error()}}
}

// runBlock carries out one run block against the file's state and
// evaluates its assertions.
func runBlock(ctx context.Context, opts Options, f *File, r *Run, dir *local.Dir, sources map[string]*hcl.File) (*engine.Engine, Status, hcl.Diagnostics) {
	values := maps.Clone(f.Variables)
	if values == nil {
		values = map[string]config.Value{}
	}
	maps.Copy(values, r.Variables)
	overrides := maps.Clone(f.Overrides)
	if overrides == nil {
		overrides = map[string]config.ProviderOverride{}
	}
	maps.Copy(overrides, r.Overrides)
	cfg, diags := config.Load(opts.ConfigPath, config.Options{
		Vars: opts.Vars, VarFiles: opts.VarFiles, Environ: opts.Environ, Registry: opts.Registry,
		Values: values, ProviderOverrides: overrides,
	})
	if cfg != nil {
		maps.Copy(sources, cfg.Files)
	}
	if diags.HasErrors() {
		return nil, StatusError, diags
	}
	e := &engine.Engine{
		Config: cfg, State: dir, Environ: opts.Environ, Version: opts.Version,
		Parallelism: opts.Parallelism, Registry: cfg.Registry(), TracerProvider: opts.TracerProvider,
		Replay: opts.Replay,
	}
	st, err := dir.Read(ctx)
	if err != nil {
		return e, StatusError, errDiags(err)
	}
	p, err := e.Plan(ctx, st, engine.PlanOptions{Refresh: true})
	if err != nil {
		return e, StatusError, asDiags(err)
	}
	var out hcl.Diagnostics
	status := StatusPass
	if r.Command == CommandApply {
		if ds := unknownExpected(cfg, r); ds.HasErrors() {
			return e, StatusError, ds
		}
		var applyErr error
		if p.HasChanges() {
			applyErr = e.Apply(ctx, st, p)
		} else if e.RefreshOutputs(st) {
			if err := dir.Write(context.WithoutCancel(ctx), st); err != nil {
				return e, StatusError, errDiags(err)
			}
		}
		if applyErr != nil && len(r.ExpectFailures) == 0 {
			return e, StatusError, asDiags(fmt.Errorf("run %q: apply failed: %w", r.Name, applyErr))
		}
		if len(r.ExpectFailures) > 0 {
			if st, err = dir.Read(ctx); err != nil {
				return e, StatusError, errDiags(err)
			}
			unexpected, missed := checkFailures(r, st)
			if applyErr != nil && unexpected != "" {
				return e, StatusError, asDiags(fmt.Errorf("run %q: apply failed (%s is not in expect_failures): %w", r.Name, unexpected, applyErr))
			}
			if len(missed) > 0 {
				status = StatusFail
				out = append(out, missed...)
			}
		}
	}
	ev := newEvaluator(ctx, e, st, p, r.Command)
	defer ev.close()
	for _, a := range r.Asserts {
		ds := ev.check(a)
		if ds.HasErrors() {
			status = StatusFail
		}
		out = append(out, ds...)
	}
	return e, status, out
}

// failedStatuses are the statuses of a run that failed.
var failedStatuses = []string{engine.RunFailed, engine.RunGuardrailTripped}

// unknownExpected reports expect_failures entries naming no run of cfg.
func unknownExpected(cfg *config.Config, r *Run) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for _, x := range r.ExpectFailures {
		if _, ok := cfg.Runs[x.Run]; !ok {
			diags = append(diags, errorAt(x.Range, "Unknown run in expect_failures", fmt.Sprintf("The configuration has no run %q.", x.Run)))
		}
	}
	return diags
}

// checkFailures compares the runs that failed in st with r's
// expect_failures: unexpected is the address of a failed run not listed
// (""), missed a diagnostic per listed run none of whose instances
// failed.
func checkFailures(r *Run, st *state.State) (unexpected string, missed hcl.Diagnostics) {
	failed := map[string]string{} // run name -> status of a failed instance
	for _, addr := range slices.Sorted(maps.Keys(st.Runs)) {
		rs := st.Runs[addr]
		if !slices.Contains(failedStatuses, rs.Status) {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(addr, "run."), "[")
		failed[name] = rs.Status
		if !slices.ContainsFunc(r.ExpectFailures, func(x ExpectedFailure) bool { return x.Run == name }) && unexpected == "" {
			unexpected = addr
		}
	}
	for _, x := range r.ExpectFailures {
		if _, ok := failed[x.Run]; ok {
			continue
		}
		status := "not run"
		if rs := st.Runs["run."+x.Run]; rs != nil {
			status = rs.Status
		}
		missed = append(missed, errorAt(x.Range, "Expected failure did not happen", fmt.Sprintf("run.%s was expected to fail (expect_failures), but it is %s.", x.Run, status)))
	}
	return unexpected, missed
}

// asDiags returns err's diagnostics when it carries them.
func asDiags(err error) hcl.Diagnostics {
	var diags hcl.Diagnostics
	if errors.As(err, &diags) {
		return diags
	}
	return errDiags(err)
}
