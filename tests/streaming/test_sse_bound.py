"""SSE output is bounded like non-streaming output: a program of a few dozen bytes whose text is
all one-letter words cannot turn its output into hundreds of thousands of delta events.

The deltas of one text are at most `events.MAX_DELTAS`, so a stream stays within a small multiple
of the same response as JSON (docs/limits.md). In process, with a small output limit: the point
is the ratio, not the size.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings
from ptc_emulator.emulator.wire.events import MAX_DELTAS
from ptc_emulator.sandbox import Limits
from tests.api.api_support import PTC_TOOLS, program_message

pytestmark = pytest.mark.anyio
EVENT: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
JSON = {"content-type": "application/json"}
OUTPUT_LIMIT = 2**18


async def both_ways(tmp_path: Path, code: str) -> tuple[bytes, list[dict[str, Any]], bytes]:
    """The stream's bytes and events, and the same request's JSON body."""
    settings = Settings(
        data_dir=tmp_path, pool_size=1, bundled_fixtures=False, limits=Limits(max_output_bytes=OUTPUT_LIMIT)
    )
    app = create_app(settings)
    body = {"model": "m", "input": program_message(code), "tools": PTC_TOOLS}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=120) as http:
            streamed = await http.post("/v1/responses", json={**body, "stream": True}, headers=JSON)
            plain = await http.post("/v1/responses", json=body, headers=JSON)
    assert streamed.status_code == 200 and plain.status_code == 200, plain.text[:300]
    events = [json.loads(line[6:]) for line in streamed.text.split("\n") if line.startswith("data: ")]
    for event in events:
        EVENT.validate_python(event)
    Response.model_validate(plain.json())
    return streamed.content, events, plain.content


async def test_a_stream_of_one_letter_words_stays_a_small_multiple_of_the_json(tmp_path: Path) -> None:
    # 200 KB of text in 100,000 words: one delta per word would be some 24 MB of events.
    stream, events, plain = await both_ways(tmp_path, "text('x '.repeat(1e5));")
    kinds = Counter(e["type"] for e in events)
    assert kinds["response.output_text.delta"] <= 2 * MAX_DELTAS, kinds
    assert len(stream) <= 6 * len(plain), (len(stream), len(plain))
    final = events[-1]
    assert final["type"] == "response.completed"
    texts = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert texts == "".join(
        part["text"] for item in final["response"]["output"] if item["type"] == "message" for part in item["content"]
    )


async def test_a_program_streaming_past_the_output_limit_ends_incomplete_in_a_bounded_stream(tmp_path: Path) -> None:
    stream, events, plain = await both_ways(tmp_path, "for (;;) text('x ');")
    outputs = [e["item"] for e in events if e["type"] == "response.output_item.done"]
    program_output = next(item for item in outputs if item["type"] == "program_output")
    assert program_output["status"] == "incomplete", program_output
    assert len(stream) <= 6 * len(plain) + 64 * 2**10, (len(stream), len(plain))
