"""Limits keep a `store: false` conversation resendable: a program at its full output limit, in
the characters JSON escapes the most, can be sent back in the next request. `--max-body-bytes`
below what that needs (`resend_floor`) is refused at startup with one clear line."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai.types.responses import Response

from ptc_emulator.api import cli
from ptc_emulator.api.app import create_app
from ptc_emulator.api.settings import Settings, resend_floor, resend_problem
from ptc_emulator.sandbox import Limits
from tests.api.api_support import PTC_TOOLS, program_message

pytestmark = pytest.mark.anyio
OUTPUT = 16 * 2**10


def test_the_default_limits_are_consistent() -> None:
    assert resend_problem(Settings()) is None


def test_a_body_limit_too_small_for_the_output_limit_is_refused_at_startup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["serve", "--store", "memory", "--data-dir", str(tmp_path), "--port", "0", "--max-body-bytes", "4000000"]
    with pytest.raises(SystemExit) as stopped:
        cli.main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip()
    floor = resend_floor(Limits())
    assert err.startswith("ptc-emulator: --max-body-bytes 4000000 is too small for --max-output-bytes"), err
    assert f"use --max-body-bytes {floor} or more" in err and len(err.splitlines()) == 1


@contextlib.asynccontextmanager
async def app_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=120) as http:
            yield http


async def create(http: httpx.AsyncClient, items: list[dict[str, Any]]) -> Response:
    # ASCII-only JSON: every non-ASCII character as a \uXXXX escape, the largest a client can send.
    body = json.dumps({"model": "m", "input": items, "tools": PTC_TOOLS, "store": False}, ensure_ascii=True)
    reply = await http.post("/v1/responses", content=body, headers={"content-type": "application/json"})
    assert reply.status_code == 200, reply.text[:300]
    return Response.model_validate(reply.json())


async def test_a_store_false_conversation_at_the_output_limit_stays_resendable(tmp_path: Path) -> None:
    limits = Limits(max_output_bytes=OUTPUT, max_code_bytes=2**10)
    settings = Settings(
        data_dir=tmp_path, store="memory", pool_size=1, limits=limits, max_body_bytes=resend_floor(limits)
    )
    # Two bytes counted per character, six once escaped as \u00e9: the worst ratio there is.
    size = (OUTPUT - 64) // 2
    code = f"text('\u00e9'.repeat({size}));"
    async with app_client(settings) as http:
        first = await create(http, [{"role": "user", "content": program_message(code)}])
        kinds = [item.type for item in first.output]
        assert kinds == ["program", "program_output", "message"], kinds
        assert first.output_text == "\u00e9" * size  # the whole output, near the limit, completed
        history = [
            {"role": "user", "content": program_message(code)},
            *(item.model_dump(exclude_none=True) for item in first.output),
            {"role": "user", "content": program_message("text('again');")},
        ]
        second = await create(http, history)
    assert second.output_text == "again"


# A program of about ninety bytes whose thousand parallel calls made a response of 26 MB (plain
# letters) to 36 MB (quotes, which JSON escapes twice over in `arguments`), or 8 MB that a client
# escaping every non-ASCII character sends back as 24 MB: none of them could be continued.
CHARACTERS = {"letters": ("x", 1), "quotes": ('\\"', 4), "controls": ("\\x01", 7), "accents": ("\u00e9", 6)}
REPEATS = {"letters": "26e3", "quotes": "9e3", "controls": "4e3", "accents": "4e3"}
"""Each character's count per call: the response sizes above (within the heap limit), before the
call limit (`--max-argument-bytes`) ended such a program."""


@pytest.mark.parametrize("kind", CHARACTERS)
async def test_a_tiny_program_cannot_make_a_response_too_large_to_send_back(tmp_path: Path, kind: str) -> None:
    char, times = CHARACTERS[kind][0], REPEATS[kind]
    code = f"let p=[];for(let i=0;i<1e3;i++)p.push(tools.add({{a:'{char}'.repeat({times})}}));await Promise.all(p)"
    assert len(code.encode()) < 100
    async with app_client(Settings(data_dir=tmp_path, store="memory", pool_size=1)) as http:
        first = await create(http, [{"role": "user", "content": program_message(code)}])
    output = next(item for item in first.output if item.type == "program_output")
    assert output.status == "incomplete"  # type: ignore[union-attr]
    assert "--max-argument-bytes" in output.result  # type: ignore[union-attr]
    assert not any(item.type == "function_call" for item in first.output)
    assert len(first.model_dump_json()) < 64 * 2**10


@pytest.mark.parametrize("kind", CHARACTERS)
async def test_a_program_just_under_the_call_limit_stays_resendable(tmp_path: Path, kind: str) -> None:
    limits = Limits(max_output_bytes=OUTPUT, max_code_bytes=2**10, max_argument_bytes=256 * 2**10)
    settings = Settings(
        data_dir=tmp_path, store="memory", pool_size=1, limits=limits, max_body_bytes=resend_floor(limits)
    )
    from ptc_emulator.sandbox.outcome import CALL_BYTES  # (here: the first test runs without it)

    char, cost = CHARACTERS[kind]
    calls = 50
    # Each call: CALL_BYTES, its name (`add`), `{"a":"` and `"}` escaped (12), the characters.
    size = (limits.max_argument_bytes // calls - CALL_BYTES - 3 - 12) // cost
    call = f"tools.add({{a: '{char}'.repeat({size})}})"
    code = f"const rs = await Promise.all(Array.from({{length: {calls}}}, () => {call}));\ntext('got ' + rs.length);"
    async with app_client(settings) as http:
        first = await create(http, [{"role": "user", "content": program_message(code)}])
        called = [item for item in first.output if item.type == "function_call"]
        assert len(called) == calls, [item.type for item in first.output]
        answers = [
            {"type": "function_call_output", "call_id": c.call_id, "output": "1", "caller": c.caller.model_dump()}  # type: ignore[union-attr]
            for c in called
        ]
        history = [
            {"role": "user", "content": program_message(code)},
            *(item.model_dump(exclude_none=True) for item in first.output),
            *answers,
        ]
        second = await create(http, history)
    assert second.output_text == f"got {calls}"
