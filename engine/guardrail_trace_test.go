package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// spanAttrs are the spans rec ended whose name starts with prefix, each
// as "name key=value ..." over keys, in the order they ended.
func spanAttrs(rec *tracetest.SpanRecorder, prefix string, keys ...string) []string {
	var out []string
	for _, s := range rec.Ended() {
		if !strings.HasPrefix(s.Name(), prefix) {
			continue
		}
		line := s.Name()
		for _, k := range keys {
			for _, kv := range s.Attributes() {
				if string(kv.Key) == k {
					line += fmt.Sprintf(" %s=%s", k, kv.Value.String())
				}
			}
		}
		out = append(out, line)
	}
	return out
}

func tracedEngine(t *testing.T, src string) (*Engine, *tracetest.SpanRecorder) {
	t.Helper()
	e, _ := newTestEngine(t, src)
	rec := tracetest.NewSpanRecorder()
	e.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	return e, rec
}

// TestGuardrailSpans: each guardrail check is a span with its verdict;
// a trip's span says tripped.
func TestGuardrailSpans(t *testing.T) {
	e, rec := tracedEngine(t, guardrailSrc("hello", 1, "fine", 5))
	if err := applyErr(t, e, PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	got := spanAttrs(rec, "guardrail ", "agentctl.guardrail.on", "agentctl.guardrail.verdict")
	want := []string{
		"guardrail no_password agentctl.guardrail.on=input agentctl.guardrail.verdict=passed",
		"guardrail small_n agentctl.guardrail.on=tool_input agentctl.guardrail.verdict=passed",
		"guardrail short_output agentctl.guardrail.on=tool_output agentctl.guardrail.verdict=passed",
		"guardrail no_keys agentctl.guardrail.on=output agentctl.guardrail.verdict=passed",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("guardrail spans:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	e, rec = tracedEngine(t, guardrailSrc("hello", 1, "the api_key", 5))
	if err := applyErr(t, e, PlanOptions{}); err == nil {
		t.Fatal("the output guardrail did not trip")
	}
	got = spanAttrs(rec, "guardrail no_keys", "agentctl.guardrail.verdict")
	if !slices.Equal(got, []string{"guardrail no_keys agentctl.guardrail.verdict=tripped"}) {
		t.Fatalf("tripped guardrail spans: %q", got)
	}
}

// TestHookSpans: each hook run is a span "hook EVENT" saying how it
// ended, with its exit code when it exited.
func TestHookSpans(t *testing.T) {
	e, rec := tracedEngine(t, hooksConfig)
	if err := applyErr(t, e, PlanOptions{}); err != nil {
		t.Fatal(err)
	}
	got := spanAttrs(rec, "hook ", "agentctl.hook.event", "agentctl.hook.result", "process.exit.code")
	want := []string{
		"hook tool_start agentctl.hook.event=tool_start agentctl.hook.result=failed process.exit.code=1",
		"hook tool_end agentctl.hook.event=tool_end agentctl.hook.result=timed_out",
		"hook run_end agentctl.hook.event=run_end agentctl.hook.result=ok process.exit.code=0",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("hook spans:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, s := range rec.Ended() {
		if strings.HasPrefix(s.Name(), "hook ") && s.Parent().SpanID() == [8]byte{} {
			t.Errorf("span %s has no parent", s.Name())
		}
	}
}
