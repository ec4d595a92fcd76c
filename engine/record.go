package engine

import (
	"errors"
	"fmt"

	"github.com/agentctl/agentctl/engine/tools"
	"github.com/agentctl/agentctl/internal/cassette"
	"github.com/agentctl/agentctl/providers/registry"
)

// Record and replay (docs/openai-provider.md, "Record and replay"). With
// Engine.Record set, every model provider that calls a model over HTTP
// records its exchanges in DIR/<provider address>.yaml; with
// Engine.Replay set, every such provider answers from the cassettes in
// that directory instead, as if its replay setting named it. What is
// recorded is scrubbed of the configuration's sensitive values and keeps
// no header but Content-Type, so no credential reaches a cassette.

// cassetteOptions scrub what is recorded with the engine's scrubber, and
// match requests with exec_command's chunk ids and wall times set aside.
func (e *Engine) cassetteOptions() cassette.Options {
	return cassette.Options{Scrub: e.scrubber().String, Normalize: tools.VolatileText}
}

// modelEnv is what the model provider at addr is built with. ps.mu is
// held.
func (ps *providerSet) modelEnv(e *Engine, addr string) (registry.Env, error) {
	env := registry.Env{Environ: e.Environ, Address: addr}
	if e.Config != nil {
		env.Dir = e.Config.Dir
	}
	// The options serve a provider's own replay setting too.
	cs := &registry.Cassettes{Replay: e.Replay, Options: e.cassetteOptions()}
	env.Cassettes = cs
	if e.Record != "" {
		if ps.recorders == nil {
			ps.recorders = map[string]*cassette.Recorder{}
		}
		rec := ps.recorders[addr]
		if rec == nil {
			var err error
			if rec, err = cassette.NewRecorder(cassette.File(e.Record, addr), cs.Options); err != nil {
				return env, fmt.Errorf("%s: -record: %w", addr, err)
			}
			ps.recorders[addr] = rec
		}
		cs.Record = rec
	}
	return env, nil
}

// reportRecording says, at the end of an apply -record, what was recorded
// where, and fails when a cassette could not be written: a recording
// that silently lacks exchanges would fail its replay later, far from
// the cause.
func (a *applier) reportRecording() error {
	e := a.e
	if e.Record == "" {
		return nil
	}
	ps := e.provs()
	ps.mu.Lock()
	recs := make(map[string]*cassette.Recorder, len(ps.recorders))
	for addr, r := range ps.recorders {
		recs[addr] = r
	}
	ps.mu.Unlock()
	var errs []error
	total := 0
	for _, addr := range sortedKeys(recs) {
		r := recs[addr]
		if err := r.Err(); err != nil {
			errs = append(errs, fmt.Errorf("%s: -record: %w", addr, err))
			continue
		}
		if n := r.Recorded(); n > 0 {
			total += n
			e.emit(Event{Type: EventApplyProgress, Address: addr, Message: fmt.Sprintf("recorded %d model %s in %s", n, plural(n, "exchange", "exchanges"), r.File())})
		}
	}
	if total == 0 && len(errs) == 0 {
		e.emit(Event{Type: EventApplyProgress, Message: fmt.Sprintf("-record: no model exchange was recorded in %s: no run called a model over HTTP in this apply (the scripted provider needs no recording)", e.Record)})
	}
	return errors.Join(errs...)
}
