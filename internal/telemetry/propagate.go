package telemetry

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/propagation"
)

// The environment variables that carry a trace context into a process,
// as the OpenTelemetry specification names them ("Environment Variables
// as Context Propagation Carriers"): W3C traceparent and tracestate.
const (
	TraceparentVar = "TRACEPARENT"
	TracestateVar  = "TRACESTATE"
)

// ContextFromEnviron returns ctx with the remote span context that
// environ's TRACEPARENT (and TRACESTATE) name, so that a command's spans
// join the trace of whoever started it (a CI job, or the agentctl process
// that ran the command again in a user namespace). A missing or malformed
// TRACEPARENT leaves ctx as it is: the command's spans then start a trace
// of their own, as the W3C format asks of a receiver.
func ContextFromEnviron(ctx context.Context, environ []string) context.Context {
	carrier := propagation.MapCarrier{}
	if v := lookup(environ, TraceparentVar); v != "" {
		carrier["traceparent"] = v
		if s := lookup(environ, TracestateVar); s != "" {
			carrier["tracestate"] = s
		}
	}
	return propagation.TraceContext{}.Extract(ctx, carrier)
}

// WithContext returns environ with TRACEPARENT and TRACESTATE set to the
// span context of ctx (and removed when ctx has none), for a process that
// continues ctx's trace.
func WithContext(ctx context.Context, environ []string) []string {
	carrier := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, carrier)
	out := make([]string, 0, len(environ)+2)
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); k != TraceparentVar && k != TracestateVar {
			out = append(out, kv)
		}
	}
	if v := carrier["traceparent"]; v != "" {
		out = append(out, TraceparentVar+"="+v)
	}
	if v := carrier["tracestate"]; v != "" {
		out = append(out, TracestateVar+"="+v)
	}
	return out
}
