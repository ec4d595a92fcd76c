package openai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentctl/agentctl/model"
)

// responsesOnce makes one streamed Responses API call. A model that
// rejects the encrypted-reasoning include is remembered and asked again
// without it.
func (c *Client) responsesOnce(ctx context.Context, req *model.Request, sink func(model.Event)) (*model.Response, error) {
	_, refused := c.noEncrypted.Load(req.Model)
	resp, err := c.responsesStream(ctx, req, sink, !refused)
	var apiErr *oai.Error
	if !refused && errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusBadRequest && apiErr.Param == "include" {
		c.noEncrypted.Store(req.Model, true)
		return c.responsesStream(ctx, req, sink, false)
	}
	return resp, err
}

func (c *Client) responsesStream(ctx context.Context, req *model.Request, sink func(model.Event), encrypted bool) (*model.Response, error) {
	params, err := responsesParams(req)
	if err != nil {
		return nil, permanent(err)
	}
	if !encrypted {
		params.Include = slices.DeleteFunc(params.Include, func(i responses.ResponseIncludable) bool {
			return i == responses.ResponseIncludableReasoningEncryptedContent
		})
		if len(params.Include) == 0 {
			params.Include = nil
		}
	}
	stream := c.responses.NewStreaming(ctx, params)
	defer stream.Close()

	done := map[int64]responses.ResponseOutputItemUnion{}
	var final *responses.Response
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			sink(model.Event{Type: model.EventTextDelta, Delta: ev.Delta})
		case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
			sink(model.Event{Type: model.EventReasoning, Delta: ev.Delta})
		case "response.output_item.added":
			if ev.Item.Type == "function_call" {
				sink(model.Event{Type: model.EventToolCallStart, Name: ev.Item.Name, CallID: ev.Item.CallID})
			}
		case "response.output_item.done":
			done[ev.OutputIndex] = ev.Item
			if hostedCallTypes[ev.Item.Type] {
				sink(model.Event{Type: model.EventHostedToolCall, Name: ev.Item.Type, CallID: ev.Item.ID,
					Delta: HostedCallSummary(ev.Item.Type, json.RawMessage(ev.Item.RawJSON()))})
			}
		case "response.completed", "response.incomplete":
			r := ev.Response
			final = &r
		case "response.failed":
			msg, code := ev.Response.Error.Message, string(ev.Response.Error.Code)
			return nil, streamFailure(code, msg)
		case "error":
			return nil, streamFailure(ev.Code, ev.Message)
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	if final == nil {
		return nil, errIncomplete
	}
	out := final.Output
	if len(out) == 0 && len(done) > 0 {
		idx := make([]int64, 0, len(done))
		for i := range done {
			idx = append(idx, i)
		}
		sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
		for _, i := range idx {
			out = append(out, done[i])
		}
	}
	resp := &model.Response{ID: final.ID, Usage: model.Usage{
		InputTokens:     final.Usage.InputTokens,
		OutputTokens:    final.Usage.OutputTokens,
		CachedTokens:    final.Usage.InputTokensDetails.CachedTokens,
		ReasoningTokens: final.Usage.OutputTokensDetails.ReasoningTokens,
	}}
	for _, it := range out {
		if item, ok := outputItem(it, req.Agent); ok {
			resp.Output = append(resp.Output, item)
		}
	}
	return resp, nil
}

// hostedCallTypes are the output item types of hosted tool calls.
var hostedCallTypes = map[string]bool{"web_search_call": true, "file_search_call": true, "code_interpreter_call": true, "image_generation_call": true}

// streamFailure turns an in-stream error into an error; server-side
// failures are retried, everything else (invalid prompt, ...) is not.
func streamFailure(code, msg string) error {
	err := fmt.Errorf("%w: %s (%s)", errFailed, msg, code)
	switch code {
	case "server_error", "rate_limit_exceeded", "":
		return err
	}
	return permanent(err)
}

// outputItem converts one Responses output item to a model.Item.
func outputItem(it responses.ResponseOutputItemUnion, agent string) (model.Item, bool) {
	switch it.Type {
	case "message":
		var text strings.Builder
		for _, part := range it.Content {
			switch part.Type {
			case "output_text":
				text.WriteString(part.Text)
			case "refusal":
				text.WriteString(part.Refusal)
			}
		}
		role := it.Role
		if role == "" {
			role = "assistant"
		}
		return model.Item{Type: model.ItemMessage, Role: role, Text: text.String(), Agent: agent}, true
	case "function_call":
		fc := it.AsFunctionCall()
		return model.Item{Type: model.ItemFunctionCall, CallID: fc.CallID, Name: fc.Name, Arguments: fc.Arguments, Agent: agent}, true
	case "reasoning":
		var summary []string
		for _, s := range it.Summary {
			summary = append(summary, s.Text)
		}
		return model.Item{Type: model.ItemReasoning, Text: strings.Join(summary, "\n"), Raw: json.RawMessage(it.RawJSON()), Agent: agent}, true
	case "compaction":
		return model.Item{Type: model.ItemCompaction, Raw: json.RawMessage(it.RawJSON()), Agent: agent}, true
	case "web_search_call", "file_search_call", "code_interpreter_call", "image_generation_call":
		raw := json.RawMessage(it.RawJSON())
		return model.Item{Type: model.ItemHostedToolCall, Name: it.Type, CallID: it.ID, Text: HostedCallSummary(it.Type, raw), Raw: raw, Agent: agent}, true
	}
	return model.Item{}, false
}

// FromLastCompaction drops the items before the last compaction item: the
// compaction item stands for everything before it.
func FromLastCompaction(items []model.Item) []model.Item {
	for i := len(items) - 1; i >= 0; i-- {
		if items[i].Type == model.ItemCompaction {
			return items[i:]
		}
	}
	return items
}

// responsesParams builds the Responses API request for a turn.
func responsesParams(req *model.Request) (responses.ResponseNewParams, error) {
	p := responses.ResponseNewParams{
		Model: req.Model,
		// Stateless: the whole conversation is replayed each turn, with
		// reasoning carried as encrypted content (dropped again for
		// models that refuse it, see responsesOnce).
		Store:   param.NewOpt(false),
		Include: []responses.ResponseIncludable{responses.ResponseIncludableReasoningEncryptedContent},
	}
	if req.Instructions != "" {
		p.Instructions = param.NewOpt(req.Instructions)
	}
	input, err := responsesInput(req.Input)
	if err != nil {
		return p, err
	}
	p.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}

	for _, t := range req.Tools {
		schema, err := schemaMap(t.Parameters)
		if err != nil {
			return p, fmt.Errorf("tool %q: parameters: %w", t.Name, err)
		}
		ft := &responses.FunctionToolParam{Name: t.Name, Parameters: schema, Strict: param.NewOpt(t.Strict)}
		if t.Description != "" {
			ft.Description = param.NewOpt(t.Description)
		}
		p.Tools = append(p.Tools, responses.ToolUnionParam{OfFunction: ft})
	}
	for _, t := range req.HostedTools {
		u, err := hostedToolParam(t)
		if err != nil {
			return p, err
		}
		p.Tools = append(p.Tools, u)
	}
	if err := responsesSettings(&p, req); err != nil {
		return p, err
	}
	if len(req.OutputSchema) > 0 {
		schema, err := schemaMap(req.OutputSchema)
		if err != nil {
			return p, fmt.Errorf("output schema: %w", err)
		}
		p.Text.Format = responses.ResponseFormatTextConfigUnionParam{OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{
			Name: SchemaName(req.OutputSchemaName), Schema: schema, Strict: param.NewOpt(true),
		}}
	}
	if req.Compaction != nil {
		p.ContextManagement = []responses.ResponseNewParamsContextManagement{{
			Type:             "compaction",
			CompactThreshold: param.NewOpt(CompactionThreshold(req.Model, req.Compaction.Threshold)),
		}}
	}
	return p, nil
}

// responsesSettings sets the request fields of req's settings; one the
// Responses API does not accept is an error (the configuration refuses
// it first).
func responsesSettings(p *responses.ResponseNewParams, req *model.Request) error {
	s := req.Settings
	if name := unsupported(s, chatOnly); name != "" {
		return fmt.Errorf("the Responses API does not accept the setting %s", name)
	}
	if s.ReasoningEffort != "" || s.ReasoningSummary != "" {
		p.Reasoning = shared.ReasoningParam{Effort: shared.ReasoningEffort(s.ReasoningEffort), Summary: shared.ReasoningSummary(s.ReasoningSummary)}
	}
	if s.Temperature != nil {
		p.Temperature = param.NewOpt(*s.Temperature)
	}
	if s.TopP != nil {
		p.TopP = param.NewOpt(*s.TopP)
	}
	if s.MaxOutputTokens > 0 {
		p.MaxOutputTokens = param.NewOpt(s.MaxOutputTokens)
	}
	if s.ParallelToolCalls != nil && len(req.Tools)+len(req.HostedTools) > 0 {
		p.ParallelToolCalls = param.NewOpt(*s.ParallelToolCalls)
	}
	p.ToolChoice = responsesToolChoice(s.ToolChoice, req.HostedTools)
	if s.Verbosity != "" {
		p.Text.Verbosity = responses.ResponseTextConfigVerbosity(s.Verbosity)
	}
	if s.Truncation != "" {
		p.Truncation = responses.ResponseNewParamsTruncation(s.Truncation)
	}
	if s.Store != nil {
		p.Store = param.NewOpt(*s.Store)
	}
	if len(s.Metadata) > 0 {
		p.Metadata = shared.Metadata(s.Metadata)
	}
	if s.PromptCacheRetention != "" {
		p.PromptCacheRetention = responses.ResponseNewParamsPromptCacheRetention(s.PromptCacheRetention)
	}
	if s.PromptCacheMode != "" || s.PromptCacheTTL != "" {
		p.PromptCacheOptions = responses.ResponseNewParamsPromptCacheOptions{Mode: s.PromptCacheMode, Ttl: s.PromptCacheTTL}
	}
	for _, inc := range s.Include {
		if i := responses.ResponseIncludable(inc); !slices.Contains(p.Include, i) {
			p.Include = append(p.Include, i)
		}
	}
	return nil
}

// responsesToolChoice is the tool_choice of a request: a mode, the type
// of one of its hosted tools, or a function's name. A hosted tool is
// chosen by its type, except web search, which the API's choice of
// hosted tool does not name: it is the only tool allowed and required.
func responsesToolChoice(choice string, hosted []model.HostedTool) responses.ResponseNewParamsToolChoiceUnion {
	switch choice {
	case "":
		return responses.ResponseNewParamsToolChoiceUnion{}
	case "auto", "none", "required":
		return responses.ResponseNewParamsToolChoiceUnion{OfToolChoiceMode: param.NewOpt(responses.ToolChoiceOptions(choice))}
	}
	for _, h := range hosted {
		if h.Type != choice {
			continue
		}
		if choice == HostedWebSearch {
			return responses.ResponseNewParamsToolChoiceUnion{OfAllowedTools: &responses.ToolChoiceAllowedParam{
				Mode: responses.ToolChoiceAllowedModeRequired, Tools: []map[string]any{{"type": HostedWebSearch}},
			}}
		}
		return responses.ResponseNewParamsToolChoiceUnion{OfHostedTool: &responses.ToolChoiceTypesParam{Type: responses.ToolChoiceTypesType(choice)}}
	}
	return responses.ResponseNewParamsToolChoiceUnion{OfFunctionTool: &responses.ToolChoiceFunctionParam{Name: choice}}
}

// unsupported is the first setting of names that s sets, "" for none.
func unsupported(s model.Settings, names []string) string {
	set := map[string]bool{
		"reasoning_summary": s.ReasoningSummary != "",
		"truncation":        s.Truncation != "",
		"include":           len(s.Include) > 0,
		"frequency_penalty": s.FrequencyPenalty != nil,
		"presence_penalty":  s.PresencePenalty != nil,
	}
	for _, n := range names {
		if set[n] {
			return n
		}
	}
	return ""
}

// hostedToolParam is the tools entry of a hosted tool: its definition
// sent as the configuration built it.
func hostedToolParam(t model.HostedTool) (responses.ToolUnionParam, error) {
	if !json.Valid(t.Config) {
		return responses.ToolUnionParam{}, fmt.Errorf("hosted tool %s: its definition is not JSON", t.Type)
	}
	raw := json.RawMessage(t.Config)
	switch t.Type {
	case HostedWebSearch:
		v := param.Override[responses.WebSearchToolParam](raw)
		return responses.ToolUnionParam{OfWebSearch: &v}, nil
	case HostedFileSearch:
		v := param.Override[responses.FileSearchToolParam](raw)
		return responses.ToolUnionParam{OfFileSearch: &v}, nil
	case HostedCodeInterpreter:
		v := param.Override[responses.ToolCodeInterpreterParam](raw)
		return responses.ToolUnionParam{OfCodeInterpreter: &v}, nil
	case HostedImageGeneration:
		v := param.Override[responses.ToolImageGenerationParam](raw)
		return responses.ToolUnionParam{OfImageGeneration: &v}, nil
	}
	return responses.ToolUnionParam{}, fmt.Errorf("the Responses API has no hosted tool %q", t.Type)
}

// responsesInput converts conversation items to Responses input items,
// starting at the last compaction item.
func responsesInput(items []model.Item) (responses.ResponseInputParam, error) {
	items = FromLastCompaction(items)
	out := make(responses.ResponseInputParam, 0, len(items))
	for i, it := range items {
		switch it.Type {
		case model.ItemMessage:
			role := it.Role
			if role == "" {
				role = "user"
			}
			msg := &responses.EasyInputMessageParam{Role: responses.EasyInputMessageRole(role), Type: responses.EasyInputMessageTypeMessage}
			if len(it.Images) > 0 && role == "user" {
				var parts responses.ResponseInputMessageContentListParam
				if it.Text != "" {
					parts = append(parts, responses.ResponseInputContentUnionParam{OfInputText: &responses.ResponseInputTextParam{Text: it.Text}})
				}
				for _, img := range it.Images {
					parts = append(parts, responses.ResponseInputContentUnionParam{OfInputImage: &responses.ResponseInputImageParam{
						ImageURL: param.NewOpt(dataURL(img)), Detail: responses.ResponseInputImageDetail(detail(img)),
					}})
				}
				msg.Content = responses.EasyInputMessageContentUnionParam{OfInputItemContentList: parts}
			} else {
				msg.Content = responses.EasyInputMessageContentUnionParam{OfString: param.NewOpt(it.Text)}
			}
			out = append(out, responses.ResponseInputItemUnionParam{OfMessage: msg})
		case model.ItemFunctionCall:
			out = append(out, responses.ResponseInputItemUnionParam{OfFunctionCall: &responses.ResponseFunctionToolCallParam{
				CallID: it.CallID, Name: it.Name, Arguments: it.Arguments,
			}})
		case model.ItemFunctionCallOutput:
			fo := &responses.ResponseInputItemFunctionCallOutputParam{CallID: param.NewOpt(it.CallID)}
			if len(it.Images) == 0 {
				fo.Output = responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: param.NewOpt(it.Output)}
			} else {
				var parts responses.ResponseFunctionCallOutputItemListParam
				if it.Output != "" {
					parts = append(parts, responses.ResponseFunctionCallOutputItemUnionParam{OfInputText: &responses.ResponseInputTextContentParam{Text: it.Output}})
				}
				for _, img := range it.Images {
					parts = append(parts, responses.ResponseFunctionCallOutputItemUnionParam{OfInputImage: &responses.ResponseInputImageContentParam{
						ImageURL: param.NewOpt(dataURL(img)), Detail: responses.ResponseInputImageContentDetail(detail(img)),
					}})
				}
				fo.Output = responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfResponseFunctionCallOutputItemArray: parts}
			}
			out = append(out, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: fo})
		case model.ItemReasoning:
			if len(it.Raw) == 0 {
				continue // produced by another provider; nothing to replay
			}
			r, err := reasoningParam(it.Raw)
			if err != nil {
				return nil, fmt.Errorf("input item %d (reasoning): %w", i, err)
			}
			out = append(out, responses.ResponseInputItemUnionParam{OfReasoning: r})
		case model.ItemCompaction:
			var raw struct {
				ID               string `json:"id"`
				EncryptedContent string `json:"encrypted_content"`
			}
			if err := json.Unmarshal(it.Raw, &raw); err != nil || raw.EncryptedContent == "" {
				return nil, fmt.Errorf("input item %d (compaction): no encrypted content to replay", i)
			}
			cp := &responses.ResponseCompactionItemParam{EncryptedContent: raw.EncryptedContent}
			if raw.ID != "" {
				cp.ID = param.NewOpt(raw.ID)
			}
			out = append(out, responses.ResponseInputItemUnionParam{OfCompaction: cp})
		case model.ItemHostedToolCall:
			u, err := hostedCallParam(it)
			if err != nil {
				return nil, fmt.Errorf("input item %d (%s): %w", i, it.Name, err)
			}
			out = append(out, u)
		default:
			return nil, fmt.Errorf("input item %d: unknown item type %q", i, it.Type)
		}
	}
	return out, nil
}

// hostedCallParam replays a hosted tool call as the service returned it.
func hostedCallParam(it model.Item) (responses.ResponseInputItemUnionParam, error) {
	if len(it.Raw) == 0 || !json.Valid(it.Raw) {
		return responses.ResponseInputItemUnionParam{}, errors.New("the call was not recorded as the service returned it, so it cannot be replayed")
	}
	raw := json.RawMessage(it.Raw)
	switch it.Name {
	case "web_search_call":
		v := param.Override[responses.ResponseFunctionWebSearchParam](raw)
		return responses.ResponseInputItemUnionParam{OfWebSearchCall: &v}, nil
	case "file_search_call":
		v := param.Override[responses.ResponseFileSearchToolCallParam](raw)
		return responses.ResponseInputItemUnionParam{OfFileSearchCall: &v}, nil
	case "code_interpreter_call":
		v := param.Override[responses.ResponseCodeInterpreterToolCallParam](raw)
		return responses.ResponseInputItemUnionParam{OfCodeInterpreterCall: &v}, nil
	case "image_generation_call":
		v := param.Override[responses.ResponseInputItemImageGenerationCallParam](raw)
		return responses.ResponseInputItemUnionParam{OfImageGenerationCall: &v}, nil
	}
	return responses.ResponseInputItemUnionParam{}, fmt.Errorf("unknown hosted tool call type %q", it.Name)
}

// reasoningParam rebuilds a reasoning input item from the output item the
// API returned, keeping only the fields an input item may carry.
func reasoningParam(raw json.RawMessage) (*responses.ResponseReasoningItemParam, error) {
	var r struct {
		ID      string `json:"id"`
		Summary []struct {
			Text string `json:"text"`
		} `json:"summary"`
		EncryptedContent *string `json:"encrypted_content"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("decoding the stored item: %w", err)
	}
	if r.ID == "" {
		return nil, errors.New("the stored item has no id")
	}
	p := &responses.ResponseReasoningItemParam{ID: r.ID, Summary: []responses.ResponseReasoningItemSummaryParam{}}
	for _, s := range r.Summary {
		p.Summary = append(p.Summary, responses.ResponseReasoningItemSummaryParam{Text: s.Text})
	}
	if r.EncryptedContent != nil {
		p.EncryptedContent = param.NewOpt(*r.EncryptedContent)
	}
	return p, nil
}

func schemaMap(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 {
		return map[string]any{"type": "object", "properties": map[string]any{}}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if m == nil { // null
		m = map[string]any{"type": "object", "properties": map[string]any{}}
	}
	return m, nil
}

var schemaNameBad = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^a-zA-Z0-9_-]+`) })

// SchemaName makes a valid json_schema format name (letters, digits, _
// and -, at most 64) from name, "final_output" when empty.
func SchemaName(name string) string {
	name = schemaNameBad().ReplaceAllString(name, "_")
	if name == "" {
		name = "final_output"
	}
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

func dataURL(img model.Image) string {
	mt := img.MediaType
	if mt == "" {
		mt = "image/png"
	}
	return "data:" + mt + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
}

func detail(img model.Image) string {
	if img.Detail == "" {
		return "auto"
	}
	return img.Detail
}
