package main

import (
	"encoding/json"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
)

// The PTC guide's example: get_inventory and get_demand, callable only from a
// program, and the programmatic_tool_calling hosted tool.

const (
	model  = "gpt-6-astra"
	prompt = "Compare inventory with demand for sku_123."
	// A continuation loop that has not met a final message after this many
	// responses is broken.
	maxResponses = 8
)

func guideTools() []responses.ToolUnionParam {
	sku := map[string]any{"type": "string"}
	function := func(name, field, description string) responses.ToolUnionParam {
		return responses.ToolUnionParam{OfFunction: &responses.FunctionToolParam{
			Name:        name,
			Description: openai.String(description),
			Parameters: map[string]any{
				"type":                 "object",
				"properties":           map[string]any{"sku": sku},
				"required":             []string{"sku"},
				"additionalProperties": false,
			},
			OutputSchema: map[string]any{
				"type":                 "object",
				"properties":           map[string]any{"sku": sku, field: map[string]any{"type": "number"}},
				"required":             []string{"sku", field},
				"additionalProperties": false,
			},
			AllowedCallers: []string{"programmatic"},
		}}
	}
	return []responses.ToolUnionParam{
		function("get_inventory", "available_units", "Return an object with sku (string) and available_units (number)."),
		function("get_demand", "requested_units", "Return an object with sku (string) and requested_units (number)."),
		{OfProgrammaticToolCalling: &responses.ToolProgrammaticToolCallingParam{}},
	}
}

// implementations are the client-owned tools, as the guide writes them.
var implementations = map[string]func(sku string) map[string]any{
	"get_inventory": func(sku string) map[string]any { return map[string]any{"sku": sku, "available_units": 42} },
	"get_demand":    func(sku string) map[string]any { return map[string]any{"sku": sku, "requested_units": 31} },
}

func userMessage(text string) responses.ResponseInputItemUnionParam {
	return responses.ResponseInputItemParamOfMessage(text, responses.EasyInputMessageRoleUser)
}

// replay is an output item sent back as input unchanged: its JSON as the
// server sent it, every field kept (the fingerprint, the caller, ids).
func replay(raw string) responses.ResponseInputItemUnionParam {
	return param.Override[responses.ResponseInputItemUnionParam](json.RawMessage(raw))
}

// functionCalls are the function_call items of an output, in order.
func functionCalls(output []responses.ResponseOutputItemUnion) []responses.ResponseFunctionToolCall {
	var calls []responses.ResponseFunctionToolCall
	for _, item := range output {
		if item.Type == "function_call" {
			calls = append(calls, item.AsFunctionCall())
		}
	}
	return calls
}

func hasMessage(output []responses.ResponseOutputItemUnion) bool {
	for _, item := range output {
		if item.Type == "message" {
			return true
		}
	}
	return false
}

// answer runs one client-owned call and returns its function_call_output,
// with the call's caller copied so the server resumes the right program.
func (r *result) answer(call responses.ResponseFunctionToolCall) (responses.ResponseInputItemUnionParam, error) {
	run, ok := implementations[call.Name]
	if !ok {
		return responses.ResponseInputItemUnionParam{}, fmt.Errorf("unknown tool: %s", call.Name)
	}
	var arguments struct {
		SKU string `json:"sku"`
	}
	if err := json.Unmarshal([]byte(call.Arguments), &arguments); err != nil {
		return responses.ResponseInputItemUnionParam{}, fmt.Errorf("arguments of %s: %w", call.CallID, err)
	}
	output, err := json.Marshal(run(arguments.SKU))
	if err != nil {
		return responses.ResponseInputItemUnionParam{}, err
	}
	item := responses.ResponseInputItemParamOfFunctionCallOutput(string(output))
	item.OfFunctionCallOutput.CallID = openai.String(call.CallID)
	switch call.Caller.Type {
	case "program":
		item.OfFunctionCallOutput.Caller.OfProgram = &responses.ResponseInputItemFunctionCallOutputCallerProgramParam{
			CallerID: call.Caller.CallerID,
		}
	case "direct":
		item.OfFunctionCallOutput.Caller.OfDirect = &responses.ResponseInputItemFunctionCallOutputCallerDirectParam{}
	}
	r.Calls = append(r.Calls, toolCall{
		Name: call.Name, CallID: call.CallID, Arguments: call.Arguments,
		Caller: caller{Type: call.Caller.Type, CallerID: call.Caller.CallerID},
	})
	return item, nil
}

// result is what a flow prints: what the client saw, for the test to compare
// with what the server's journal says it did.
type result struct {
	Flow      string         `json:"flow"`
	SDK       string         `json:"sdk"`
	Answer    string         `json:"answer"`
	Responses []turn         `json:"responses"`
	Calls     []toolCall     `json:"calls"`
	Programs  []program      `json:"programs"`
	Problems  []string       `json:"problems"` // what conform found in every decoded body
	Extra     map[string]any `json:"extra,omitempty"`
}

type turn struct {
	ID                 string   `json:"id"`
	Status             string   `json:"status"`
	Store              bool     `json:"store"`
	PreviousResponseID string   `json:"previous_response_id"`
	Conversation       string   `json:"conversation"`
	Output             []string `json:"output"`
}

type caller struct {
	Type     string `json:"type"`
	CallerID string `json:"caller_id"`
}

type toolCall struct {
	Name      string `json:"name"`
	CallID    string `json:"call_id"`
	Arguments string `json:"arguments"`
	Caller    caller `json:"caller"`
}

type program struct {
	ID          string `json:"id"`
	CallID      string `json:"call_id"`
	Fingerprint string `json:"fingerprint"`
	Code        string `json:"code"`
}

// note records a response: its outputs, its programs, and what conform finds.
func (r *result) note(response *responses.Response) {
	at := fmt.Sprintf("responses[%d]", len(r.Responses))
	r.Problems = append(r.Problems, conform(at, response)...)
	// The SDK's Response has no store field: it is read from the body as sent.
	var body struct {
		Store *bool `json:"store"`
	}
	if err := json.Unmarshal([]byte(response.RawJSON()), &body); err != nil || body.Store == nil {
		r.Problems = append(r.Problems, at+".store: missing")
	}
	t := turn{
		ID: response.ID, Status: string(response.Status), Store: body.Store != nil && *body.Store,
		PreviousResponseID: response.PreviousResponseID, Conversation: response.Conversation.ID,
		Output: []string{},
	}
	for _, item := range response.Output {
		t.Output = append(t.Output, item.Type)
		if item.Type == "program" {
			p := item.AsProgram()
			r.Programs = append(r.Programs, program{ID: p.ID, CallID: p.CallID, Fingerprint: p.Fingerprint, Code: p.Code})
		}
	}
	r.Responses = append(r.Responses, t)
}

func (r *result) extra(key string, value any) {
	if r.Extra == nil {
		r.Extra = map[string]any{}
	}
	r.Extra[key] = value
}
