package engine

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"

	"github.com/agentctl/agentctl/engine/agentloop"
	"github.com/agentctl/agentctl/model"
	"github.com/agentctl/agentctl/sandbox"
)

// scrubber is the matcher over the configuration's sensitive values and
// their encodings, built once per engine and used on every path out:
// tool output, journals, events, run output, outputs.
func (e *Engine) scrubber() *sandbox.Scrubber {
	e.scrubOnce.Do(func() {
		var vals []string
		if e.Config != nil {
			vals = e.Config.SensitiveValues()
		}
		e.scrub = sandbox.NewScrubber(vals)
	})
	return e.scrub
}

// scrubStep returns a copy of s with every text it carries scrubbed, for
// the journal.
func scrubStep(sc *sandbox.Scrubber, s agentloop.Step) agentloop.Step {
	if !sc.Active() {
		return s
	}
	s.Input = sc.String(s.Input)
	if len(s.Prior) > 0 {
		prior := make([]model.Item, len(s.Prior))
		for i, it := range s.Prior {
			prior[i] = scrubItem(sc, it)
		}
		s.Prior = prior
	}
	if s.Response != nil {
		r := *s.Response
		r.Output = make([]model.Item, len(s.Response.Output))
		for i, it := range s.Response.Output {
			r.Output[i] = scrubItem(sc, it)
		}
		s.Response = &r
	}
	if s.Result != nil {
		it := scrubItem(sc, *s.Result)
		s.Result = &it
	}
	if s.Guardrail != nil {
		v := *s.Guardrail
		v.Message = sc.String(v.Message)
		s.Guardrail = &v
	}
	if s.Approval != nil {
		pc := *s.Approval
		pc.Arguments = scrubJSONString(sc, pc.Arguments)
		s.Approval = &pc
	}
	if s.Compacted != nil {
		c := *s.Compacted
		c.Summary = sc.String(c.Summary)
		s.Compacted = &c
	}
	return s
}

// scrubItem scrubs one conversation item's texts. Images are not
// rewritten: view_image refuses those that hold a sensitive value.
func scrubItem(sc *sandbox.Scrubber, it model.Item) model.Item {
	it.Text = sc.String(it.Text)
	it.Arguments = scrubJSONString(sc, it.Arguments)
	it.Output = sc.String(it.Output)
	if len(it.Raw) > 0 {
		it.Raw = scrubJSON(sc, it.Raw)
	}
	return it
}

// scrubJSON scrubs the strings (and object keys) of a JSON document,
// keeping it valid JSON: a value escaped inside a JSON string is matched
// in its decoded form, so a JSON escape of a JSON escape is caught too.
// A document that does not parse is scrubbed as text; one with nothing
// to scrub is returned as it was.
func scrubJSON(sc *sandbox.Scrubber, raw json.RawMessage) json.RawMessage {
	if !sc.Active() || len(raw) == 0 {
		return raw
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil || d.More() {
		return sc.Bytes(raw)
	}
	changed := false
	v = scrubAny(sc, v, &changed)
	if !changed {
		return sc.Bytes(raw)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return sc.Bytes(raw)
	}
	return sc.Bytes(out)
}

// scrubJSONString is scrubJSON for a JSON document held in a string
// (tool call arguments).
func scrubJSONString(sc *sandbox.Scrubber, s string) string {
	if !sc.Active() || s == "" {
		return s
	}
	return string(scrubJSON(sc, json.RawMessage(s)))
}

func scrubAny(sc *sandbox.Scrubber, v any, changed *bool) any {
	switch v := v.(type) {
	case string:
		s := sc.String(v)
		if s != v {
			*changed = true
		}
		return s
	case []any:
		for i := range v {
			v[i] = scrubAny(sc, v[i], changed)
		}
		return v
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			sk := sc.String(k)
			if sk != k {
				*changed = true
			}
			m[sk] = scrubAny(sc, x, changed)
		}
		return m
	}
	return v
}

// runEvents scrubs a run's runtime events before they are emitted,
// holding back streamed text that may end in the start of a sensitive
// value until the rest arrives.
type runEvents struct {
	sc      *sandbox.Scrubber
	emit    func(agentloop.Event)
	mu      sync.Mutex
	streams map[string]*sandbox.Stream
	last    map[string]agentloop.Event
}

func newRunEvents(sc *sandbox.Scrubber, emit func(agentloop.Event)) *runEvents {
	return &runEvents{sc: sc, emit: emit, streams: map[string]*sandbox.Stream{}, last: map[string]agentloop.Event{}}
}

// Event scrubs ev and passes it on.
func (r *runEvents) Event(ev agentloop.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if ev.Type == agentloop.EventTextDelta {
		st := r.streams[ev.Path]
		if st == nil {
			st = r.sc.NewStream()
			r.streams[ev.Path] = st
		}
		r.last[ev.Path] = ev
		if ev.Text = st.Write(ev.Text); ev.Text != "" {
			r.emit(ev)
		}
		return
	}
	r.flush(ev.Path)
	ev.Text = r.sc.String(ev.Text)
	if cut, ok := strings.CutSuffix(ev.Text, "…"); ok {
		// A preview cut at its limit may end in part of a value.
		ev.Text = r.sc.MaskCutEnd(cut) + "…"
	}
	ev.Arguments = scrubJSONString(r.sc, ev.Arguments)
	r.emit(ev)
}

// Flush emits the streamed text still held back.
func (r *runEvents) Flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p := range r.streams {
		r.flush(p)
	}
}

func (r *runEvents) flush(path string) {
	st := r.streams[path]
	if st == nil {
		return
	}
	delete(r.streams, path)
	ev := r.last[path]
	delete(r.last, path)
	if ev.Text = st.Flush(); ev.Text != "" {
		r.emit(ev)
	}
}

// scrubbedError is an error whose message is scrubbed; errors.Is and As
// still see the error it wraps.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrubErr returns err with its message scrubbed (errors are printed and
// stored in state); err itself when there is nothing to scrub.
func (e *Engine) scrubErr(err error) error {
	if err == nil {
		return nil
	}
	if msg := e.scrubber().String(err.Error()); msg != err.Error() {
		return &scrubbedError{msg: msg, err: err}
	}
	return err
}
