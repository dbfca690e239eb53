//go:build !no_responses_websocket

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// Responses WebSockets came with openai-go v3.62.0; a build of an older release
// sets the no_responses_websocket tag and leaves this flow out.

func init() { flows["websocket"] = websocketLane }

const lane = "inventory"

// websocketLane runs the loop over one WebSocket, on a named lane, store:false:
// each continuation names the previous response, which the socket keeps for
// as long as it is open, and sends only the new items.
func websocketLane(ctx context.Context, client openai.Client, r *result) error {
	connection, err := client.Responses.Connect(ctx, responses.ResponseConnectionOptions{})
	if err != nil {
		return err
	}
	defer connection.Close()
	inventory, err := connection.Lane(lane)
	if err != nil {
		return err
	}
	defer inventory.Close()
	previous := ""
	var turns []map[string]any
	err = r.loop(ctx, []responses.ResponseInputItemUnionParam{userMessage(prompt)}, false,
		func(ctx context.Context, items []responses.ResponseInputItemUnionParam) (*responses.Response, error) {
			input := responses.ResponseInputParam(items)
			create := responses.ResponsesClientEventResponseCreateParam{
				Model: model, Store: openai.Bool(false), Tools: guideTools(), StreamID: openai.String(lane),
				Input: responses.ResponsesClientEventResponseCreateInputUnionParam{OfResponse: &input},
			}
			if previous != "" {
				create.PreviousResponseID = openai.String(previous)
			}
			if err := connection.Create(ctx, create); err != nil {
				return nil, err
			}
			// Events reach the lane only when they carry its stream_id: a lane that hears
			// nothing means the server dropped it, so each response is given a bound.
			wait, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			events, lanes := 0, map[string]int{}
			for {
				event, err := inventory.Recv(wait)
				if err != nil {
					return nil, fmt.Errorf("lane %s after %d events: %w", lane, events, err)
				}
				events++
				var routing struct {
					StreamID string `json:"stream_id"`
				}
				_ = json.Unmarshal([]byte(event.RawJSON()), &routing)
				lanes[routing.StreamID]++
				r.Problems = append(r.Problems, conform(fmt.Sprintf("ws[%s]", event.Type), event.AsAny())...)
				switch event.Type {
				case "error":
					return nil, &responses.ResponseProtocolError{Event: event}
				case "response.completed", "response.failed", "response.incomplete":
					response := terminal(event)
					previous = response.ID
					turns = append(turns, map[string]any{"events": events, "stream_ids": lanes})
					return &response, nil
				}
			}
		})
	r.extra("socket", turns)
	return err
}

func terminal(event responses.ResponsesServerEventUnion) responses.Response {
	switch event.Type {
	case "response.completed":
		return event.AsResponseCompleted().Response
	case "response.failed":
		return event.AsResponseFailed().Response
	}
	return event.AsResponseIncomplete().Response
}
