package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/conversations"
	"github.com/openai/openai-go/v3/responses"
)

// The guide's continuation loop, over the ways a client can continue a response.

// send makes one response from the items that are new since the last one.
type send func(ctx context.Context, items []responses.ResponseInputItemUnionParam) (*responses.Response, error)

// loop runs the guide's loop: send, run every client-owned call, return each
// output with its caller, and continue until a final message. With replayAll
// the next request carries the whole history (store:false: every output item
// replayed unchanged); otherwise only the new items (the server keeps the rest).
func (r *result) loop(ctx context.Context, first []responses.ResponseInputItemUnionParam, replayAll bool, next send) error {
	history := first
	pending := first
	for range maxResponses {
		items := pending
		if replayAll {
			items = history
		}
		response, err := next(ctx, items)
		if err != nil {
			return err
		}
		r.note(response)
		if response.Status != responses.ResponseStatusCompleted {
			return fmt.Errorf("response %s ended with status %s", response.ID, response.Status)
		}
		// Preserve every output item, program and reasoning items included.
		for _, item := range response.Output {
			history = append(history, replay(item.RawJSON()))
		}
		pending = nil
		calls := functionCalls(response.Output)
		if len(calls) == 0 {
			if hasMessage(response.Output) {
				r.Answer = response.OutputText()
				return nil
			}
			continue // no calls and no message yet: continue from this response
		}
		for _, call := range calls {
			output, err := r.answer(call)
			if err != nil {
				return err
			}
			history = append(history, output)
			pending = append(pending, output)
		}
	}
	return fmt.Errorf("no final message after %d responses", maxResponses)
}

func storeFalseLoop(ctx context.Context, client openai.Client, r *result) error {
	return r.loop(ctx, []responses.ResponseInputItemUnionParam{userMessage(prompt)}, true,
		func(ctx context.Context, items []responses.ResponseInputItemUnionParam) (*responses.Response, error) {
			return client.Responses.New(ctx, responses.ResponseNewParams{
				Model: model, Store: openai.Bool(false), Tools: guideTools(),
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items},
			})
		})
}

func previousResponseIDLoop(ctx context.Context, client openai.Client, r *result) error {
	previous := ""
	err := r.loop(ctx, []responses.ResponseInputItemUnionParam{userMessage(prompt)}, false,
		func(ctx context.Context, items []responses.ResponseInputItemUnionParam) (*responses.Response, error) {
			body := responses.ResponseNewParams{Model: model, Tools: guideTools()} // stored: the default
			if previous != "" {
				body.PreviousResponseID = openai.String(previous)
			}
			if len(items) > 0 {
				body.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: items}
			}
			response, err := client.Responses.New(ctx, body)
			if err == nil {
				previous = response.ID
			}
			return response, err
		})
	if err != nil {
		return err
	}
	// The stored chain is whole: its first response can be fetched again, and the
	// last one's input items are the outputs this client sent.
	first, err := client.Responses.Get(ctx, r.Responses[0].ID, responses.ResponseGetParams{})
	if err != nil {
		return err
	}
	r.Problems = append(r.Problems, conform("retrieved", first)...)
	r.extra("retrieved_first", map[string]any{"id": first.ID, "status": first.Status, "output": outputTypes(first.Output)})
	page, err := client.Responses.InputItems.List(ctx, previous, responses.InputItemListParams{})
	if err != nil {
		return err
	}
	r.Problems = append(r.Problems, conform("input_items", page)...)
	var inputTypes []string
	for _, item := range page.Data {
		inputTypes = append(inputTypes, item.Type)
	}
	r.extra("last_input_items", inputTypes)
	return nil
}

func outputTypes(output []responses.ResponseOutputItemUnion) []string {
	types := []string{}
	for _, item := range output {
		types = append(types, item.Type)
	}
	return types
}

// streamedLoop is the store:false loop over server-sent events: each response
// is read event by event and the next request is built from the completed event.
func streamedLoop(ctx context.Context, client openai.Client, r *result) error {
	var streamed []map[string]any
	err := r.loop(ctx, []responses.ResponseInputItemUnionParam{userMessage(prompt)}, true,
		func(ctx context.Context, items []responses.ResponseInputItemUnionParam) (*responses.Response, error) {
			stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
				Model: model, Store: openai.Bool(false), Tools: guideTools(),
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items},
			})
			defer stream.Close()
			var completed *responses.Response
			var text strings.Builder
			events := 0
			doneItems := []string{}
			var sequence []int64
			for stream.Next() {
				event := stream.Current()
				events++
				sequence = append(sequence, event.SequenceNumber)
				r.Problems = append(r.Problems, conform(fmt.Sprintf("events[%s]", event.Type), event)...)
				switch event.Type {
				case "response.output_text.delta":
					text.WriteString(event.AsResponseOutputTextDelta().Delta)
				case "response.output_item.done":
					doneItems = append(doneItems, event.AsResponseOutputItemDone().Item.Type)
				case "response.completed":
					response := event.AsResponseCompleted().Response
					completed = &response
				case "error", "response.failed", "response.incomplete":
					return nil, fmt.Errorf("stream ended with %s: %s", event.Type, event.RawJSON())
				}
			}
			if err := stream.Err(); err != nil {
				return nil, err
			}
			if completed == nil {
				return nil, errors.New("the stream ended without response.completed")
			}
			streamed = append(streamed, map[string]any{
				"events": events, "text": text.String(), "items_done": doneItems, "sequence_ordered": ordered(sequence),
			})
			return completed, nil
		})
	r.extra("streams", streamed)
	return err
}

func ordered(sequence []int64) bool {
	for i, n := range sequence {
		if n != int64(i) {
			return false
		}
	}
	return true
}

// compactedLoop compacts the window while the program waits on its calls, then
// continues from the compacted output: the calls' outputs resume the program.
func compactedLoop(ctx context.Context, client openai.Client, r *result) error {
	window := []responses.ResponseInputItemUnionParam{userMessage(prompt)}
	first, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: model, Store: openai.Bool(false), Tools: guideTools(),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: window},
	})
	if err != nil {
		return err
	}
	r.note(first)
	for _, item := range first.Output {
		window = append(window, replay(item.RawJSON()))
	}
	compacted, err := client.Responses.Compact(ctx, responses.ResponseCompactParams{
		Model: model,
		Input: responses.ResponseCompactParamsInputUnion{OfResponseInputItemArray: window},
	})
	if err != nil {
		return err
	}
	r.Problems = append(r.Problems, conform("compacted", compacted)...)
	r.extra("compacted", map[string]any{
		"object": compacted.Object, "output": outputTypes(compacted.Output),
		"input_tokens": compacted.Usage.InputTokens, "output_tokens": compacted.Usage.OutputTokens,
	})
	// The new chain: the compacted output, every item as it came, then what is new.
	var next []responses.ResponseInputItemUnionParam
	for _, item := range compacted.Output {
		next = append(next, replay(item.RawJSON()))
	}
	for _, call := range functionCalls(first.Output) {
		output, err := r.answer(call)
		if err != nil {
			return err
		}
		next = append(next, output)
	}
	return r.loop(ctx, next, true,
		func(ctx context.Context, items []responses.ResponseInputItemUnionParam) (*responses.Response, error) {
			return client.Responses.New(ctx, responses.ResponseNewParams{
				Model: model, Store: openai.Bool(false), Tools: guideTools(),
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items},
			})
		})
}

// conversationLoop keeps the history in a conversation: each request sends
// only its new items and names the conversation, first by id, then as an object.
func conversationLoop(ctx context.Context, client openai.Client, r *result) error {
	conversation, err := client.Conversations.New(ctx, conversations.ConversationNewParams{
		Metadata: map[string]string{"flow": "go-conversation"},
	})
	if err != nil {
		return err
	}
	r.Problems = append(r.Problems, conform("conversation", conversation)...)
	requests := 0
	err = r.loop(ctx, []responses.ResponseInputItemUnionParam{userMessage(prompt)}, false,
		func(ctx context.Context, items []responses.ResponseInputItemUnionParam) (*responses.Response, error) {
			body := responses.ResponseNewParams{
				Model: model, Tools: guideTools(),
				Input: responses.ResponseNewParamsInputUnion{OfInputItemList: items},
			}
			if requests == 0 {
				body.Conversation.OfString = openai.String(conversation.ID)
			} else {
				body.Conversation.OfConversationObject = &responses.ResponseConversationParam{ID: conversation.ID}
			}
			requests++
			return client.Responses.New(ctx, body)
		})
	if err != nil {
		return err
	}
	page, err := client.Conversations.Items.List(ctx, conversation.ID, conversations.ItemListParams{
		Order: conversations.ItemListParamsOrderAsc, Limit: openai.Int(100),
	})
	if err != nil {
		return err
	}
	r.Problems = append(r.Problems, conform("items", page)...)
	items := []map[string]any{}
	for _, item := range page.Data {
		entry := map[string]any{"type": item.Type, "id": item.ID}
		switch item.Type {
		case "function_call":
			entry["caller"] = json.RawMessage(nonEmpty(item.AsFunctionCall().Caller.RawJSON()))
		case "function_call_output":
			entry["call_id"] = item.CallID
		}
		items = append(items, entry)
	}
	r.extra("conversation_id", conversation.ID)
	r.extra("items", items)
	r.extra("has_more", page.HasMore)
	return nil
}

func nonEmpty(raw string) string {
	if raw == "" {
		return "null"
	}
	return raw
}
