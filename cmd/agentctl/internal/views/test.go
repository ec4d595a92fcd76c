package views

import (
	"fmt"
	"sync"

	"github.com/hashicorp/hcl/v2"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/agenttest"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/config/diagfmt"
	"github.com/agentctl/agentctl/internal/termtext"
)

// Test renders agentctl test: each file and run as it finishes, then the
// summary.
type Test interface {
	Event(ev agenttest.Event)
	Summary(s agenttest.Summary)
}

// NewTest returns the view of agentctl test for vt.
func NewTest(vt arguments.ViewType, v *View) Test {
	if vt == arguments.ViewJSON {
		return &testJSON{j: newJSONEvents(v.Stdout)}
	}
	return &testHuman{View: v}
}

type testHuman struct {
	*View
	mu sync.Mutex
}

func (v *testHuman) Event(ev agenttest.Event) {
	v.mu.Lock()
	defer v.mu.Unlock()
	file := termtext.Line(ev.File)
	switch ev.Type {
	case agenttest.EventFileStart:
		fmt.Fprintf(v.Stdout, "%s... in progress\n", file)
	case agenttest.EventRun:
		fmt.Fprintf(v.Stdout, "  run %q... %s\n", termtext.Line(ev.Run), v.status(ev.Status))
		v.Diagnostics(ev.Diagnostics, ev.Sources)
	case agenttest.EventTeardown:
		fmt.Fprintf(v.Stdout, "%s... tearing down\n", file)
	case agenttest.EventFileEnd:
		v.Diagnostics(ev.Diagnostics, ev.Sources)
		fmt.Fprintf(v.Stdout, "%s... %s\n", file, v.status(ev.Status))
	}
}

func (v *testHuman) status(s agenttest.Status) string {
	switch s {
	case agenttest.StatusPass:
		return v.Colors.Green + string(s) + v.Colors.Reset
	case agenttest.StatusSkip:
		return string(s)
	}
	return v.Colors.Red + string(s) + v.Colors.Reset
}

func (v *testHuman) Summary(s agenttest.Summary) {
	if s.OK() {
		fmt.Fprintf(v.Stdout, "\n%s %d passed, 0 failed.\n", v.Colors.Green+"Success!"+v.Colors.Reset, s.Passed)
		return
	}
	msg := fmt.Sprintf("%d passed, %d failed", s.Passed, s.Failed+s.Errored)
	if s.Skipped > 0 {
		msg += fmt.Sprintf(", %d skipped", s.Skipped)
	}
	fmt.Fprintf(v.Stdout, "\n%s %s.\n", v.Colors.Red+"Failure!"+v.Colors.Reset, msg)
}

type testJSON struct{ j *jsonEvents }

func (v *testJSON) Event(ev agenttest.Event) {
	m := map[string]any{"type": string(ev.Type), "file": ev.File}
	if ev.Run != "" {
		m["run"] = ev.Run
	}
	if ev.Status != "" {
		m["status"] = ev.Status
	}
	v.j.emit(m)
	for _, d := range ev.Diagnostics {
		v.j.emit(map[string]any{"type": "diagnostic", "file": ev.File, "run": ev.Run, "diagnostic": diagnosticJSON(d, ev.Sources)})
	}
}

func (v *testJSON) Summary(s agenttest.Summary) {
	status := "pass"
	if !s.OK() {
		status = "fail"
	}
	v.j.emit(map[string]any{"type": "test_summary", "status": status, "passed": s.Passed, "failed": s.Failed, "errored": s.Errored, "skipped": s.Skipped})
}

// diagnosticJSON is a diagnostic as validate -json writes one.
func diagnosticJSON(d *hcl.Diagnostic, files map[string]*hcl.File) any {
	return diagfmt.JSONDiagnostic(d, files)
}
