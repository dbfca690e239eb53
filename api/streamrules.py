"""What the official SDKs' stream readers raise on, as the recording proxy (api/proxy.py) follows
a streamed answer: one either SDK raises on live is not recorded (a replay would pass where the
client failed: a false green). `Answer` follows one answer's events; `dispatched` says whether an
SSE event with no data reaches the client's JSON parser.

The Python SDK's rules (`Answer.taken`, and its stream reader: `data: [DONE]` ends what it reads,
an event with empty data fails `json.loads("")`). The Node SDK's (openai 7.60: its stream reader,
`ResponseStream` and its accumulator, `src/internal/responses/response-accumulator.ts`), past the
first event (`Answer.strict`; a rule's Node error in brackets):

* an event type it does not know ("Unhandled response stream event");
* an output index that is not a whole number ("Invalid response output index"), or at which no
  item was added, `output_item.done` included ("missing output at index");
* a second item added at an output index an item holds, added or listed ("Duplicate response
  output index");
* an output item (added, done, or listed by a lifecycle event's response) that is not an object
  ("expected an own output item type"; a null one: "missing output at index"), with no `id` (but a
  `function_call`'s or `custom_tool_call`'s), an empty one (but a `computer_call`'s) or one not a
  string, or a routed call without a string `call_id` ("expected a non-empty output item ...");
  an added item with the identity key (`id:<id>`, `call:<type>:<call id>`) of one the snapshot
  holds, a response listing two of one key ("duplicate output item identity");
* an `output_item.done` (or a mid-stream lifecycle event's item, or a `response.completed`'s)
  whose type, id (unless the item had none, a call) or call id is not the item's it replaces
  ("expected output item type/id/call_id");
* an item's event without a non-empty `item_id`, naming another item, or into an item of another
  type ("expected item_id", "expected output item type"; shell command events: into a
  `shell_call`);
* a content part added at an index other than the next (`validateArrayAppend`), into a message
  whose `content` is not a list; a part done, an `output_text` or `refusal` delta or done, or an
  annotation, at an index with no part ("missing content at index"), or into a part of another
  type ("expected content to be ..."); an annotation at an index past the next, or into a part
  whose `annotations` is not a list ("missing annotation at index");
* a reasoning text delta or done into a reasoning item without `content`, or at an index with no
  part; a reasoning summary part added at an index other than the next, a summary part done or a
  summary text delta or done at one with no part ("missing content at index");
* a shell command added past the next, done or delta at one not there ("missing command at
  index"); shell output content past the commands of its call (or past the next output without
  one), or a `.done` without its `output` list ("missing content at index 0");
* a mid-stream `response.created`/`.queued`/`.in_progress` listing an item the stream did not
  give: the snapshot becomes that list and the items not in it (its identity keys replaced, as
  `cloneValidatedResponse` does), two of one key in it raising, and an item taking a position
  another identity holds ("Response snapshot has conflicting output positions"); a lifecycle
  event's `output` that is not a list; a terminal event's list replaces the keys too;
* a `response.completed` without an item the stream added and did not finish, or giving a
  finished one another identity ("Cannot complete response with unfinished output items").

Not mirrored: what comes after a terminal event's positions (Node keeps its old positions, over
the new list), a `part` that is a string, `structuredClone` failures. Over a WebSocket the Node
SDK's accumulator (`ResponsesWebSocketAccumulator`) raises on nothing (it marks its state
`unavailable`); its lane's `finalResponse` raises on an `output_item.done` whose index is not a
whole number or whose item is not an object with a string `type` (a message's `content` a list of
such parts, an `output_text`'s `text` a string), and a terminal event whose `response` is not an
object or whose `output` is not such a list (`Answer.lane`)."""

from __future__ import annotations

import math
from typing import Any

from ptc_emulator.emulator.wire.events import TERMINAL

__all__ = ["LIFECYCLE", "MAX_CHECKED_ITEMS", "ODD", "Answer", "dispatched", "position"]


class Answer:
    """One streamed answer, for the recorder (`Recorder.exchange`'s `answer`): the response id its
    first lifecycle event gave, and whether a later one gave another; and its output items as the
    SDKs' stream accumulator follows them (`broken`)."""

    __slots__ = (
        "added",
        "begun",
        "changed",
        "completed",
        "done",
        "ended",
        "identity",
        "keys",
        "open",
        "parts",
        "positions",
        "shapes",
        "socket",
        "wire_of",
    )

    def __init__(self, socket: bool = False) -> None:
        self.socket = socket
        """A WebSocket's response: the SDKs' socket session feeds its accumulator only the
        `response.created`, `output_item.done` and terminal events (the caller gives only those)."""
        self.parts: dict[Any, list[Any]] = {}
        """Output index -> the types of the content parts of the message added there."""
        self.identity: tuple[str, Any] | None = None
        self.changed = False
        self.ended = False
        """An SSE stream's `data: [DONE]` came: the SDKs read nothing after it."""
        self.added: dict[Any, dict[str, Any]] = {}
        """Output index -> the item `response.output_item.added` gave there."""
        self.completed: dict[Any, dict[str, Any]] = {}
        """Output index -> the item `response.output_item.done` gave there."""
        self.positions: dict[tuple[Any, ...], Any] = {}
        """A completed item's identity -> its output index."""
        self.begun = False
        """Whether an event came: the accumulator takes the first for the response it builds on, and
        raises unless it is `response.created` (a `response.in_progress` first too)."""
        self.keys: set[str] = set()
        """The identity keys (`_node_keys`) of the output items the Node SDK's accumulator holds."""
        self.shapes: dict[Any, _Shape] = {}
        """Output index -> the item the Node SDK's snapshot holds there (what of it its rules read)."""
        self.open: dict[Any, tuple[Any, ...]] = {}
        self.done: dict[Any, tuple[Any, ...]] = {}
        """Output index -> the identity (`_identity`) of the item there the Node SDK's stream holds
        unfinished, or done."""
        self.wire_of: dict[tuple[Any, ...], Any] = {}
        """An item's identity -> its output index, as the Node SDK's stream finds a listed item."""

    def broken(self, event: dict[str, Any]) -> str | None:
        """Why the SDKs' stream refuses this event, as to the output items (None: it does not).
        The stream accumulator holds an index to one `output_item.added`, an item's `.done` to the
        item added there (its type, id and call id), and a `response.completed` to the items
        streamed: one added and never done must be in the response, and one done must not come
        back with another id. Such a stream was recorded, and replayed as completed, where the
        client live had an error ("Cannot complete response with unfinished output items")."""
        kind = event.get("type")
        item = event.get("item")
        index = position(event.get("output_index"))
        if not self.begun:
            self.begun = True
            if kind != "response.created":  # "Expected to have received `response.created` before ..."
                return f"its first event is {str(kind)[:60]!r}, not response.created"
            response = event.get("response")
            if self.socket:
                return self.began(response)
            why = self.began(response) or self.listed(response)
            if why is None:
                self.based(response)
            return why
        # the Node SDK's rules before the event is taken in: the Python SDK's reasons are said first
        strict = self.lane(kind, event) if self.socket else self.strict(kind, event, index)
        return self.taken(kind, event, item, index) or strict

    def taken(self, kind: Any, event: dict[str, Any], item: Any, index: Any) -> str | None:
        """`broken`'s rules of the Python SDK's accumulator (and of both), past the first event."""
        if kind == "response.output_item.added" and isinstance(item, dict):
            if index in self.added:
                return f"a second output item was added at output index {index}"
            if len(self.added) >= MAX_CHECKED_ITEMS:
                return f"it adds more than {MAX_CHECKED_ITEMS:,} output items (not followed)"
            self.added[index] = item
            if item.get("type") == "message":
                content = item.get("content")
                content = content if isinstance(content, list) else ()
                self.parts[index] = [p.get("type") if isinstance(p, dict) else None for p in content]
        elif kind in _CONTENT_EVENTS:
            added = self.added.get(index)
            if added is None:  # "Received a content event for output index ... before receiving its output item"
                return f"a {kind} event at output index {str(index)[:40]} comes before its output item was added"
            wants = _CONTENT_EVENTS[kind]
            if wants is not None and added.get("type") != wants:
                return f"a {kind} event at output index {index} goes into a {str(added.get('type'))[:40]!r} item"
            parts = self.parts.get(index)
            if parts is None:
                pass  # not a message: the accumulator adds no part to it
            elif kind == "response.content_part.added":
                part = event.get("part")
                parts.append(part.get("type") if isinstance(part, dict) else None)
            elif kind in ("response.output_text.delta", "response.output_text.done"):
                what = "an output_text " + ("delta" if kind.endswith(".delta") else "done event")
                at = event.get("content_index")
                if not isinstance(at, int) or isinstance(at, bool) or not -len(parts) <= at < len(parts):
                    return f"{what} at output index {index} names a content part not added"
                if parts[at] != "output_text":
                    return f"{what} at output index {index} goes into a {str(parts[at])[:40]!r} part"
        elif kind == "response.output_item.done" and isinstance(item, dict):
            added = self.added.get(index)
            if added is not None and (_identity(added) != _identity(item) or not _same_id(added, item)):
                return f"the output item done at output index {index} is not the one added there"
            identity = _identity(item)
            if self.positions.get(identity, index) != index:
                return "an output item was done at two output indexes"
            previous = self.completed.get(index)
            if previous is not None:
                self.positions.pop(_identity(previous), None)
            self.completed[index] = item
            self.positions[identity] = index
        elif kind in ("response.created", "response.queued", "response.in_progress"):
            response = event.get("response")
            output = response.get("output") if isinstance(response, dict) else None
            if isinstance(output, list) and len(output) > MAX_CHECKED_ITEMS:
                return f"its response lists more than {MAX_CHECKED_ITEMS:,} output items (not looked through)"
            given: dict[tuple[Any, ...], dict[str, Any]] = {}
            for each in output if isinstance(output, list) else ():
                if isinstance(each, dict):
                    if _identity(each) in given:
                        return "its response lists one output item twice"
                    given[_identity(each)] = each
            for identity, each in given.items():
                at = self.positions.get(identity)
                if at is not None and not _same_id(self.completed[at], each):
                    return "its response gives a done output item another id"
        elif kind == "response.completed":
            response = event.get("response")
            output = response.get("output") if isinstance(response, dict) else None
            if isinstance(output, list) and len(output) > MAX_CHECKED_ITEMS:
                return f"its response lists more than {MAX_CHECKED_ITEMS:,} output items (not looked through)"
            final = {
                _identity(each): each for each in (output if isinstance(output, list) else ()) if isinstance(each, dict)
            }
            for each in self.completed.values():
                last = final.get(_identity(each))
                if last is not None and not _same_id(each, last):
                    return "the completed response gives a done output item another id"
            for at, each in self.added.items():
                last = final.get(_identity(each))
                if at not in self.completed and (last is None or not _same_id(each, last)):
                    return "the completed response lacks an output item the stream added and did not finish"
        return None

    def strict(self, kind: Any, event: dict[str, Any], index: Any) -> str | None:
        """Why the Node SDK's stream (stricter than the Python one's) refuses this event, past its
        first (the module's list). A stream either SDK refuses is not recorded: the client in the
        other language had an error live."""
        if not isinstance(kind, str) or kind not in _NODE_EVENTS:
            return f"it sends an event of a type the Node SDK's stream does not know ({str(kind)[:60]!r})"
        why = self.identified(kind, event, index)
        if why is not None:
            return why
        if kind in LIFECYCLE:
            return self.relisted(kind, event.get("response"))
        if "output_index" not in event:
            return None
        raw = event.get("output_index")
        if index is ODD or isinstance(raw, bool | str):
            return f"a {kind} event's output index {str(raw)[:40]!r} is not a whole number"
        item = event.get("item")
        if kind == "response.output_item.added":
            if item is None:
                return None  # the Node SDK skips it
            if index in self.open or index in self.done:
                return f"a second output item was added at output index {index}"
            self.shapes[index] = _Shape(item)
            self.open[index] = _identity(item)
            self.wire_of[_identity(item)] = index
            return None
        shape = self.shapes.get(index)
        if shape is None:
            return f"a {kind} event at output index {index} names no output item added there"
        if kind == "response.output_item.done":
            why = shape.replaced(item, f"the output item done at output index {index}")
            if why is None and isinstance(item, dict):  # `replaced` refuses any other
                self.shapes[index] = _Shape(item)
                self.done[index] = _identity(item)
                self.open.pop(index, None)
            return why
        if kind in _SHELL_COMMAND:
            if shape.kind != "shell_call":
                return f"a {kind} event at output index {index} goes into a {str(shape.kind)[:40]!r} item"
            return shape.placed(kind, event, index, self.shapes)
        if kind not in _ITEM_EVENTS:
            return None
        item_id = event.get("item_id")
        if not isinstance(item_id, str) or not item_id:
            return f"a {kind} event at output index {index} has no item_id"
        if shape.id != item_id:
            return f"a {kind} event names item {item_id[:60]!r}, not the item at output index {index}"
        wants = _ITEM_EVENTS[kind]
        if wants is None:  # a content part: a reasoning text's goes into reasoning, any other into a message
            part = event.get("part")
            if not isinstance(part, dict):
                return f"a {kind} event at output index {index} has no part"
            wants = "reasoning" if part.get("type") == "reasoning_text" else "message"
        if shape.kind != wants:
            return f"a {kind} event at output index {index} goes into a {str(shape.kind)[:40]!r} item"
        return shape.placed(kind, event, index, self.shapes)

    def identified(self, kind: str, event: dict[str, Any], index: Any) -> str | None:
        """The Node SDK's rules of output item identity (`_node_keys`): an item added, or done,
        must have its keys, and an added item (or an id a done one gives an item added without)
        none that an item held already has; a lifecycle event's response lists none twice."""
        item = event.get("item")
        if kind == "response.output_item.added" and item is not None:
            keys = _node_keys(item)
            if isinstance(keys, str):
                return f"its output item added at output index {str(index)[:40]} {keys}"
            return self.held(keys)
        if kind == "response.output_item.done":
            keys = _node_keys(item)
            if isinstance(keys, str):
                return f"its output item done at output index {str(index)[:40]} {keys}"
            shape = self.shapes.get(index)
            if shape is not None and shape.id is _NONE and isinstance(item, dict) and "id" in item:
                return self.held([f"id:{item['id']}"])
            return None
        if kind in LIFECYCLE:
            return self.listed(event.get("response"), fresh=True)
        return None

    def held(self, keys: list[str]) -> str | None:
        for key in keys:
            if key in self.keys:
                return f"two output items share the identity {key[:80]!r}"
        self.keys.update(keys)
        return None

    def listed(self, response: Any, fresh: bool = False) -> str | None:
        """A response's output items, as the Node SDK's accumulator checks each lifecycle event's
        (`fresh`: on their own; else they become the keys it holds, as at the first)."""
        output = response.get("output") if isinstance(response, dict) else None
        if output is None:
            return None
        if not isinstance(output, list):
            return "its response's output is not a list"
        if len(output) > MAX_CHECKED_ITEMS:
            return None  # `taken` refuses a list too long to look through
        seen: set[str] = set()
        for at, each in enumerate(output):
            keys = _node_keys(each)
            if isinstance(keys, str):
                return f"its response's output item at output index {at} {keys}"
            for key in keys:
                if key in seen:
                    return f"its response lists two output items of the identity {key[:80]!r}"
                seen.add(key)
        if not fresh:
            self.keys = seen
        return None

    def based(self, response: Any) -> None:
        """The first `response.created`'s items: the Node SDK's first snapshot, each at its place."""
        output = response.get("output") if isinstance(response, dict) else None
        for at, each in enumerate(output if isinstance(output, list) else ()):
            self.shapes[at] = _Shape(each)
            self.open[at] = _identity(each)
            self.wire_of[_identity(each)] = at

    def relisted(self, kind: str, response: Any) -> str | None:
        """A lifecycle event past the first, as the Node SDK's stream takes its response's items
        (its list checked on its own already, `listed`). A `response.completed` must hold every
        item added and not done, and give each its identity; any terminal event's list becomes
        the keys held. A mid-stream one (created, queued, in_progress) listing none changes
        nothing; listing only items the stream gave replaces them (each the same identity);
        listing another makes that list, and the items not in it after, the snapshot: its keys
        the keys held, each item at the position its identity had, or its place in the list."""
        output = response.get("output") if isinstance(response, dict) else None
        if not isinstance(output, list) or len(output) > MAX_CHECKED_ITEMS:
            return None  # none: taken as the items streamed; too long: `taken` refuses it
        if kind in TERMINAL:
            if kind == "response.completed":
                why = self.completes(output)
                if why is not None:
                    return why
            self.listed(response)
            return None if kind == "response.completed" else self.placed_again(output)
        if not output:
            return None
        if all(_identity(each) in self.wire_of for each in output):
            for each in output:
                at = self.wire_of[_identity(each)]
                shape = self.shapes.get(at)
                if shape is None:
                    return self.placed_again(output)
                why = shape.replaced(each, "its response's output item")
                if why is None and shape.id is _NONE and "id" in each:
                    why = self.held([f"id:{each['id']}"])
                if why is not None:
                    return why
                self.shapes[at] = _Shape(each)
            return None
        listed = {_identity(each) for each in output}
        retained = [shape.item for _, shape in sorted(self.shapes.items()) if _identity(shape.item) not in listed]
        whole = [*output, *retained]
        seen: set[str] = set()
        for each in whole:
            for key in _node_keys(each):
                if key in seen:
                    return f"two output items share the identity {key[:80]!r}"
                seen.add(key)
        self.keys = seen
        return self.placed_again(whole)

    def placed_again(self, output: list[Any]) -> str | None:
        """The Node SDK's stream places a new snapshot's items: each at the output index its
        identity had (an item done or not), or at its place in the list."""
        before = {identity: at for at, identity in self.done.items()}
        before.update({identity: at for at, identity in self.open.items()})
        shapes: dict[Any, _Shape] = {}
        self.wire_of = {}
        for place, each in enumerate(output):
            identity = _identity(each)
            at = before.get(identity, place)
            if at in shapes or self.done.get(at, identity) != identity or self.open.get(at, identity) != identity:
                return "its response places output items where others were (conflicting output positions)"
            previous = self.shapes.get(at)
            why = None if previous is None else previous.replaced(each, "its response's output item")
            if why is not None:
                return why
            shapes[at] = _Shape(each)
            self.wire_of[identity] = at
            if at not in self.done:
                self.open[at] = identity
        self.shapes = shapes
        return None

    def completes(self, output: list[Any]) -> str | None:
        """`response.completed` as the Node SDK's stream holds it to the items streamed."""
        final = {_identity(each): each for each in output if isinstance(each, dict)}
        for at, identity in self.done.items():
            if identity in final and (why := self.shapes[at].replaced(final[identity], "a completed item")):
                return why
        for at, identity in self.open.items():
            if identity not in final:
                return "the completed response lacks an output item the stream added and did not finish"
            shape = self.shapes.get(at)
            if shape is not None and (why := shape.replaced(final[identity], "a completed item")):
                return why
        return None

    def lane(self, kind: Any, event: dict[str, Any]) -> str | None:
        """What the Node SDK's WebSocket lane (`finalResponse`) raises on, past `response.created`:
        an `output_item.done` at an output index that is not a whole number, or whose item is not
        an object with a string `type` (a message's `content` a list of such parts, an
        `output_text` part's `text` a string); a terminal event whose `response` is not an object,
        or whose `output` is not a list of such items."""
        if kind == "response.output_item.done":
            raw = event.get("output_index")
            if isinstance(raw, bool) or not isinstance(raw, int | float) or position(raw) is ODD:
                return f"its output item done has an output index {str(raw)[:40]!r} that is not a whole number"
            return None if _lane_item(event.get("item")) else "its output item done is not an object the lane takes"
        if kind in TERMINAL:
            response = event.get("response")
            if not isinstance(response, dict):
                return f"its {kind} event's response is not an object"
            output = response.get("output")
            if output is not None and (
                not isinstance(output, list) or not all(_lane_item(i) for i in output[:MAX_CHECKED_ITEMS])
            ):
                return f"its {kind} event's response lists an output item that is not an object the lane takes"
            text = response.get("output_text")
            if text is not None and not isinstance(text, str):
                return f"its {kind} event's response has an output_text that is not a string"
        return None

    def began(self, response: Any) -> str | None:
        """The first `response.created`: the items its response lists are the accumulator's first
        output items, each at its place in the list, as if added there."""
        output = response.get("output") if isinstance(response, dict) else None
        if not isinstance(output, list):
            return None
        if len(output) > MAX_CHECKED_ITEMS:
            return f"its response lists more than {MAX_CHECKED_ITEMS:,} output items (not looked through)"
        for at, each in enumerate(output):
            if not isinstance(each, dict):
                continue
            self.added[at] = each
            if each.get("type") == "message":
                content = each.get("content")
                content = content if isinstance(content, list) else ()
                self.parts[at] = [p.get("type") if isinstance(p, dict) else None for p in content]
        return None


MAX_CHECKED_ITEMS = 2_048
"""The output items an answer's events may give and still be recorded: `Answer.broken` runs on
the event loop per event, and walked every item of each lifecycle event (a `response.completed` of
900,000 tiny items held the loop 2.5 s). Past it, the answer is passed on and not recorded."""

_CONTENT_EVENTS: dict[str, str | None] = {
    "response.content_part.added": None,
    "response.output_text.delta": "message",
    "response.output_text.done": "message",
    "response.function_call_arguments.delta": "function_call",
}
"""The events the SDKs' stream accumulator looks up the output item of (it raises when none was
added at their output index, or listed there by the first `response.created`), each with the type
the item must have (the Python SDK asserts it)."""

_ITEM_EVENTS: dict[str, str | None] = {
    "response.content_part.added": None,
    "response.content_part.done": None,
    "response.output_text.delta": "message",
    "response.output_text.done": "message",
    "response.output_text.annotation.added": "message",
    "response.refusal.delta": "message",
    "response.refusal.done": "message",
    "response.function_call_arguments.delta": "function_call",
    "response.function_call_arguments.done": "function_call",
    "response.custom_tool_call_input.delta": "custom_tool_call",
    "response.custom_tool_call_input.done": "custom_tool_call",
    "response.mcp_call_arguments.delta": "mcp_call",
    "response.mcp_call_arguments.done": "mcp_call",
    "response.mcp_call.in_progress": "mcp_call",
    "response.mcp_call.completed": "mcp_call",
    "response.mcp_call.failed": "mcp_call",
    "response.shell_call_output_content.delta": "shell_call_output",
    "response.shell_call_output_content.done": "shell_call_output",
    "response.reasoning_text.delta": "reasoning",
    "response.reasoning_text.done": "reasoning",
    "response.reasoning_summary_part.added": "reasoning",
    "response.reasoning_summary_part.done": "reasoning",
    "response.reasoning_summary_text.delta": "reasoning",
    "response.reasoning_summary_text.done": "reasoning",
    "response.code_interpreter_call_code.delta": "code_interpreter_call",
    "response.code_interpreter_call_code.done": "code_interpreter_call",
    "response.code_interpreter_call.in_progress": "code_interpreter_call",
    "response.code_interpreter_call.interpreting": "code_interpreter_call",
    "response.code_interpreter_call.completed": "code_interpreter_call",
    "response.file_search_call.in_progress": "file_search_call",
    "response.file_search_call.searching": "file_search_call",
    "response.file_search_call.completed": "file_search_call",
    "response.web_search_call.in_progress": "web_search_call",
    "response.web_search_call.searching": "web_search_call",
    "response.web_search_call.completed": "web_search_call",
    "response.image_generation_call.in_progress": "image_generation_call",
    "response.image_generation_call.generating": "image_generation_call",
    "response.image_generation_call.completed": "image_generation_call",
    "response.image_generation_call.partial_image": "image_generation_call",
    "response.mcp_list_tools.in_progress": "mcp_list_tools",
    "response.mcp_list_tools.completed": "mcp_list_tools",
    "response.mcp_list_tools.failed": "mcp_list_tools",
    "response.compaction.compacting": "compaction",
}
"""The events the Node SDK's stream accumulator (openai 7.60) holds to the item at their output
index: their `item_id` must be its id, and the item of the type given (a content part's: by the part)."""

_NODE_EVENTS = frozenset(
    {
        *_ITEM_EVENTS,
        "response.output_item.added",
        "response.output_item.done",
        "response.shell_call_command.added",
        "response.shell_call_command.delta",
        "response.shell_call_command.done",
        "response.created",
        "response.queued",
        "response.in_progress",
        "response.completed",
        "response.failed",
        "response.incomplete",
        "response.audio.delta",
        "response.audio.done",
        "response.audio.transcript.delta",
        "response.audio.transcript.done",
        "keepalive",
        "error",
    }
)
"""The event types the Node SDK's stream accumulator (openai 7.60) takes; on any other it raises
"Unhandled response stream event" (the Python SDK's passes it on)."""

_CALL_IDENTITY = frozenset({"function_call", "custom_tool_call", "shell_call", "shell_call_output"})


def _identity(item: dict[str, Any]) -> tuple[Any, ...]:
    """An output item's identity as the SDKs' stream accumulator takes it: its type, id and call
    id (a call's id left out: its call id names it)."""
    kind, call_id = item.get("type"), item.get("call_id")
    return (kind, None, call_id) if kind in _CALL_IDENTITY else (kind, item.get("id"), call_id)


def _node_keys(item: Any) -> list[str] | str:
    """An output item's identity keys as the Node SDK's stream accumulator (openai 7.60) takes
    them, or why it raises on the item: every item has a string `type` and a non-empty string `id`
    (a `computer_call`'s may be empty; a `function_call` or `custom_tool_call` may have none), and
    a routed call (`_CALL_IDENTITY`) a string `call_id`, non-empty but for a `function_call`'s.
    Keys are `id:<id>` (across types: a reasoning and a message sharing an id clash) and
    `call:<type>:<call id>`."""
    if item is None or item is False or item == 0 or item == "":
        return "is missing"  # missing output at index (a falsy item)
    if not isinstance(item, dict):
        return "is not an object"  # expected an own output item type
    kind = item.get("type")
    if not isinstance(kind, str):
        return "has no type"
    keys = []
    if "id" in item:
        item_id = item["id"]
        if not isinstance(item_id, str) or (not item_id and kind != "computer_call"):
            return f"has an id that is not a non-empty string ({str(item_id)[:40]!r})"
        keys.append(f"id:{item_id}")
    elif kind not in ("function_call", "custom_tool_call"):
        return "has no id"
    if kind in _CALL_IDENTITY:
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or (not call_id and kind != "function_call"):
            return f"has a call_id that is not a non-empty string ({str(call_id)[:40]!r})"
        keys.append(f"call:{kind}:{call_id}")
    return keys


def _same_id(before: dict[str, Any], after: dict[str, Any]) -> bool:
    return before.get("id") == after.get("id") or (
        before.get("id") is None and before.get("type") in ("function_call", "custom_tool_call")
    )


class _None:
    """An item without an `id` (the Node SDK's `hasOwn(output, 'id')` false)."""

    def __repr__(self) -> str:
        return "none"


_NONE = _None()

_SHELL_COMMAND = frozenset(
    {"response.shell_call_command.added", "response.shell_call_command.delta", "response.shell_call_command.done"}
)
_TEXT_PARTS = {
    "response.output_text.delta": "output_text",
    "response.output_text.done": "output_text",
    "response.output_text.annotation.added": "output_text",
    "response.refusal.delta": "refusal",
    "response.refusal.done": "refusal",
}
"""The message events the Node SDK's accumulator takes into a content part, each with the part's type."""
_SUMMARY_EVENTS = frozenset(
    {
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
    }
)


class _Part:
    """A content part as the Node SDK's accumulator reads it: its type, and how many annotations it
    holds (None: its `annotations` is not a list)."""

    __slots__ = ("annotations", "kind")

    def __init__(self, part: dict[str, Any]) -> None:
        self.kind = part.get("type")
        annotations = part.get("annotations")
        self.annotations = len(annotations) if isinstance(annotations, list) else None


def _part(value: Any) -> _Part | None:
    """A part, or None where JavaScript finds none (`!part`: null, false, 0, "")."""
    if isinstance(value, dict):
        return _Part(value)
    return None if value is None or (isinstance(value, bool | int | float | str) and not value) else _Part({})


def _number(value: Any) -> int | None:
    """An index as a JavaScript number compares (`0.0` is `0`); None: not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    return None


class _Shape:
    """An output item as the Node SDK's stream accumulator holds it: its identity and what of its
    parts its rules read (`placed`), not their text."""

    __slots__ = ("call_id", "commands", "content", "id", "item", "kind", "outputs", "summary")

    def __init__(self, item: dict[str, Any]) -> None:
        self.item = item
        self.kind = item.get("type")
        self.id: Any = item["id"] if "id" in item else _NONE
        self.call_id = item.get("call_id")
        content = item.get("content")
        self.content: list[_Part | None] | None | bool = (
            [_part(p) for p in content] if isinstance(content, list) else None if content is None else False
        )
        """The parts; None: no content (a reasoning's first reasoning text part makes it); False: not a list."""
        summary = item.get("summary")
        self.summary = [_part(p) is not None for p in summary] if isinstance(summary, list) else None
        action = item.get("action")
        commands = action.get("commands") if isinstance(action, dict) else None
        self.commands = len(commands) if isinstance(commands, list) else None
        outputs = item.get("output")
        self.outputs = len(outputs) if isinstance(outputs, list) else None

    def replaced(self, item: Any, what: str) -> str | None:
        """Why the Node SDK refuses `item` in this one's place (`validateResponseOutputItemIdentity`)."""
        keys = _node_keys(item)
        if isinstance(keys, str):
            return f"{what} {keys}"
        if item.get("type") != self.kind:
            return f"{what} is a {str(item.get('type'))[:40]!r} item, not the {str(self.kind)[:40]!r} item there"
        given = item["id"] if "id" in item else _NONE
        if given != self.id and not (self.id is _NONE and self.kind in ("function_call", "custom_tool_call")):
            return f"{what} has the id {str(given)[:60]!r}, not the item's {str(self.id)[:60]!r}"
        if self.kind in _CALL_IDENTITY and item.get("call_id") != self.call_id:
            return f"{what} has the call_id {str(item.get('call_id'))[:60]!r}, not the item's"
        return None

    def placed(self, kind: str, event: dict[str, Any], index: Any, shapes: dict[Any, _Shape]) -> str | None:
        """Why the Node SDK's accumulator refuses where this event of the item puts what it gives
        (a part, an annotation, a summary part, a command); None: it takes it (and this follows)."""
        at = f"a {kind} event at output index {index}"
        if kind == "response.content_part.added":
            if self.content is None and self.kind == "reasoning":
                self.content = []
            if not isinstance(self.content, list):
                return f"{at} goes into an item whose content is not a list"
            n = _number(event.get("content_index"))
            if n != len(self.content):
                said = str(event.get("content_index"))[:40]
                return f"{at} adds content part {said} where the next is {len(self.content)}"
            self.content.append(_part(event.get("part")))
            return None
        if kind == "response.content_part.done" or kind in _TEXT_PARTS or kind.startswith("response.reasoning_text."):
            if self.content is None:
                return f"{at} goes into an item without content"
            n, why = self.part_at(at, event.get("content_index"))
            if why is not None:
                return why
            assert isinstance(self.content, list) and n is not None
            if kind == "response.content_part.done":
                self.content[n] = _part(event.get("part"))
                return None
            part = self.content[n]
            wants = _TEXT_PARTS.get(kind, "reasoning_text")
            assert part is not None
            if part.kind != wants:
                return f"{at} goes into a {str(part.kind)[:40]!r} part, not a {wants!r} one"
            if kind == "response.output_text.annotation.added":
                said = str(event.get("annotation_index"))[:40]
                if part.annotations is None:
                    return f"{at} sets annotation {said} where the part has none"
                m = _number(event.get("annotation_index"))
                if m is None or not 0 <= m <= part.annotations:
                    return f"{at} sets annotation {said} where the next is {part.annotations}"
                part.annotations = max(part.annotations, m + 1)
            return None
        if kind == "response.reasoning_summary_part.added" or kind in _SUMMARY_EVENTS:
            if self.summary is None:
                return f"{at} goes into an item whose summary is not a list"
            n = _number(event.get("summary_index"))
            said = str(event.get("summary_index"))[:40]
            if kind == "response.reasoning_summary_part.added":
                if n != len(self.summary):
                    return f"{at} adds summary part {said} where the next is {len(self.summary)}"
                self.summary.append(_part(event.get("part")) is not None)
                return None
            if n is None or not 0 <= n < len(self.summary) or not self.summary[n]:
                return f"{at} names summary part {said}, not one there"
            if kind == "response.reasoning_summary_part.done":
                self.summary[n] = _part(event.get("part")) is not None
            return None
        if kind in _SHELL_COMMAND:
            n = _number(event.get("command_index"))
            said = str(event.get("command_index"))[:40]
            if self.commands is None:
                return f"{at} goes into a shell call without a commands list"
            ends = self.commands + (kind == "response.shell_call_command.added")
            if n is None or not 0 <= n < ends:
                return f"{at} names command {said}, not one there"
            self.commands = max(self.commands, n + 1)
            return None
        if kind.startswith("response.shell_call_output_content.") and self.kind == "shell_call_output":
            if kind.endswith(".done"):
                output = event.get("output")
                if not isinstance(output, list) or not output or _part(output[0]) is None:
                    return f"{at} has no output"
            elif event.get("delta") is None:
                return f"{at} has no delta"
            n = _number(event.get("command_index"))
            said = str(event.get("command_index"))[:40]
            call = next((s for s in shapes.values() if s.kind == "shell_call" and s.call_id == self.call_id), None)
            if call is not None:
                if call.commands is None or n is None or not 0 <= n < call.commands:
                    return f"{at} names command {said}, not one of its call's"
            elif self.outputs is None or n is None or not 0 <= n <= self.outputs:
                return f"{at} names command output {said}, not one there or the next"
            if n is not None and self.outputs is not None:
                self.outputs = max(self.outputs, n + 1)
        return None

    def part_at(self, at: str, index: Any) -> tuple[int | None, str | None]:
        """A content part's index (`getContent`), or why there is none there."""
        n = _number(index)
        if not isinstance(self.content, list):
            return None, f"{at} goes into an item whose content is not a list"
        if n is None or not 0 <= n < len(self.content) or self.content[n] is None:
            return None, f"{at} names content part {str(index)[:40]}, not one there"
        return n, None


def _lane_item(item: Any) -> bool:
    """Whether the Node SDK's WebSocket lane takes an output item (`#isValidOutputItem`)."""
    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
        return False
    if item["type"] != "message":
        return True
    content = item.get("content")
    return isinstance(content, list) and all(
        isinstance(p, dict)
        and isinstance(p.get("type"), str)
        and (p["type"] != "output_text" or isinstance(p.get("text"), str))
        for p in content
    )


LIFECYCLE = frozenset({"response.created", "response.queued", "response.in_progress", *TERMINAL})
"""The events whose response an SDK's stream holds to the first one's id."""


class _Odd:
    """A position no client reads as an index (`_position`)."""


ODD = _Odd()


def position(value: Any) -> Any:
    """An output, content or summary index as the SDKs read it: a number equal to a whole one is
    that int (the Python SDK keeps items in a dict, where `0.0`, `0e0`, `True` and `0` are one key),
    a string of digits without a leading zero is its int (JavaScript's `output["0"]` is `output[0]`);
    None (absent) stays None. Anything else (negative: Python's `content[-1]` is the last part) is `ODD`."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value if value >= 0 else ODD
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() and value >= 0 else ODD
    if isinstance(value, str) and value.isascii() and value.isdigit() and (value == "0" or value[0] != "0"):
        return int(value)
    return ODD


def dispatched(block: bytes) -> bool:
    """Whether an SSE event's lines (LF-ended, no data in them: `data:` with nothing, or no data
    line) reach a client as an event all the same: both SDKs' readers give one for a `data` field
    or a non-empty `event` name, the Python SDK's for an `id` or a `retry` too, and both parse its
    empty data as JSON and raise (`json.loads("")`, "malformed server-sent event JSON")."""
    if not any(name in block for name in (b"data", b"event:", b"id:", b"retry:")):
        return False  # most blocks without data: comments
    for line in block.split(b"\n"):
        line = line.removeprefix(b"\xef\xbb\xbf")
        if not line or line.startswith(b":"):
            continue
        name, _, value = line.partition(b":")
        value = value.removeprefix(b" ")
        if name == b"data" or (name in (b"event", b"id") and value and b"\0" not in value):
            return True
        if name == b"retry":
            try:
                int(value.decode("utf-8", "replace"))
            except ValueError:
                continue
            return True
    return False
