package agentloop

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/agentctl/agentctl/internal/telemetry"
	"github.com/agentctl/agentctl/model"
)

// Span attributes of agentctl's own, beside the GenAI semantic
// conventions' (docs/observability.md). No attribute holds a value a
// model, a tool or a user wrote: arguments and outputs are described by
// their length and SHA-256 digest.
const (
	attrTurn          = attribute.Key("agentctl.turn")
	attrResumed       = attribute.Key("agentctl.turn.resumed")
	attrPath          = attribute.Key("agentctl.agent_tool.path")
	attrArgsLen       = attribute.Key("agentctl.tool.arguments.length")
	attrArgsDigest    = attribute.Key("agentctl.tool.arguments.sha256")
	attrOutLen        = attribute.Key("agentctl.tool.output.length")
	attrOutDigest     = attribute.Key("agentctl.tool.output.sha256")
	attrHandoff       = attribute.Key("agentctl.handoff.target")
	attrCalls         = attribute.Key("agentctl.response.tool_calls")
	attrDecision      = attribute.Key("agentctl.approval.decision")
	attrDecisionSrc   = attribute.Key("agentctl.approval.source")
	attrReasoningToks = attribute.Key("agentctl.usage.reasoning_tokens")
	attrCachedToks    = attribute.Key("agentctl.usage.cached_tokens")
	attrFallback      = attribute.Key("agentctl.model_fallback")
	attrHostedCalls   = attribute.Key("agentctl.response.hosted_tool_calls")
	attrInputFilter   = attribute.Key("agentctl.handoff.input_filter")
)

// tracer returns the runner's tracer, or one that records nothing.
func (r *Runner) tracer() trace.Tracer {
	if r.Tracer != nil {
		return r.Tracer
	}
	return noop.Tracer{}
}

// endSpan ends span with err's outcome. The status description is the
// kind of failure, never the error's text (it may quote a model's or a
// tool's words).
func endSpan(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		kind := "error"
		switch {
		case errors.Is(err, ErrInterrupted) || errors.Is(err, context.Canceled):
			kind = "interrupted"
		case errors.Is(err, ErrMaxTurns):
			kind = "max_turns"
		case errors.As(err, new(*AwaitingApprovalError)):
			kind = "awaiting_approval"
		case errors.As(err, new(*modelError)):
			kind = "model_error"
		case model.IsUnavailable(err):
			kind = "model_unavailable"
		}
		span.SetAttributes(semconv.ErrorTypeKey.String(kind))
		if kind != "awaiting_approval" {
			span.SetStatus(codes.Error, kind)
		}
	}
	span.End()
}

// startTurn starts the span of one agent turn: the model call and the
// tool calls answering its response.
func (f *frame) startTurn(ctx context.Context, resumed bool) (context.Context, trace.Span) {
	turn := f.turns + 1
	if resumed {
		turn = f.turns
	}
	ctx, span := f.st.r.tracer().Start(ctx, "invoke_agent "+f.agent, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(semconv.GenAIOperationNameInvokeAgent, semconv.GenAIAgentName(f.agent), attrTurn.Int(turn))
		if resumed {
			span.SetAttributes(attrResumed.Bool(true))
		}
		if f.path != "" {
			span.SetAttributes(attrPath.String(f.path))
		}
	}
	return ctx, span
}

// startChat starts the span of one model call to modelName; fallback
// says it is one of the agent's model_fallback models.
func (f *frame) startChat(ctx context.Context, a *Agent, modelName string, fallback bool) (context.Context, trace.Span) {
	ctx, span := f.st.r.tracer().Start(ctx, "chat "+modelName, trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		span.SetAttributes(semconv.GenAIOperationNameChat, semconv.GenAIRequestModel(modelName), semconv.GenAIAgentName(a.Name))
		if a.Provider != "" {
			span.SetAttributes(semconv.GenAIProviderNameKey.String(a.Provider))
		}
		if fallback {
			span.SetAttributes(attrFallback.Bool(true))
		}
	}
	return ctx, span
}

// chatResult records what a model call to modelName returned: the model
// that answered, and what it answered.
func chatResult(span trace.Span, modelName string, resp *model.Response) {
	if !span.IsRecording() || resp == nil {
		return
	}
	span.SetAttributes(semconv.GenAIResponseModel(modelName))
	if n := hostedCalls(resp); n > 0 {
		span.SetAttributes(attrHostedCalls.Int(n))
	}
	calls := len(resp.FunctionCalls())
	finish := "stop"
	if calls > 0 {
		finish = "tool_calls"
	}
	span.SetAttributes(
		semconv.GenAIUsageInputTokens(int(resp.Usage.InputTokens)),
		semconv.GenAIUsageOutputTokens(int(resp.Usage.OutputTokens)),
		semconv.GenAIResponseFinishReasons(finish),
		attrCalls.Int(calls),
	)
	if resp.Usage.ReasoningTokens > 0 {
		span.SetAttributes(attrReasoningToks.Int64(resp.Usage.ReasoningTokens))
	}
	if resp.Usage.CachedTokens > 0 {
		span.SetAttributes(attrCachedToks.Int64(resp.Usage.CachedTokens))
	}
}

// startTool starts the span of one tool call.
func (f *frame) startTool(ctx context.Context, a *Agent, call model.Item) (context.Context, trace.Span) {
	ctx, span := f.st.r.tracer().Start(ctx, "execute_tool "+call.Name, trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(
			semconv.GenAIOperationNameExecuteTool,
			semconv.GenAIToolName(call.Name),
			semconv.GenAIToolCallID(call.CallID),
			semconv.GenAIToolTypeKey.String("function"),
			semconv.GenAIAgentName(a.Name),
			attrArgsLen.Int(len(call.Arguments)),
			attrArgsDigest.String(telemetry.Digest(call.Arguments)),
		)
	}
	return ctx, span
}

// toolResult records a tool call's outcome: its output's length and
// digest, its exit code, whether it failed, the handoff it took.
func toolResult(span trace.Span, text string, exitCode *int, isErr bool, handoff string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrOutLen.Int(len(text)), attrOutDigest.String(telemetry.Digest(text)))
	if exitCode != nil {
		span.SetAttributes(semconv.ProcessExitCode(*exitCode))
	}
	if handoff != "" {
		span.SetAttributes(attrHandoff.String(handoff))
	}
	if isErr {
		span.SetAttributes(semconv.ErrorTypeKey.String("tool_error"))
		span.SetStatus(codes.Error, "tool_error")
	}
}

// approvalSpan records one call's approval: where its decision came from
// and what it was.
func (f *frame) approvalSpan(ctx context.Context, a *Agent, call model.Item) (context.Context, func(decision, source string)) {
	ctx, span := f.st.r.tracer().Start(ctx, "approval "+call.Name)
	if span.IsRecording() {
		span.SetAttributes(semconv.GenAIToolName(call.Name), semconv.GenAIToolCallID(call.CallID), semconv.GenAIAgentName(a.Name))
	}
	return ctx, func(decision, source string) {
		span.SetAttributes(attrDecision.String(decision), attrDecisionSrc.String(source))
		span.End()
	}
}

// hostedCalls counts the hosted tool calls of resp.
func hostedCalls(resp *model.Response) int {
	n := 0
	for _, it := range resp.Output {
		if it.Type == model.ItemHostedToolCall {
			n++
		}
	}
	return n
}
