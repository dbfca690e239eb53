package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/openai/openai-go/v3"
)

// The Agents API guide's function-tool flow ("Functions"): an agent with the
// get_customer function, a session that asks for customer 123, the program's
// call surfacing as a required action, the client's tool_result event, and
// the turn finishing with the answer. The tool_result code is the guide's Go.

func getCustomerTool() openai.PersistedAgentToolParamUnion {
	return openai.PersistedAgentToolParamUnion{OfParamFunction: &openai.PersistedAgentToolParamFunction{
		Name:        "get_customer",
		Description: "Look up a customer by ID.",
		Parameters: map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"customer_id": map[string]any{"type": "string"}},
			"required":             []string{"customer_id"},
			"additionalProperties": false,
		},
	}}
}

func agentsFunctionTool(ctx context.Context, client openai.Client, r *result) error {
	agent, err := client.Beta.Agents.New(ctx, openai.BetaAgentNewParams{
		Model: "gpt-5",
		Name:  openai.String("customer-support"),
		Tools: []openai.PersistedAgentToolParamUnion{getCustomerTool()},
	})
	if err != nil {
		return err
	}
	r.Problems = append(r.Problems, conform("agent", agent)...)
	session, err := client.Beta.Agents.Sessions.New(ctx, openai.BetaAgentSessionNewParams{
		Environment: openai.EnvironmentParamUnion{OfParamNone: &openai.EnvironmentParamNone{}},
		AgentID:     openai.String(agent.ID),
		Input:       openai.BetaAgentSessionNewParamsInputUnion{OfString: openai.String("Look up customer 123.")},
	})
	if err != nil {
		return err
	}
	r.Problems = append(r.Problems, conform("session", session)...)

	// Wait for the program's call: the session's events, until it requires action.
	var events []string
	waiting, err := follow(ctx, client, session.ID, "agent.session.requires_action", &events, r)
	if err != nil {
		return err
	}
	var actions []map[string]any
	for _, action := range waiting.Session.RequiredActions {
		if action.Type != "function_call" || action.Name != "get_customer" {
			return fmt.Errorf("unexpected required action %s", action.RawJSON())
		}
		// The guide's code, as it is written there.
		result := openai.AgentSessionInputParamAgentSessionInputToolResult{
			TurnID: action.TurnID,
			CallID: action.CallID,
		}

		arguments, ok := action.Arguments.(map[string]any)
		if !ok {
			return fmt.Errorf("required action %s: arguments are not an object: %s", action.CallID, action.JSON.Arguments.Raw())
		}
		customerID, _ := arguments["customer_id"].(string)
		var customer any
		if customerID == "123" {
			customer = map[string]any{"name": "Example Customer", "plan": "pro"}
		}
		output, err := json.Marshal(map[string]any{"found": customer != nil, "customer": customer})
		if err != nil {
			return err
		}
		result.Success = true
		result.Output = openai.AgentFunctionCallOutputParamUnion{OfString: openai.String(string(output))}

		err = client.Beta.Agents.Sessions.Events.New(ctx, session.ID, openai.BetaAgentSessionEventNewParams{
			Events: []openai.AgentSessionInputParamUnion{{OfParamAgentSessionInputToolResult: &result}},
		})
		if err != nil {
			return err
		}
		actions = append(actions, map[string]any{
			"type": action.Type, "name": action.Name, "call_id": action.CallID, "turn_id": action.TurnID,
			"arguments": arguments,
		})
	}
	if len(actions) == 0 {
		return errors.New("the session required action with no pending call")
	}

	// The harness continues the turn: follow the events until the session is idle.
	if _, err := follow(ctx, client, session.ID, "agent.session.idle", &events, r); err != nil {
		return err
	}
	items, err := client.Beta.Agents.Sessions.Items.List(ctx, session.ID, openai.BetaAgentSessionItemListParams{})
	if err != nil {
		return err
	}
	r.Problems = append(r.Problems, conform("items", items)...)
	var kinds []string
	for _, item := range items.Data {
		kinds = append(kinds, item.Type)
		if item.Type == "message" && item.Role == "assistant" {
			message := item.AsMessage()
			if len(message.Content) > 0 {
				r.Answer = message.Content[0].Text
			}
		}
	}
	turns, err := client.Beta.Agents.Sessions.Turns.List(ctx, session.ID, openai.BetaAgentSessionTurnListParams{})
	if err != nil {
		return err
	}
	r.Problems = append(r.Problems, conform("turns", turns)...)
	var turnStatus []string
	for _, t := range turns.Data {
		turnStatus = append(turnStatus, string(t.Status))
	}
	final, err := client.Beta.Agents.Sessions.Get(ctx, session.ID)
	if err != nil {
		return err
	}
	r.Problems = append(r.Problems, conform("final", final)...)
	r.extra("agent_id", agent.ID)
	r.extra("session_id", session.ID)
	r.extra("session_agent_id", session.Agent.ID)
	r.extra("actions", actions)
	r.extra("events", events)
	r.extra("items", kinds)
	r.extra("turns", turnStatus)
	r.extra("final_status", final.Status)
	r.extra("final_required_actions", len(final.RequiredActions))
	return nil
}

// follow reads the session's events from now on until one of type until,
// which it returns; every event type seen is appended to seen.
func follow(ctx context.Context, client openai.Client, sessionID, until string, seen *[]string, r *result) (openai.AgentSessionEventUnion, error) {
	stream := client.Beta.Agents.Sessions.Events.StreamStreaming(ctx, sessionID)
	defer stream.Close()
	for stream.Next() {
		event := stream.Current()
		*seen = append(*seen, event.Type)
		r.Problems = append(r.Problems, conform(fmt.Sprintf("events[%s]", event.Type), event)...)
		switch event.Type {
		case until:
			return event, nil
		case "agent.session.failed", "error":
			return event, fmt.Errorf("the session failed: %s", event.RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		return openai.AgentSessionEventUnion{}, err
	}
	return openai.AgentSessionEventUnion{}, fmt.Errorf("the event stream ended before %s", until)
}
