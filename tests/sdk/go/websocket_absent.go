//go:build no_responses_websocket

package main

func init() {
	absent["websocket"] = "this openai-go release has no Responses WebSocket (client.Responses.Connect came in v3.62.0)"
}
