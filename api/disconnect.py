"""A non-streaming create whose client goes away is cancelled, as a streamed one is.

Without this, a program keeps its worker busy to its deadline for nobody: ten abandoned requests
delay the next one by their whole run time. Cancelling the run kills and replaces the worker that
runs the program (see `sandbox.Pool.run`), and the journal records the request with status 499.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import Request

from ptc_emulator.emulator import messages

__all__ = ["unless_disconnected"]

T = TypeVar("T")


async def _disconnected(request: Request) -> None:
    # The body has been read: the next message is the disconnect (or never comes).
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """`await work`, unless the client disconnects first: then cancel it and raise a 499
    (`messages.client_closed()`)."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        task.cancel()
        raise
    finally:
        watch.cancel()
        with contextlib.suppress(BaseException):
            await watch
    if not task.done():
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        raise messages.client_closed()
    return task.result()
