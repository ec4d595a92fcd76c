package openai

import (
	"context"
	"fmt"
	"sort"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentctl/agentctl/model"
)

// chatOnce makes one streamed Chat Completions call.
func (c *Client) chatOnce(ctx context.Context, req *model.Request, sink func(model.Event)) (*model.Response, error) {
	params, err := chatParams(req)
	if err != nil {
		return nil, permanent(err)
	}
	stream := c.chat.NewStreaming(ctx, params)
	defer stream.Close()

	type call struct {
		id, name string
		args     strings.Builder
		started  bool
	}
	var (
		text     strings.Builder
		calls    = map[int64]*call{}
		id       string
		usage    model.Usage
		finished bool
	)
	for stream.Next() {
		chunk := stream.Current()
		if chunk.ID != "" {
			id = chunk.ID
		}
		if chunk.JSON.Usage.Valid() && chunk.Usage.TotalTokens+chunk.Usage.PromptTokens > 0 {
			usage = model.Usage{
				InputTokens:     chunk.Usage.PromptTokens,
				OutputTokens:    chunk.Usage.CompletionTokens,
				CachedTokens:    chunk.Usage.PromptTokensDetails.CachedTokens,
				ReasoningTokens: chunk.Usage.CompletionTokensDetails.ReasoningTokens,
			}
		}
		for _, ch := range chunk.Choices {
			if ch.Index != 0 {
				continue
			}
			if d := ch.Delta.Content; d != "" {
				text.WriteString(d)
				sink(model.Event{Type: model.EventTextDelta, Delta: d})
			}
			if d := ch.Delta.Refusal; d != "" {
				text.WriteString(d)
				sink(model.Event{Type: model.EventTextDelta, Delta: d})
			}
			for _, tc := range ch.Delta.ToolCalls {
				cl := calls[tc.Index]
				if cl == nil {
					cl = &call{}
					calls[tc.Index] = cl
				}
				if tc.ID != "" {
					cl.id = tc.ID
				}
				if tc.Function.Name != "" {
					cl.name += tc.Function.Name
				}
				cl.args.WriteString(tc.Function.Arguments)
				if !cl.started && cl.id != "" && cl.name != "" {
					cl.started = true
					sink(model.Event{Type: model.EventToolCallStart, Name: cl.name, CallID: cl.id})
				}
			}
			if ch.FinishReason != "" {
				finished = true
			}
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if !finished {
		return nil, errIncomplete
	}
	resp := &model.Response{ID: id, Usage: usage}
	if text.Len() > 0 {
		resp.Output = append(resp.Output, model.Item{Type: model.ItemMessage, Role: "assistant", Text: text.String(), Agent: req.Agent})
	}
	idx := make([]int64, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	for _, i := range idx {
		cl := calls[i]
		callID := cl.id
		if callID == "" {
			callID = fmt.Sprintf("call_%d", i) // some compatible servers omit ids
		}
		resp.Output = append(resp.Output, model.Item{Type: model.ItemFunctionCall, CallID: callID, Name: cl.name, Arguments: cl.args.String(), Agent: req.Agent})
	}
	return resp, nil
}

// chatParams builds the Chat Completions request for a turn.
func chatParams(req *model.Request) (oai.ChatCompletionNewParams, error) {
	p := oai.ChatCompletionNewParams{
		Model:         req.Model,
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
	}
	msgs, err := chatMessages(req.Instructions, req.Input)
	if err != nil {
		return p, err
	}
	p.Messages = msgs
	for _, t := range req.Tools {
		schema, err := schemaMap(t.Parameters)
		if err != nil {
			return p, fmt.Errorf("tool %q: parameters: %w", t.Name, err)
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(schema)}
		if t.Description != "" {
			fd.Description = param.NewOpt(t.Description)
		}
		if t.Strict {
			fd.Strict = param.NewOpt(true)
		}
		p.Tools = append(p.Tools, oai.ChatCompletionToolUnionParam{OfFunction: &oai.ChatCompletionFunctionToolParam{Function: fd}})
	}
	if len(req.HostedTools) > 0 {
		return p, fmt.Errorf("the Chat Completions API has no hosted tools (%s is one)", req.HostedTools[0].Type)
	}
	if err := chatSettings(&p, req); err != nil {
		return p, err
	}
	if len(req.OutputSchema) > 0 {
		schema, err := schemaMap(req.OutputSchema)
		if err != nil {
			return p, fmt.Errorf("output schema: %w", err)
		}
		p.ResponseFormat = oai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: SchemaName(req.OutputSchemaName), Schema: schema, Strict: param.NewOpt(true)},
		}}
	}
	return p, nil
}

// chatSettings sets the request fields of req's settings; one the Chat
// Completions API does not accept is an error (the configuration refuses
// it first).
func chatSettings(p *oai.ChatCompletionNewParams, req *model.Request) error {
	s := req.Settings
	if name := unsupported(s, responsesOnly); name != "" {
		return fmt.Errorf("the Chat Completions API does not accept the setting %s", name)
	}
	if s.ReasoningEffort != "" {
		p.ReasoningEffort = shared.ReasoningEffort(s.ReasoningEffort)
	}
	if s.Verbosity != "" {
		p.Verbosity = oai.ChatCompletionNewParamsVerbosity(s.Verbosity)
	}
	if s.Temperature != nil {
		p.Temperature = param.NewOpt(*s.Temperature)
	}
	if s.TopP != nil {
		p.TopP = param.NewOpt(*s.TopP)
	}
	if s.MaxOutputTokens > 0 {
		p.MaxCompletionTokens = param.NewOpt(s.MaxOutputTokens)
	}
	if s.ParallelToolCalls != nil && len(req.Tools) > 0 {
		p.ParallelToolCalls = param.NewOpt(*s.ParallelToolCalls)
	}
	switch s.ToolChoice {
	case "":
	case "auto", "none", "required":
		p.ToolChoice = oai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: param.NewOpt(s.ToolChoice)}
	default:
		p.ToolChoice = oai.ChatCompletionToolChoiceOptionUnionParam{OfFunctionToolChoice: &oai.ChatCompletionNamedToolChoiceParam{
			Function: oai.ChatCompletionNamedToolChoiceFunctionParam{Name: s.ToolChoice},
		}}
	}
	if s.FrequencyPenalty != nil {
		p.FrequencyPenalty = param.NewOpt(*s.FrequencyPenalty)
	}
	if s.PresencePenalty != nil {
		p.PresencePenalty = param.NewOpt(*s.PresencePenalty)
	}
	if s.Store != nil {
		p.Store = param.NewOpt(*s.Store)
	}
	if len(s.Metadata) > 0 {
		p.Metadata = shared.Metadata(s.Metadata)
	}
	if s.PromptCacheRetention != "" {
		p.PromptCacheRetention = oai.ChatCompletionNewParamsPromptCacheRetention(s.PromptCacheRetention)
	}
	if s.PromptCacheMode != "" || s.PromptCacheTTL != "" {
		p.PromptCacheOptions = oai.ChatCompletionNewParamsPromptCacheOptions{Mode: s.PromptCacheMode, Ttl: s.PromptCacheTTL}
	}
	return nil
}

// chatMessages converts instructions and conversation items to chat
// messages: consecutive function calls become one assistant message with
// tool_calls, outputs become tool messages, and images returned by tools
// (which tool messages cannot carry) follow in a user message. Reasoning
// and compaction items belong to the Responses API and are skipped.
func chatMessages(instructions string, items []model.Item) ([]oai.ChatCompletionMessageParamUnion, error) {
	var msgs []oai.ChatCompletionMessageParamUnion
	if instructions != "" {
		msgs = append(msgs, oai.SystemMessage(instructions))
	}
	var pendingImages []oai.ChatCompletionContentPartUnionParam
	flushImages := func() {
		if len(pendingImages) > 0 {
			msgs = append(msgs, oai.UserMessage(pendingImages))
			pendingImages = nil
		}
	}
	for i := 0; i < len(items); i++ {
		it := items[i]
		if it.Type != model.ItemFunctionCallOutput {
			flushImages()
		}
		switch it.Type {
		case model.ItemMessage:
			switch it.Role {
			case "assistant":
				msgs = append(msgs, oai.AssistantMessage(it.Text))
			case "system":
				msgs = append(msgs, oai.SystemMessage(it.Text))
			case "developer":
				msgs = append(msgs, oai.DeveloperMessage(it.Text))
			case "user", "":
				if len(it.Images) == 0 {
					msgs = append(msgs, oai.UserMessage(it.Text))
					continue
				}
				var parts []oai.ChatCompletionContentPartUnionParam
				if it.Text != "" {
					parts = append(parts, oai.TextContentPart(it.Text))
				}
				for _, img := range it.Images {
					parts = append(parts, oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: dataURL(img), Detail: detail(img)}))
				}
				msgs = append(msgs, oai.UserMessage(parts))
			default:
				return nil, fmt.Errorf("input item %d: unknown message role %q", i, it.Role)
			}
		case model.ItemFunctionCall:
			am := &oai.ChatCompletionAssistantMessageParam{}
			// A preceding assistant text message and the calls form one turn.
			if n := len(msgs); n > 0 && msgs[n-1].OfAssistant != nil && len(msgs[n-1].OfAssistant.ToolCalls) == 0 {
				am = msgs[n-1].OfAssistant
				msgs = msgs[:n-1]
			}
			for ; i < len(items) && items[i].Type == model.ItemFunctionCall; i++ {
				fc := items[i]
				am.ToolCalls = append(am.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
					ID:       fc.CallID,
					Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: fc.Name, Arguments: fc.Arguments},
				}})
			}
			i--
			msgs = append(msgs, oai.ChatCompletionMessageParamUnion{OfAssistant: am})
		case model.ItemFunctionCallOutput:
			msgs = append(msgs, oai.ToolMessage(it.Output, it.CallID))
			if len(it.Images) > 0 {
				pendingImages = append(pendingImages, oai.TextContentPart(fmt.Sprintf("Image(s) returned by tool call %s:", it.CallID)))
				for _, img := range it.Images {
					pendingImages = append(pendingImages, oai.ImageContentPart(oai.ChatCompletionContentPartImageImageURLParam{URL: dataURL(img), Detail: detail(img)}))
				}
			}
		case model.ItemReasoning, model.ItemCompaction, model.ItemHostedToolCall:
			// Not representable in Chat Completions (a hosted tool call
			// comes from an agent on the Responses API before a handoff;
			// what it found is in the messages that follow it).
		default:
			return nil, fmt.Errorf("input item %d: unknown item type %q", i, it.Type)
		}
	}
	flushImages()
	return msgs, nil
}
