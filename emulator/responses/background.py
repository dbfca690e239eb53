"""Responses created with `background: true`: queued at once, finished by a task of their own."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["Background"]


class Background:
    """The tasks of background responses still running, by response id."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[dict[str, Any]]] = {}

    def start(self, response_id: str, work: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        async def run() -> dict[str, Any]:
            try:
                return await work()
            finally:
                self._tasks.pop(response_id, None)

        self._tasks[response_id] = asyncio.ensure_future(run())

    def cancel(self, response_id: str) -> bool:
        """Stop the response's task; True if it was still running."""
        task = self._tasks.pop(response_id, None)
        if task is None or task.done():
            return False
        task.cancel()
        return True

    async def aclose(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
