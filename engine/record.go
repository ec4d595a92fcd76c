package engine

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"

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
	var rec *cassette.Recorder
	if e.Record != "" {
		if ps.recorders == nil {
			ps.recorders = map[string]*cassette.Recorder{}
		}
		rec = ps.recorders[addr]
		if rec == nil {
			var err error
			if rec, err = cassette.NewRecorder(cassette.File(e.Record, addr), e.cassetteOptions()); err != nil {
				return env, fmt.Errorf("%s: -record: %w", addr, err)
			}
			ps.recorders[addr] = rec
		}
	}
	env.Transport = e.cassetteTransport(addr, rec)
	return env, nil
}

// cassetteTransport is the registry.Transport of the model provider at
// addr: the engine's replay directory, else the provider's own, answers
// from the provider's cassette in it; else rec, when not nil, records
// what base sends.
func (e *Engine) cassetteTransport(addr string, rec *cassette.Recorder) registry.Transport {
	return func(base http.RoundTripper, replay string) (http.RoundTripper, bool, error) {
		if e.Replay != "" {
			replay = e.Replay
		}
		if replay == "" {
			if rec == nil {
				return base, false, nil
			}
			return rec.Transport(base), false, nil
		}
		if rec != nil {
			return nil, false, errors.New("cannot record while replaying: a provider with replay set serves recorded exchanges; leave -record out, or remove replay to record against the model")
		}
		// The options serve a provider's own replay setting too.
		p, err := cassette.Load(cassette.File(replay, addr), e.cassetteOptions())
		if err != nil {
			return nil, false, err
		}
		return p, true, nil
	}
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
	for _, addr := range slices.Sorted(maps.Keys(recs)) {
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
