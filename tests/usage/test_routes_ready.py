"""The router's routes are set up as the server starts, not on the first request: FastAPI builds
each route's state (its parameters' validators) the first time a request is matched against it,
15-20 ms of the event loop's CPU in which every client waited. The test notes where each route's
state is built: on the code before, after the server had started, while its first request was served.
It reads FastAPI's own step by name, and is skipped where FastAPI has no such step."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from fastapi import routing

from ptc_emulator.testing.server import EmulatorServer


def test_the_routes_are_set_up_before_the_first_request(
    make_server: Callable[..., EmulatorServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    context = getattr(routing, "_EffectiveRouteContext", None)
    if context is None or not hasattr(context, "from_api_route"):
        pytest.skip("this FastAPI sets its routes up when they are added")
    real = context.from_api_route.__func__
    started = threading.Event()
    built_in_a_request: list[str] = []

    def noting(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if started.is_set():
            built_in_a_request.append(str(kwargs.get("original_route", args[0] if args else "")))
        return real(cls, *args, **kwargs)

    monkeypatch.setattr(context, "from_api_route", classmethod(noting))
    server = make_server()
    started.set()
    with httpx.Client(timeout=60) as client:
        assert client.get(server.base_url.removesuffix("/v1") + "/_emulator/health").status_code == 200
        assert client.get(server.base_url + "/models").status_code == 200
    assert built_in_a_request == []
