"""The drift guard: the installed SDK against the emulator, both ways.

Requests: every field, variant and enum value the SDK's request-params types let a client send to
a route the emulator serves is accepted by the emulator, or refused on purpose (`refusals.REFUSED`,
with its reason and the error the server gives, which is checked here against a real server).
Responses: every body the emulator sends in a run of its surfaces (Responses, streaming, compaction,
Conversations, Agents sessions and events, Models) has every field the SDK's model requires, and
only enum values and union types the SDK knows. `make sdk-drift` runs this file against the newest
SDK releases; `make test` against the locked one; `make test-sdk-oldest` against the oldest.

The last tests show that the guard fails when the emulator stops accepting one field, or sends a
body without a required field or with a value the SDK does not know, and names exactly that."""

from __future__ import annotations

import importlib
import json
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any, Union

import httpx
import openai
import pytest
from pydantic import create_model

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.wire.items import WireModel
from ptc_emulator.emulator.wire.request import CreateRequest
from ptc_emulator.testing.server import PTCEmulator
from tests.agents.agents_support import GET_CUSTOMER, customer, js
from tests.drift.refusals import REFUSED
from tests.drift.requests import Route, every_path, unaccepted
from tests.drift.responses import problems
from tests.drift.routes import ROUTES
from tests.support import PTC_TOOLS, answer_all, arithmetic, for_installed_sdk

pytestmark = pytest.mark.sdk


@pytest.fixture(scope="module")
def parameters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """Each served route's declared query, header and path parameter names (its OpenAPI document)."""
    app = create_app(Settings(data_dir=tmp_path_factory.mktemp("drift"), store="memory"))
    found: dict[str, set[str]] = {}
    for path, operations in app.openapi()["paths"].items():
        for method, operation in operations.items():
            found[f"{method.upper()} {path}"] = {p["name"] for p in operation.get("parameters", [])}
    return found


# ---- requests ---------------------------------------------------------------------------------------


def test_every_route_of_the_table_is_served(parameters: dict[str, set[str]]) -> None:
    assert [r.name for r in ROUTES if r.name not in parameters] == []


def test_everything_the_sdk_sends_is_accepted_or_refused_on_purpose(
    parameters: dict[str, set[str]], client_version: Callable[[str, str], None]
) -> None:
    client_version("openai-python", openai.__version__)
    missing = {r.name: unaccepted(r, REFUSED, params=parameters[r.name]) for r in ROUTES}
    assert {name: paths for name, paths in missing.items() if paths} == {}, (
        f"openai {openai.__version__} lets a client send these, and the emulator neither accepts them nor "
        "lists them in tests/drift/refusals.py with the error it gives"
    )


def test_every_refusal_names_a_route_of_the_table() -> None:
    served = {r.name for r in ROUTES}
    assert sorted({name for name, _ in REFUSED if name not in served}) == []


def test_the_listed_refusals_are_the_errors_the_server_gives(ptc_emulator: PTCEmulator) -> None:
    with _http(ptc_emulator) as http:
        ids = _resources(http)
        for (route, path), refusal in REFUSED.items():
            reply = http.post(refusal.url.format(**ids), json=refusal.body)
            assert reply.status_code == 400, (route, path, reply.text)
            error = reply.json()["error"]
            where = (route, path)
            assert (error["type"], error["param"], error["code"]) == (
                "invalid_request_error",
                refusal.param,
                refusal.code,
            ), where
            if refusal.prefix:
                assert error["message"].startswith(refusal.message), (where, error["message"])
            else:
                assert error["message"] == refusal.message, where


def test_every_listed_path_is_one_the_newest_sdk_knows() -> None:
    """A refusal whose path no SDK spells would guard nothing: each is a path of the installed SDK
    (which the lock keeps at the newest release), unless that SDK predates it."""
    known = set(every_path(ROUTES))
    stale = [key for key in REFUSED if key not in known]
    if openai.__version__ == _locked_openai():
        assert stale == []


# ---- the guard fails when it should -------------------------------------------------------------------


def _without(model: type[WireModel], name: str) -> type[WireModel]:
    """`model` less one field: an emulator that stopped accepting it."""
    fields = {k: (f.annotation, f) for k, f in model.model_fields.items() if k != name}
    copy: type[WireModel] = create_model(f"{model.__name__}Without", __base__=WireModel, **fields)  # type: ignore[call-overload]
    return copy


def test_the_guard_names_exactly_the_field_an_emulator_stops_accepting(parameters: dict[str, set[str]]) -> None:
    (create,) = [r for r in ROUTES if r.name == "POST /v1/responses"]
    assert unaccepted(create, REFUSED, params=parameters[create.name]) == []
    dropped = _without(CreateRequest, "safety_identifier")
    assert unaccepted(create, REFUSED, params=parameters[create.name], model=dropped) == ["safety_identifier"]
    (listing,) = [r for r in ROUTES if r.name == "GET /v1/agents/sessions"]
    assert unaccepted(listing, REFUSED, params=parameters[listing.name] - {"agent_id"}) == ["agent_id"]
    missing_variant = Route("POST /v1/responses", create.params, "tests.drift.test_guard:_NO_UPDATE")
    assert unaccepted(missing_variant, REFUSED, params=parameters[create.name]) == [
        "input[][type=configuration_update]"
    ]


def _no_update_items() -> type[WireModel]:
    """`CreateRequest` whose input takes every item type but `configuration_update`: an emulator
    that stopped accepting one variant of a union."""
    from pydantic import Discriminator

    from ptc_emulator.emulator.wire import items

    union, _ = typing.get_args(items.InputItem)
    kept = tuple(arm for arm in typing.get_args(union) if arm.__metadata__[0].tag != "configuration_update")
    without = Annotated[Union[kept], Discriminator(items._item_tag)]  # noqa: SLF001, UP007
    fields = {k: (f.annotation, f) for k, f in CreateRequest.model_fields.items() if k != "input"}
    fields["input"] = (str | list[without] | None, None)  # type: ignore[valid-type]
    made: type[WireModel] = create_model("CreateWithoutUpdates", __base__=WireModel, **fields)  # type: ignore[call-overload]
    return made


_NO_UPDATE = _no_update_items()


def test_the_guard_names_a_missing_required_field_and_an_unknown_value() -> None:
    from openai.types.responses import Response

    from ptc_emulator.emulator.responses.body import response_body
    from ptc_emulator.emulator.wire.response import ResponseStatus

    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "hi", "annotations": [], "logprobs": []}],
    }
    body = response_body(
        CreateRequest(model="m"),
        response_id="resp_1",
        created_at=1.0,
        now=2.0,
        store=True,
        output=[message],
        status=ResponseStatus.COMPLETED,
        context=[],
    )
    assert problems(body, Response) == []
    broken = {k: v for k, v in body.items() if k != "tools"}
    broken["output"] = [{**message, "status": "paused"}]
    assert problems(broken, Response) == [
        "$.output[0].status: 'paused' is not a value the SDK knows ('in_progress', 'completed', 'incomplete')",
        "$.tools: missing (required by the SDK's Response)",
    ]
    (problem,) = problems({**body, "output": [{**message, "type": "hologram"}]}, Response)
    assert problem.startswith("$.output[0].type: 'hologram' is not a type the SDK knows here (")


# ---- responses ------------------------------------------------------------------------------------


def test_every_body_the_emulator_sends_holds_to_the_sdks_models(ptc_emulator: PTCEmulator) -> None:
    seen: list[tuple[str, Any]] = []
    with _http(ptc_emulator, seen) as http:
        client = openai.OpenAI(base_url=ptc_emulator.base_url, api_key="sk-test", http_client=http, max_retries=0)
        kinds = _drive(client, ptc_emulator, http, seen)
    assert [label for label, body in seen if not _checks(label, body)] == []  # every body has its model
    found: dict[str, list[str]] = {}
    for label, body in seen:
        for part, annotation in _checks(label, body):
            for problem in problems(for_installed_sdk(part), annotation):
                found.setdefault(label, []).append(problem)
    assert found == {}, f"openai {openai.__version__}'s models do not take what the emulator sent"
    # The run covered what it is meant to: the item and event types below, each at least once.
    expected_items = {
        "program",
        "function_call",
        "program_output",
        "message",
        "reasoning",
        "tool_search_call",
        "tool_search_output",
        "compaction",
        "configuration_update",
    }
    assert expected_items <= kinds["items"], sorted(expected_items - kinds["items"])
    expected_events = {"response.created", "response.output_item.added", "response.output_text.delta"}
    assert expected_events <= kinds["events"], sorted(expected_events - kinds["events"])
    assert {"agent.session.requires_action", "agent.session.idle"} <= kinds["agent_events"]


# ---- helpers -----------------------------------------------------------------------------------------


def _locked_openai() -> str | None:
    lock = Path(__file__).resolve().parents[2] / "locks" / "python.txt"
    for line in lock.read_text().splitlines():
        if line.startswith("openai=="):
            return line.split("==", 1)[1]
    return None


class _Seen:
    def __init__(self, seen: list[tuple[str, Any]] | None) -> None:
        self.seen = seen

    def __call__(self, response: httpx.Response) -> None:
        if self.seen is None or "application/json" not in response.headers.get("content-type", ""):
            return
        response.read()
        if response.status_code < 400:
            path = response.request.url.path.split("/v1", 1)[1]
            self.seen.append((f"{response.request.method} {path}", response.json()))


def _http(emulator: PTCEmulator, seen: list[tuple[str, Any]] | None = None) -> httpx.Client:
    headers = {"Authorization": "Bearer sk-test", "OpenAI-Beta": "agents=v1", **emulator.headers}
    return httpx.Client(
        base_url=emulator.base_url, headers=headers, timeout=60, event_hooks={"response": [_Seen(seen)]}
    )


def _resources(http: httpx.Client) -> dict[str, str]:
    """A conversation, an agent and a session to aim the refusals of their routes at."""
    conversation = http.post("/conversations", json={}).json()["id"]
    agent = http.post("/agents", json={"model": "m"}).json()["id"]
    session = http.post(
        "/agents/sessions", json={"environment": {"type": "none"}, "input": js('text("hi")'), "agent_id": agent}
    ).json()["id"]
    return {"conversation_id": conversation, "agent_id": agent, "session_id": session}


def _sse(http: httpx.Client, method: str, url: str, body: Any = None, until: str | None = None) -> Iterator[Any]:
    with http.stream(method, url, json=body) as reply:
        assert reply.status_code == 200, reply.read()
        for line in reply.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                event = json.loads(line[len("data: ") :])
                yield event
                if until is not None and event.get("type") == until:
                    return


REASONING = {
    "name": "drift__reasoning",
    "match": {"input": "^drift reasoning$"},
    "turns": [{"reasoning": "Nothing to look up.", "message": "Reasoned."}],
}
SHIPPING = {
    "type": "namespace",
    "name": "shipping",
    "description": "Order tracking and delivery tools.",
    "tools": [
        {
            "type": "function",
            "name": "get_delivery_eta",
            "description": "Return the ETA for an order.",
            "defer_loading": True,
            "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
        }
    ],
}
ADD = "const x = await tools.add({a: 2, b: 3}); text(String(x));"
UPDATE = {"type": "configuration_update", "reasoning": {"effort": "low"}}


def _drive(
    client: openai.OpenAI, emulator: PTCEmulator, http: httpx.Client, seen: list[tuple[str, Any]]
) -> dict[str, set[str]]:
    """One run of the emulator's surfaces through the SDK and raw HTTP; the bodies land in `seen`."""
    emulator.add_scenario(REASONING)
    kinds: dict[str, set[str]] = {"items": set(), "events": set(), "agent_events": set()}
    # Responses: a program's pause and resume, tool search, reasoning, an update, what is stored.
    paused = client.responses.create(model="m", input=[UPDATE, {"role": "user", "content": js(ADD)}], tools=PTC_TOOLS)
    done = client.responses.create(
        model="m", input=answer_all(paused, arithmetic), tools=PTC_TOOLS, previous_response_id=paused.id
    )
    client.responses.create(
        model="gpt-5.6", input="Quando o pedido A-104 chegará?", tools=[SHIPPING, {"type": "tool_search"}]
    )
    client.responses.create(model="m", input="drift reasoning", include=["reasoning.encrypted_content"], store=False)
    client.responses.retrieve(done.id)
    list(client.responses.input_items.list(paused.id))
    client.responses.input_tokens.count(model="m", input="hello")
    client.responses.compact(model="m", previous_response_id=done.id)
    # Streaming: every event of a program's run, then a stored response's events again.
    body = {"model": "m", "input": js(ADD), "tools": PTC_TOOLS, "stream": True}
    for event in _sse(http, "POST", "/responses", body):
        kinds["events"].add(event["type"])
        seen.append(("EVENT response", event))
    for event in _sse(http, "GET", f"/responses/{done.id}?stream=true"):
        kinds["events"].add(event["type"])
        seen.append(("EVENT response", event))
    # Conversations: made with items, read, changed, played in, listed.
    conversation = client.conversations.create(items=[UPDATE, {"type": "message", "role": "user", "content": "hi"}])
    client.conversations.retrieve(conversation.id)
    client.conversations.update(conversation.id, metadata={"k": "v"})
    client.responses.create(model="m", conversation=conversation.id, input=js('text("x")'), tools=PTC_TOOLS)
    added = client.conversations.items.create(
        conversation.id, items=[{"type": "message", "role": "user", "content": "more"}]
    )
    listed = list(client.conversations.items.list(conversation.id))
    client.conversations.items.retrieve(listed[0].id, conversation_id=conversation.id)
    client.conversations.items.delete(added.data[0].id, conversation_id=conversation.id)
    client.conversations.delete(conversation.id)
    # Agents: an agent, a session's function-tool flow and its events, what it lists.
    agent = client.beta.agents.create(model="gpt-5", tools=[GET_CUSTOMER], compaction={"async": True})
    client.beta.agents.retrieve(agent.id)
    client.beta.agents.update(agent.id, name="drift")
    list(client.beta.agents.list())
    session = http.post(
        "/agents/sessions",
        json={
            "environment": {"type": "none"},
            "agent_id": agent.id,
            "input": "Look up customer 123.",
            "spend_control": {"limit": 100},
        },
    ).json()
    pending = None
    for event in _sse(http, "GET", f"/agents/sessions/{session['id']}/events", until="agent.session.requires_action"):
        kinds["agent_events"].add(event["type"])
        seen.append(("EVENT agent", event))
        if event["type"] == "agent.session.requires_action":
            pending = event["session"]["required_actions"][0]
    assert pending is not None
    result = {
        "type": "agent.session.input.tool_result",
        "turn_id": pending["turn_id"],
        "call_id": pending["call_id"],
        "success": True,
        "output": json.dumps(customer(pending["arguments"])),
    }
    assert http.post(f"/agents/sessions/{session['id']}/events", json={"events": [result]}).status_code == 202
    for event in _sse(http, "GET", f"/agents/sessions/{session['id']}/events", until="agent.session.idle"):
        if event["type"] == "agent.session.idle" and event["session"]["status"] != "idle":
            continue
        kinds["agent_events"].add(event["type"])
        seen.append(("EVENT agent", event))
    client.beta.agents.sessions.retrieve(session["id"])
    client.beta.agents.sessions.update(session["id"], metadata={"k": "v"})
    list(client.beta.agents.sessions.list())
    list(client.beta.agents.sessions.items.list(session["id"]))
    turns = list(client.beta.agents.sessions.turns.list(session["id"]))
    client.beta.agents.sessions.turns.retrieve(turns[0].id, session_id=session["id"])
    list(client.beta.agents.sessions.turns.items.list(turns[0].id, session_id=session["id"]))
    client.beta.agents.sessions.delete(session["id"])
    client.beta.agents.delete(agent.id)
    # Models.
    list(client.models.list())
    client.models.retrieve("gpt-6.2-astra")
    for _, body in seen:
        for item in [*body.get("output", []), *body.get("data", [])] if isinstance(body, dict) else []:
            if isinstance(item, dict) and "type" in item:
                kinds["items"].add(item["type"])
    return kinds


def _import(name: str) -> Any:
    module, _, attribute = name.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError):
        return None


def _page(item: Any) -> Any:
    """A list page's envelope, with its items as `item`."""
    from typing import Literal

    from pydantic import BaseModel

    class Page(BaseModel):
        object: Literal["list"]
        data: list[item]  # type: ignore[valid-type]
        has_more: bool = False

    return Page


def _sdk_model(label: str, body: Any) -> Any:
    """The SDK's model of a body by its request (`POST /responses`, `EVENT agent`), or None."""
    T = "openai.types"
    method, _, path = label.partition(" ")
    parts = [p for p in path.split("/") if p]
    if method == "EVENT":
        return _import(f"{T}.responses.ResponseStreamEvent" if path == "response" else f"{T}.beta.AgentSessionEvent")
    if method == "DELETE":
        return (
            {
                "conversations": _import(f"{T}.conversations.ConversationDeletedResource"),
                "agents": _import(f"{T}.beta.agent_session_deleted.AgentSessionDeleted")
                if parts[:2] == ["agents", "sessions"]
                else _import(f"{T}.beta.agent_deleted.AgentDeleted"),
            }.get(parts[0])
            if len(parts) in (2, 3) and parts[-2] != "items"
            else (_import(f"{T}.conversations.Conversation") if parts[0] == "conversations" else None)
        )
    if parts[0] == "responses":
        if parts[-1] == "input_items":
            return _import(f"{T}.responses.ResponseItemList")
        if parts[-1] == "input_tokens":
            return _import(f"{T}.responses.input_token_count_response.InputTokenCountResponse")
        if parts[-1] == "compact":
            return _import(f"{T}.responses.CompactedResponse")
        return _import(f"{T}.responses.Response")
    if parts[0] == "conversations":
        if parts[-1] == "items":
            return _import(f"{T}.conversations.ConversationItemList")
        if len(parts) == 4:
            return _import(f"{T}.conversations.ConversationItem")
        return _import(f"{T}.conversations.Conversation")
    if parts[0] == "models":
        model = _import(f"{T}.Model")
        return _page(model) if len(parts) == 1 else model
    one: Any
    if parts[:2] != ["agents", "sessions"]:
        one = _import(f"{T}.beta.agent.Agent")
    elif len(parts) <= 3:
        one = _import(f"{T}.beta.agent_session.AgentSession")
    elif parts[-1] == "items":
        one = _import(f"{T}.beta.agent_session_item.AgentSessionItem")
    else:
        one = _import(f"{T}.beta.agents.sessions.turn.Turn")
    return _page(one) if method == "GET" and parts[-1] in ("agents", "sessions", "items", "turns") else one


def _checks(label: str, body: Any) -> list[tuple[Any, Any]]:
    """(part of `body`, the SDK's model of it) for a body by its request. A `CompactedResponse`'s
    user messages are held to `ResponseInputMessageItem`: the SDK types its output's messages as
    `ResponseOutputMessage` (role "assistant") while its docstring, and the Agents SDK, say the user
    messages come back there, as the hosted API sends them; the rest is held to its model."""
    if label != "POST /responses/compact":
        model = _sdk_model(label, body)
        return [] if model is None else [(body, model)]
    from openai.types.responses import CompactedResponse, ResponseInputMessageItem

    users = [i for i in body["output"] if i.get("type") == "message" and i.get("role") == "user"]
    rest = {**body, "output": [i for i in body["output"] if i not in users]}
    return [(rest, CompactedResponse), *((user, ResponseInputMessageItem) for user in users)]
