package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/peterbourgon/ff/v3/ffcli"

	"github.com/agentctl/agentctl/cmd/agentctl/internal/arguments"
	"github.com/agentctl/agentctl/cmd/agentctl/internal/views"
	"github.com/agentctl/agentctl/engine"
	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/agentctl/agentctl/state"
)

func showCommand(m *meta) *ffcli.Command {
	args, fs := arguments.NewInspect("show", m.Stderr)
	return &ffcli.Command{
		Name:       "show",
		ShortUsage: "agentctl show [options] [ADDR | PLANFILE]",
		ShortHelp:  "Show the state, one run's transcript, one sandbox, or a saved plan.",
		FlagSet:    fs,
		Exec: func(ctx context.Context, rest []string) error {
			if err := args.Finish(fs, rest); err != nil {
				return err
			}
			m.noColor = args.NoColor
			if len(args.Args) > 1 {
				return fmt.Errorf("show takes at most one argument: an address such as run.NAME, or a saved plan file")
			}
			if len(args.Args) == 1 {
				if pf, ok := isPlanFile(args.Args[0]); ok {
					return m.showPlan(pf, args.JSON)
				}
			}
			b, st, err := readState(m.openStateBackend, args)
			if err != nil {
				return err
			}
			if len(args.Args) == 0 {
				return m.showState(st, args.JSON)
			}
			addr := args.Args[0]
			switch {
			case st.Runs[addr] != nil:
				e := b.engine(0, nil, nil)
				steps, err := e.Transcript(st.Runs[addr])
				var lost *engine.JournalLostError
				if errors.As(err, &lost) {
					return err // it names the run and what was lost
				}
				if err != nil {
					return fmt.Errorf("%s: reading its transcript: %w", addr, err)
				}
				if args.JSON {
					return writeJSON(m.Stdout, map[string]any{"run": st.Runs[addr], "steps": steps})
				}
				showRun(m.Stdout, st.Runs[addr], steps)
				return nil
			case st.Sandboxes[addr] != nil:
				if args.JSON {
					return writeJSON(m.Stdout, st.Sandboxes[addr])
				}
				showSandbox(m.Stdout, st.Sandboxes[addr])
				return nil
			}
			return fmt.Errorf("%s is not in the state; agentctl state list shows the addresses it holds", addr)
		},
	}
}

// writeJSON prints v as indented JSON for programs: exact values, with
// the characters that could drive a terminal JSON-escaped.
func writeJSON(w io.Writer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	_, err := w.Write(termtext.JSON(b.Bytes()))
	return err
}

func (m *meta) showPlan(pf *state.PlanFile, asJSON bool) error {
	if asJSON {
		_, err := m.Stdout.Write(append(termtext.JSON(pf.Plan), '\n'))
		return err
	}
	p := &engine.Plan{}
	if err := json.Unmarshal(pf.Plan, p); err != nil {
		return fmt.Errorf("reading the saved plan: %w", err)
	}
	fmt.Fprintf(m.Stdout, "Saved plan for %s (state lineage %s, serial %d)\n", pf.ConfigDir, pf.Lineage, pf.Serial)
	views.Plan(m.Stdout, p, m.colors(false))
	return nil
}

func (m *meta) showState(st *state.State, asJSON bool) error {
	if asJSON {
		return writeJSON(m.Stdout, st)
	}
	if len(st.Sandboxes) == 0 && len(st.Runs) == 0 {
		fmt.Fprintln(m.Stdout, "The state is empty: nothing has been applied yet.")
		return nil
	}
	for _, addr := range st.SandboxAddresses() {
		s := st.Sandboxes[addr]
		fmt.Fprintf(m.Stdout, "# %s (%s, %s)\n", addr, s.Kind, s.Status)
		fmt.Fprintf(m.Stdout, "    id       = %s\n", termtext.Line(s.Session.ID))
		for port, u := range s.URLs {
			fmt.Fprintf(m.Stdout, "    url %s = %s\n", termtext.Line(port), termtext.Line(u))
		}
		if s.Snapshot != "" {
			fmt.Fprintf(m.Stdout, "    snapshot = %s\n", termtext.Line(s.Snapshot))
		}
	}
	for _, addr := range st.RunAddresses() {
		r := st.Runs[addr]
		fmt.Fprintf(m.Stdout, "# %s (%s, %d turns, %d input + %d output tokens)\n", addr, r.Status, r.Turns, r.Usage.InputTokens, r.Usage.OutputTokens)
		if r.Error != "" {
			fmt.Fprintf(m.Stdout, "    error  = %s\n", termtext.Printable(r.Error))
		}
		if len(r.Output) > 0 {
			fmt.Fprintf(m.Stdout, "    output = %s\n", firstLines(renderJSONValue(r.Output), 3))
		}
	}
	m.printOutputs(st)
	return nil
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n             ")
}

func showSandbox(w io.Writer, s *state.Sandbox) {
	fmt.Fprintf(w, "# %s\n", s.Address)
	fmt.Fprintf(w, "provider        = %s (%s)\n", s.Provider, s.Kind)
	fmt.Fprintf(w, "id              = %s\n", termtext.Line(s.Session.ID))
	fmt.Fprintf(w, "status          = %s\n", s.Status)
	fmt.Fprintf(w, "manifest_digest = %s\n", s.ManifestDigest)
	for _, p := range sortedStrings(s.EntryDigests) {
		fmt.Fprintf(w, "entry %-10q  = %s\n", p, termtext.Line(s.EntryDigests[p]))
	}
	for _, p := range sortedStrings(s.URLs) {
		fmt.Fprintf(w, "url %-12s = %s\n", termtext.Line(p), termtext.Line(s.URLs[p]))
	}
	if s.Snapshot != "" {
		fmt.Fprintf(w, "snapshot        = %s (sha256 %s)\n", termtext.Line(s.Snapshot), termtext.Line(s.SnapshotDigest))
	}
	if p := s.RestorePending; p != nil {
		why := "agentctl stopped during it"
		if p.Error != "" {
			why = termtext.Printable(p.Error)
		}
		fmt.Fprintf(w, "restore_pending = the last restore did not finish (%s); apply restores it again\n", why)
	}
}

// showRun prints a run's transcript: the input, each model turn's text and
// tool calls, each tool result, handoffs, and the provenance.
func showRun(w io.Writer, r *state.Run, steps []agentloop.Step) {
	fmt.Fprintf(w, "# %s: %s, agent.%s, %d turns\n", r.Address, r.Status, r.Agent, r.Turns)
	turn := 0
	for _, s := range steps {
		indent := strings.Repeat("    ", strings.Count(s.Path, "/")+boolInt(s.Path != ""))
		switch s.Kind {
		case agentloop.StepInput:
			if s.Path == "" {
				fmt.Fprintf(w, "\n%s[input → %s]\n%s%s\n", indent, s.Agent, indent, indented(s.Input, indent))
			} else {
				fmt.Fprintf(w, "%s[agent tool run of %s] input: %s\n", indent, s.Agent, indented(s.Input, indent+"  "))
			}
		case agentloop.StepModel:
			if s.Path == "" {
				turn++
			}
			fmt.Fprintf(w, "\n%s[turn %d, %s]\n", indent, turn, s.Agent)
			for _, it := range s.Response.Output {
				switch it.Type {
				case "message":
					fmt.Fprintf(w, "%s%s\n", indent, indented(it.Text, indent))
				case "function_call":
					fmt.Fprintf(w, "%s→ %s %s\n", indent, termtext.Line(it.Name), termtext.Line(it.Arguments))
				}
			}
		case agentloop.StepTool:
			out := s.Result.Output
			if len(s.Result.Images) > 0 {
				out += fmt.Sprintf(" [%d image(s)]", len(s.Result.Images))
			}
			fmt.Fprintf(w, "%s← %s\n", indent, indented(strings.TrimRight(out, "\n"), indent+"  "))
			if s.Handoff != "" {
				fmt.Fprintf(w, "%s(handed off to %s)\n", indent, termtext.Line(s.Handoff))
			}
		}
	}
	if len(r.Output) > 0 {
		fmt.Fprintf(w, "\nOutput: %s\n", renderJSONValue(r.Output))
	}
	if r.Error != "" {
		fmt.Fprintf(w, "\nError: %s\n", termtext.Printable(r.Error))
	}
	p := r.Provenance
	fmt.Fprintf(w, "\nProvenance: config %s", short(p.ConfigDigest))
	if p.GitCommit != "" {
		fmt.Fprintf(w, ", git commit %s", short(p.GitCommit))
	}
	if len(p.Models) > 0 {
		fmt.Fprintf(w, ", models %s", termtext.Line(strings.Join(p.Models, ", ")))
	}
	fmt.Fprintf(w, ", usage %d input / %d output tokens\n", r.Usage.InputTokens, r.Usage.OutputTokens)
}

// indented shows text from a model, a tool or a file for the terminal,
// its continuation lines indented by indent: control and format
// characters are shown escaped, newlines and tabs are kept.
func indented(s, indent string) string {
	s = termtext.Printable(s)
	if indent == "" {
		return s
	}
	return strings.ReplaceAll(s, "\n", "\n"+indent)
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
