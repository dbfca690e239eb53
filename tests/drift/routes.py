"""The routes the emulator serves, each with the SDK type of what a client sends it and the
emulator's model of that body (the drift guard's acceptance table)."""

from __future__ import annotations

from tests.drift.requests import Route

__all__ = ["ROUTES"]

T = "openai.types"
E = "ptc_emulator.emulator"

ROUTES: tuple[Route, ...] = (
    # ---- Responses -------------------------------------------------------------------------------
    Route(
        "POST /v1/responses",
        f"{T}.responses.response_create_params:ResponseCreateParamsStreaming",
        f"{E}.wire.request:CreateRequest",
    ),
    Route(
        "POST /v1/responses/input_tokens",
        f"{T}.responses.input_token_count_params:InputTokenCountParams",
        f"{E}.wire.request:CountTokensRequest",
    ),
    Route(
        "POST /v1/responses/compact",
        f"{T}.responses.response_compact_params:ResponseCompactParams",
        f"{E}.wire.request:CompactRequest",
    ),
    Route("GET /v1/responses/{response_id}", f"{T}.responses.response_retrieve_params:ResponseRetrieveParams"),
    Route(
        "GET /v1/responses/{response_id}/input_items",
        f"{T}.responses.input_item_list_params:InputItemListParams",
    ),
    # ---- Conversations ---------------------------------------------------------------------------
    Route(
        "POST /v1/conversations",
        f"{T}.conversations.conversation_create_params:ConversationCreateParams",
        f"{E}.conversations.service:ConversationCreate",
    ),
    Route(
        "POST /v1/conversations/{conversation_id}",
        f"{T}.conversations.conversation_update_params:ConversationUpdateParams",
        f"{E}.conversations.service:ConversationUpdate",
    ),
    Route(
        "POST /v1/conversations/{conversation_id}/items",
        f"{T}.conversations.item_create_params:ItemCreateParams",
        f"{E}.conversations.service:ItemsCreate",
    ),
    Route("GET /v1/conversations/{conversation_id}/items", f"{T}.conversations.item_list_params:ItemListParams"),
    Route(
        "GET /v1/conversations/{conversation_id}/items/{item_id}",
        f"{T}.conversations.item_retrieve_params:ItemRetrieveParams",
    ),
    # ---- Agents (beta) ---------------------------------------------------------------------------
    Route("POST /v1/agents", f"{T}.beta.agent_create_params:AgentCreateParams", f"{E}.agents.wire:AgentCreate"),
    Route(
        "POST /v1/agents/{agent_id}", f"{T}.beta.agent_update_params:AgentUpdateParams", f"{E}.agents.wire:AgentUpdate"
    ),
    Route("GET /v1/agents", f"{T}.beta.agent_list_params:AgentListParams"),
    Route(
        "POST /v1/agents/sessions",
        f"{T}.beta.agents.session_create_params:SessionCreateParamsStreaming",
        f"{E}.agents.wire:SessionCreate",
    ),
    Route(
        "POST /v1/agents/sessions/{session_id}",
        f"{T}.beta.agents.session_update_params:SessionUpdateParams",
        f"{E}.agents.wire:SessionUpdate",
    ),
    Route("GET /v1/agents/sessions", f"{T}.beta.agents.session_list_params:SessionListParams", reads=("metadata",)),
    Route(
        "POST /v1/agents/sessions/{session_id}/events",
        f"{T}.beta.agents.sessions.event_create_params:EventCreateParams",
        f"{E}.agents.wire:EventsBody",
    ),
    Route(
        "GET /v1/agents/sessions/{session_id}/events",
        f"{T}.beta.agents.sessions.event_stream_params:EventStreamParams",
    ),
    Route("GET /v1/agents/sessions/{session_id}/items", f"{T}.beta.agents.sessions.item_list_params:ItemListParams"),
    Route("GET /v1/agents/sessions/{session_id}/turns", f"{T}.beta.agents.sessions.turn_list_params:TurnListParams"),
    Route(
        "GET /v1/agents/sessions/{session_id}/turns/{turn_id}/items",
        f"{T}.beta.agents.sessions.turns.item_list_params:ItemListParams",
    ),
)
