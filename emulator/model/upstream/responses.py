"""The Responses API (`/responses`, `store: false`): streamed as its events (`response.output_text.delta`
as the text comes, a `reasoning` item's summary when its `output_item.done` arrives, the answer
in `response.completed`), a failure mid-stream as `response.failed` or `error`."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from typing import Any

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.model.upstream.protocol import (
    Answer,
    Delta,
    Fault,
    ToolCall,
    UpstreamProtocol,
    json_schema_of,
    words,
)
from ptc_emulator.emulator.model.upstream.reading import Malformed, Shape, parse
from ptc_emulator.emulator.model.upstream.teach import Function
from ptc_emulator.emulator.model.upstream.transcript import Entry

__all__ = ["Responses", "responses_input"]


class Responses(UpstreamProtocol):
    name = "responses"
    title = "Responses (/responses, store: false)"
    path = "/responses"

    def request(
        self,
        model: str,
        instructions: str | None,
        transcript: list[Entry],
        functions: list[Function],
        tool_choice: str,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"model": model, "input": responses_input(transcript), "store": False}
        if instructions:
            body["instructions"] = instructions
        if functions:
            body["tools"] = [
                {"type": "function", "name": f.name, "description": f.description, "parameters": f.parameters}
                for f in functions
            ]
            name = tool_choice.removeprefix("function:")
            body["tool_choice"] = {"type": "function", "name": name} if name != tool_choice else tool_choice
        return body

    def settings(self, effort: str | None, text_format: dict[str, Any] | None) -> dict[str, Any]:
        """`reasoning: {effort}` and `text: {format}`, as a Responses request spells them."""
        fields: dict[str, Any] = {}
        if effort is not None:
            fields["reasoning"] = {"effort": effort}
        schema = json_schema_of(text_format)
        if schema is not None:
            fields["text"] = {"format": schema}
        return fields

    def streamed(self, body: dict[str, Any]) -> dict[str, Any]:
        return {**body, "stream": True}

    def answer(self, data: Any) -> Answer:
        return self._answer(Shape(messages.answered_body()), data, "")

    def _answer(
        self,
        shape: Shape,
        data: Any,
        at: str,
        done: list[dict[str, Any]] | None = None,
        ended: str | None = None,
    ) -> Answer:
        """A response object (`at`: its path, for a `Fault`), its output as `done` gives it if it
        comes without one; `ended`: the status the stream's last event says (`completed` for
        `response.completed`), which a response without a `status` of its own takes.

        Its `status` says how it ended: `completed`, or `incomplete` (the text kept, the reason
        its `incomplete_details` give, `max_output_tokens` if none the hosted API has), or
        `failed` (a `Fault` quoting its error). Anything else (`cancelled`, `in_progress`,
        `queued`, another value, none) did not finish: a `Fault` naming it, never `completed`.
        Any sign of a cut wins over a `completed` status: an `incomplete_details.reason`, or an
        output item `incomplete` (in the response's output, or as an `output_item.done` event gave
        it, even where the response's output says the same item `completed`) makes the response
        incomplete too. An output item of another status (`in_progress`, `failed`, any other
        value) did not finish: a `Fault` naming the item and its status. `incomplete_details` is
        null or an object with a string `reason`; any other shape is a `Fault` naming its path."""
        response = shape.object(data, at or "(the body)")
        at = f"{at}." if at else ""
        status = response.get("status", ended)
        if ended == "incomplete" and status == "completed":  # the event says it was cut: believed
            status = ended
        if status == "failed" or response.get("error"):
            error = response.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            raise Fault.quoting(messages.failed_response, str(message or messages.no_failure_message()))
        if status not in ("completed", "incomplete"):
            shown = "(none)" if status is None else status if isinstance(status, str) else repr(status)
            raise Fault.quoting(messages.unfinished_response, shown)
        answer = Answer(model=shape.string(response.get("model"), f"{at}model") or None)
        reason = _reason(shape, response.get("incomplete_details"), f"{at}incomplete_details")
        stopped = reason if reason in ("max_output_tokens", "content_filter") else "max_output_tokens"
        if status == "incomplete" or reason is not None:  # cut short (whatever `status` says): the response is too
            answer.stopped = stopped
        output = shape.objects(response.get("output"), f"{at}output")
        where = f"{at}output"
        for n, item in enumerate(done or ()):
            if _item_cut(item, f"output_item.done[{n}]"):  # an item the stream said was cut
                answer.stopped = stopped
        if not output and done:
            output, where = done, "output_item.done"
        text: list[str] = []
        refused: list[str] = []
        for n, item in enumerate(output):
            kind = item.get("type")
            path = f"{where}[{n}]"
            if _item_cut(item, path):  # its text or arguments were cut: so is the response
                answer.stopped = stopped
            if kind == "message":
                for m, part in enumerate(shape.objects(item.get("content"), f"{path}.content")):
                    if part.get("type") == "output_text":
                        text.append(shape.string(part.get("text"), f"{path}.content[{m}].text"))
                    elif part.get("type") == "refusal":
                        refused.append(shape.string(part.get("refusal"), f"{path}.content[{m}].refusal"))
            elif kind == "function_call":
                answer.calls.append(
                    ToolCall(
                        shape.string(item.get("call_id"), f"{path}.call_id")
                        or shape.string(item.get("id"), f"{path}.id"),
                        shape.string(item.get("name"), f"{path}.name"),
                        shape.arguments(item.get("arguments"), f"{path}.arguments"),
                    )
                )
            elif kind == "reasoning":
                answer.reasoning = _summary(shape, item, path) or answer.reasoning
        answer.text = "".join(text)
        answer.refusal = "".join(refused)
        shape.usage(answer, response.get("usage"), f"{at}usage")
        return answer

    async def stream(self, events: AsyncIterator[bytes], on_delta: Delta | None) -> Answer:
        """The text deltas as they come, a reasoning item's summary when it is done; the answer is
        the `response.completed` event's response (its output as the `output_item.done` events gave
        it, if the response comes without). The deltas, joined, must be the answer's text, as the
        hosted API's add up to their `.done` text: otherwise the text the client was shown is not
        the answer, a `Fault` (before, deltas 'streamed words' then a final 'different words', or a
        delta at an output the final response does not hold, ended `completed`)."""
        shape = Shape(messages.streamed_event())
        done: list[dict[str, Any]] = []
        streamed: list[str] = []  # the text passed on, which must add up to the answer's
        async for data in events:
            try:
                event = shape.object(await parse(data), "(the event)")
            except Malformed as e:
                raise Fault(e.said(messages.streamed_event())) from None
            kind = event.get("type")
            if kind == "response.output_text.delta":
                piece = shape.string(event.get("delta"), "delta")
                streamed.append(piece)
                if piece and on_delta is not None:
                    on_delta("text", piece)
            elif kind == "response.output_item.done":
                item = shape.object(event.get("item"), "item")
                done.append(item)
                if item.get("type") == "reasoning" and on_delta is not None:
                    on_delta("reasoning", _summary(shape, item, "item"))
            elif kind in ("response.completed", "response.incomplete"):
                ended = kind.removeprefix("response.")
                answer = self._answer(shape, event.get("response"), "response", done, ended)
                told = "".join(streamed)
                if told and told != answer.text:  # what the client was shown is not the answer
                    raise Fault(messages.deltas_disagree(len(told), len(answer.text)))
                return answer
            elif kind in ("response.failed", "error"):
                response = event.get("response")
                failure = response.get("error") if isinstance(response, dict) else None
                failure = failure or event.get("error") or event
                message = failure.get("message") if isinstance(failure, dict) else failure
                said = words(message) if message else messages.no_failure_message()
                raise Fault.quoting(messages.failed_mid_stream, said)
        raise Fault(messages.stream_ended_early())


def _reason(shape: Shape, details: Any, at: str) -> str | None:
    """The `reason` of a response's `incomplete_details` (`at`: its path), None when they are null
    or absent. Any other shape is a `Fault` naming the path: `"max_output_tokens"` as a bare
    string, a reason that is not a string or none at all was read as no sign of a cut before."""
    if details is None:
        return None
    reason = shape.object(details, at).get("reason")
    if reason is None:
        raise shape.fault(f"{at}.reason", messages.shape_missing())
    return shape.string(reason, f"{at}.reason")


def _item_cut(item: dict[str, Any], at: str) -> bool:
    """Whether an output item (`at`: its path) says it was cut (`status: incomplete`); a status
    other than that, `completed` or none (`in_progress`, `failed`, another value) is a `Fault`
    naming the item: the answer did not finish, and was taken as `completed` before."""
    status = item.get("status")
    if status is None or status == "completed":
        return False
    if status == "incomplete":
        return True
    shown = status if isinstance(status, str) else repr(status)
    raise Fault.quoting(functools.partial(messages.unfinished_item, at), shown)


def _summary(shape: Shape, item: dict[str, Any], at: str) -> str:
    """A reasoning item's summary, its parts' text joined."""
    parts = shape.objects(item.get("summary"), f"{at}.summary")
    return " ".join(shape.string(part.get("text"), f"{at}.summary[{n}].text") for n, part in enumerate(parts))


def responses_input(transcript: list[Entry]) -> list[dict[str, Any]]:
    """The transcript as Responses input items."""
    found: list[dict[str, Any]] = []
    for entry in transcript:
        if entry.kind == "message":
            found.append({"type": "message", "role": entry.role, "content": entry.text})
        elif entry.kind == "call":
            found.append(
                {"type": "function_call", "call_id": entry.call_id, "name": entry.name, "arguments": entry.text}
            )
        else:
            found.append({"type": "function_call_output", "call_id": entry.call_id, "output": entry.text})
    return found
