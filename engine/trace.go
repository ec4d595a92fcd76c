package engine

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentctl/agentctl/config"
	"github.com/agentctl/agentctl/state"
)

// tracerName is the instrumentation scope of the engine's spans.
const tracerName = "github.com/agentctl/agentctl/engine"

// Span attributes of agentctl's own (docs/observability.md). Addresses,
// actions, statuses and counts only: nothing a user, a model or a tool
// wrote.
const (
	attrAddress  = attribute.Key("agentctl.address")
	attrAction   = attribute.Key("agentctl.action")
	attrStatus   = attribute.Key("agentctl.run.status")
	attrTurns    = attribute.Key("agentctl.run.turns")
	attrProvider = attribute.Key("agentctl.provider")
	attrChanges  = attribute.Key("agentctl.plan.changes")
	attrDestroy  = attribute.Key("agentctl.plan.destroy")
	attrEntries  = attribute.Key("agentctl.manifest.entries")
)

// tracer returns the engine's tracer: TracerProvider's, or one that
// records nothing.
func (e *Engine) tracer() trace.Tracer {
	if e.TracerProvider == nil {
		return noop.Tracer{}
	}
	return e.TracerProvider.Tracer(tracerName)
}

// startSpan starts an engine span with attrs.
func (e *Engine) startSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return e.tracer().Start(ctx, name, trace.WithAttributes(attrs...))
}

// endSpan ends span with err's outcome: its kind as error.type and the
// status description, never its text (it may quote a tool's output or a
// provider's response).
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		kind := "error"
		switch {
		case errors.Is(err, errRunAwaiting):
			kind = "awaiting_approval"
		case errors.Is(err, errRunInterrupted), errors.Is(err, errNotStarted), errors.Is(err, context.Canceled):
			kind = "interrupted"
		case errors.Is(err, errUnchanged):
			kind = ""
		}
		if kind != "" {
			span.SetAttributes(semconv.ErrorTypeKey.String(kind))
		}
		if kind != "" && kind != "awaiting_approval" {
			span.SetStatus(codes.Error, kind)
		}
	}
	span.End()
}

// traceID is the trace of the span in ctx, "" when none is recorded.
func traceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return sc.TraceID().String()
}

// runSpanResult records a run's outcome on its span.
func runSpanResult(span trace.Span, r *state.Run) {
	if r == nil || !span.IsRecording() {
		return
	}
	span.SetAttributes(
		attrStatus.String(r.Status),
		attrTurns.Int(r.Turns),
		semconv.GenAIUsageInputTokens(int(r.Usage.InputTokens)),
		semconv.GenAIUsageOutputTokens(int(r.Usage.OutputTokens)),
	)
}

// modelProviderType is the type of the model provider agent a uses.
func (e *Engine) modelProviderType(a *config.Agent) string {
	if p := e.Config.Providers[providerKey(e.Config.ModelProvider(a))]; p != nil {
		return p.Type
	}
	return ""
}
