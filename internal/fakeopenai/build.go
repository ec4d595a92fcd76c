package fakeopenai

import (
	"fmt"
	"time"
)

// builder renders one Reply in the wire shapes of the two APIs.
type builder struct {
	reply Reply
	req   map[string]any
	seq   int
}

type obj = map[string]any

func (b *builder) responseID() string {
	if b.reply.ID != "" {
		return b.reply.ID
	}
	return fmt.Sprintf("resp_fake_%d", b.seq)
}

func (b *builder) model() string {
	if m, ok := b.req["model"].(string); ok && m != "" {
		return m
	}
	return "fake-model"
}

// outputItems returns the completed Responses output items.
func (b *builder) outputItems() []obj {
	r := b.reply
	var items []obj
	if r.Reasoning != nil {
		summary := []any{}
		for _, s := range r.Reasoning.Summary {
			summary = append(summary, obj{"type": "summary_text", "text": s})
		}
		it := obj{"type": "reasoning", "id": orDefault(r.Reasoning.ID, fmt.Sprintf("rs_fake_%d", b.seq)), "summary": summary}
		if r.Reasoning.EncryptedContent != "" {
			it["encrypted_content"] = r.Reasoning.EncryptedContent
		}
		items = append(items, it)
	}
	if r.Compaction != nil {
		items = append(items, obj{
			"type": "compaction", "id": orDefault(r.Compaction.ID, fmt.Sprintf("cmp_fake_%d", b.seq)),
			"encrypted_content": r.Compaction.EncryptedContent,
		})
	}
	items = append(items, r.Hosted...)
	if r.Text != "" {
		items = append(items, obj{
			"type": "message", "id": fmt.Sprintf("msg_fake_%d", b.seq), "role": "assistant", "status": "completed",
			"content": []any{obj{"type": "output_text", "text": r.Text, "annotations": []any{}, "logprobs": []any{}}},
		})
	}
	for i, c := range r.Calls {
		items = append(items, obj{
			"type": "function_call", "id": fmt.Sprintf("fc_fake_%d_%d", b.seq, i), "call_id": c.CallID,
			"name": c.Name, "arguments": c.Arguments, "status": "completed",
		})
	}
	return items
}

func (b *builder) usage() obj {
	u := b.reply.Usage
	return obj{
		"input_tokens":          u.InputTokens,
		"input_tokens_details":  obj{"cached_tokens": u.CachedTokens, "cache_write_tokens": 0},
		"output_tokens":         u.OutputTokens,
		"output_tokens_details": obj{"reasoning_tokens": u.ReasoningTokens},
		"total_tokens":          u.InputTokens + u.OutputTokens,
	}
}

// response is the Response object with the given status; output and
// usage are only filled in once completed.
func (b *builder) response(status string) obj {
	tools, _ := b.req["tools"].([]any)
	if tools == nil {
		tools = []any{}
	}
	var instructions any
	if s, ok := b.req["instructions"].(string); ok {
		instructions = s
	}
	parallel := true
	if p, ok := b.req["parallel_tool_calls"].(bool); ok {
		parallel = p
	}
	toolChoice := any("auto")
	if tc, ok := b.req["tool_choice"]; ok && tc != nil {
		toolChoice = tc
	}
	resp := obj{
		"id": b.responseID(), "object": "response", "created_at": time.Now().Unix(), "status": status,
		"error": nil, "incomplete_details": nil, "instructions": instructions, "model": b.model(),
		"output": []any{}, "parallel_tool_calls": parallel, "tool_choice": toolChoice, "tools": tools,
		"metadata": obj{}, "store": false, "temperature": numOr(b.req["temperature"], 1), "top_p": numOr(b.req["top_p"], 1),
	}
	// What the request set is echoed, as the service does.
	for _, k := range []string{"metadata", "store", "truncation", "max_output_tokens", "prompt_cache_retention"} {
		if v, ok := b.req[k]; ok && v != nil {
			resp[k] = v
		}
	}
	if status == "completed" {
		items := b.outputItems()
		out := make([]any, len(items))
		for i, it := range items {
			out[i] = it
		}
		resp["output"] = out
		resp["usage"] = b.usage()
		resp["completed_at"] = time.Now().Unix()
	}
	return resp
}

// responseEvents is the SSE event sequence of a streamed response.
func (b *builder) responseEvents() []obj {
	var evs []obj
	add := func(typ string, fields obj) {
		fields["type"] = typ
		fields["sequence_number"] = len(evs)
		evs = append(evs, fields)
	}
	add("response.created", obj{"response": b.response("in_progress")})
	add("response.in_progress", obj{"response": b.response("in_progress")})
	for i, it := range b.outputItems() {
		id, _ := it["id"].(string)
		switch it["type"] {
		case "message":
			added := obj{"type": "message", "id": id, "role": "assistant", "status": "in_progress", "content": []any{}}
			add("response.output_item.added", obj{"output_index": i, "item": added})
			add("response.content_part.added", obj{"item_id": id, "output_index": i, "content_index": 0,
				"part": obj{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}})
			for _, d := range splitText(b.reply.Text) {
				add("response.output_text.delta", obj{"item_id": id, "output_index": i, "content_index": 0, "delta": d, "logprobs": []any{}})
			}
			add("response.output_text.done", obj{"item_id": id, "output_index": i, "content_index": 0, "text": b.reply.Text, "logprobs": []any{}})
			add("response.content_part.done", obj{"item_id": id, "output_index": i, "content_index": 0,
				"part": obj{"type": "output_text", "text": b.reply.Text, "annotations": []any{}, "logprobs": []any{}}})
		case "function_call":
			added := obj{"type": "function_call", "id": id, "call_id": it["call_id"], "name": it["name"], "arguments": "", "status": "in_progress"}
			add("response.output_item.added", obj{"output_index": i, "item": added})
			args, _ := it["arguments"].(string)
			for _, d := range splitText(args) {
				add("response.function_call_arguments.delta", obj{"item_id": id, "output_index": i, "delta": d})
			}
			add("response.function_call_arguments.done", obj{"item_id": id, "output_index": i, "name": it["name"], "arguments": args})
		case "reasoning":
			add("response.output_item.added", obj{"output_index": i, "item": obj{"type": "reasoning", "id": id, "summary": []any{}}})
			if sum, ok := it["summary"].([]any); ok {
				for j, s := range sum {
					text := s.(obj)["text"].(string)
					add("response.reasoning_summary_part.added", obj{"item_id": id, "output_index": i, "summary_index": j, "part": obj{"type": "summary_text", "text": ""}})
					add("response.reasoning_summary_text.delta", obj{"item_id": id, "output_index": i, "summary_index": j, "delta": text})
					add("response.reasoning_summary_text.done", obj{"item_id": id, "output_index": i, "summary_index": j, "text": text})
					add("response.reasoning_summary_part.done", obj{"item_id": id, "output_index": i, "summary_index": j, "part": obj{"type": "summary_text", "text": text}})
				}
			}
		default:
			add("response.output_item.added", obj{"output_index": i, "item": it})
		}
		add("response.output_item.done", obj{"output_index": i, "item": it})
	}
	add("response.completed", obj{"response": b.response("completed")})
	return evs
}

func (b *builder) chatID() string {
	return fmt.Sprintf("chatcmpl-fake-%d", b.seq)
}

func (b *builder) chatUsage() obj {
	u := b.reply.Usage
	return obj{
		"prompt_tokens": u.InputTokens, "completion_tokens": u.OutputTokens,
		"total_tokens":              u.InputTokens + u.OutputTokens,
		"prompt_tokens_details":     obj{"cached_tokens": u.CachedTokens},
		"completion_tokens_details": obj{"reasoning_tokens": u.ReasoningTokens},
	}
}

func (b *builder) finishReason() string {
	if len(b.reply.Calls) > 0 {
		return "tool_calls"
	}
	return "stop"
}

// chatCompletion is the non-streaming chat.completion object.
func (b *builder) chatCompletion() obj {
	var content any
	if b.reply.Text != "" {
		content = b.reply.Text
	}
	msg := obj{"role": "assistant", "content": content, "refusal": nil}
	if len(b.reply.Calls) > 0 {
		var calls []any
		for _, c := range b.reply.Calls {
			calls = append(calls, obj{"id": c.CallID, "type": "function", "function": obj{"name": c.Name, "arguments": c.Arguments}})
		}
		msg["tool_calls"] = calls
	}
	return obj{
		"id": b.chatID(), "object": "chat.completion", "created": time.Now().Unix(), "model": b.model(),
		"choices": []any{obj{"index": 0, "message": msg, "finish_reason": b.finishReason(), "logprobs": nil}},
		"usage":   b.chatUsage(),
	}
}

// chatChunks is the chat.completion.chunk sequence of a streamed answer.
func (b *builder) chatChunks() []obj {
	created := time.Now().Unix()
	chunk := func(delta obj, finish any) obj {
		return obj{
			"id": b.chatID(), "object": "chat.completion.chunk", "created": created, "model": b.model(),
			"choices": []any{obj{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}},
		}
	}
	out := []obj{chunk(obj{"role": "assistant", "content": ""}, nil)}
	for _, d := range splitText(b.reply.Text) {
		out = append(out, chunk(obj{"content": d}, nil))
	}
	for i, c := range b.reply.Calls {
		out = append(out, chunk(obj{"tool_calls": []any{obj{"index": i, "id": c.CallID, "type": "function",
			"function": obj{"name": c.Name, "arguments": ""}}}}, nil))
		for _, d := range splitText(c.Arguments) {
			out = append(out, chunk(obj{"tool_calls": []any{obj{"index": i, "function": obj{"arguments": d}}}}, nil))
		}
	}
	out = append(out, chunk(obj{}, b.finishReason()))
	if so, ok := b.req["stream_options"].(map[string]any); ok && so["include_usage"] == true {
		out = append(out, obj{
			"id": b.chatID(), "object": "chat.completion.chunk", "created": created, "model": b.model(),
			"choices": []any{}, "usage": b.chatUsage(),
		})
	}
	return out
}

func orDefault(s, d string) string {
	if s != "" {
		return s
	}
	return d
}

func numOr(v any, d float64) float64 {
	if f, ok := v.(float64); ok {
		return f
	}
	return d
}
