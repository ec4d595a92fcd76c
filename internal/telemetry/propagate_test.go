package telemetry

import (
	"context"
	"slices"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

func TestTraceContextThroughEnviron(t *testing.T) {
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := ContextFromEnviron(context.Background(), []string{"TRACEPARENT=" + parent, "TRACESTATE=vendor=x"})
	sc := trace.SpanContextFromContext(ctx)
	if sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.SpanID().String() != "00f067aa0ba902b7" || !sc.IsRemote() || !sc.IsSampled() {
		t.Fatalf("span context from TRACEPARENT = %+v", sc)
	}
	// A span started there belongs to that trace; its context goes on to
	// a child process's environment, replacing what was there.
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("t").Start(ctx, "agentctl apply")
	defer span.End()
	env := WithContext(ctx, []string{"A=1", "TRACEPARENT=stale", "TRACESTATE=stale"})
	want := []string{"A=1", "TRACEPARENT=00-4bf92f3577b34da6a3ce929d0e0e4736-" + span.SpanContext().SpanID().String() + "-01", "TRACESTATE=vendor=x"}
	if !slices.Equal(env, want) {
		t.Fatalf("environment for the child:\n%q\nwant\n%q", env, want)
	}

	// Malformed or absent: no parent, and nothing passed on.
	for _, environ := range [][]string{nil, {"TRACEPARENT=garbage"}} {
		ctx := ContextFromEnviron(context.Background(), environ)
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			t.Errorf("%q gave a span context %+v", environ, sc)
		}
		if env := WithContext(ctx, []string{"TRACEPARENT=stale"}); len(env) != 0 {
			t.Errorf("%q: environment for the child %q, want nothing", environ, env)
		}
	}
}
