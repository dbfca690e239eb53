"""A conversation lives in the SQLite store: a program paused through it resumes on a new server process."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest

from ptc_emulator.testing.process import ServerProcess
from tests.support import PTC_TOOLS, answer_all, arithmetic, js

CODE = js("const x = await tools.add({a: 20, b: 22}); text(String(x));")


def test_a_conversation_survives_a_restart(tmp_path: Path) -> None:
    process = ServerProcess(tmp_path, store="sqlite", workers=1).start()
    try:
        with openai.OpenAI(base_url=process.base_url, api_key="sk-test", max_retries=0) as c:
            conv = c.conversations.create(metadata={"run": "restart"})
            paused = c.responses.create(model="m", conversation=conv.id, input=CODE, tools=PTC_TOOLS)
    finally:
        process.kill9()  # no graceful shutdown: the SQLite transaction is what keeps the items
    process = ServerProcess(tmp_path, store="sqlite", workers=1).start()
    try:
        with openai.OpenAI(base_url=process.base_url, api_key="sk-test", max_retries=0) as c:
            assert c.conversations.retrieve(conv.id).metadata == {"run": "restart"}
            done = c.responses.create(
                model="m", conversation=conv.id, input=answer_all(paused, arithmetic), tools=PTC_TOOLS
            )
            assert done.output_text == "42"
            kinds = [i.type for i in c.conversations.items.list(conv.id, order="asc")]
            assert kinds == ["message", "program", "function_call", "function_call_output", "program_output", "message"]
            c.conversations.delete(conv.id)
    finally:
        process.kill9()
    process = ServerProcess(tmp_path, store="sqlite", workers=1).start()
    try:
        with openai.OpenAI(base_url=process.base_url, api_key="sk-test", max_retries=0) as c:
            with pytest.raises(openai.NotFoundError):
                c.conversations.retrieve(conv.id)
    finally:
        process.kill9()
