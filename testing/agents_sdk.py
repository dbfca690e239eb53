"""The OpenAI Agents SDK under pytest: its shared HTTP client, kept from outliving a test's event loop.

The SDK's default model provider sends every request through one module-global HTTP client
(`agents.models.openai_provider.shared_http_client()`), made on first use and pooled. A pooled
connection belongs to the event loop that opened it; async tests run each on a loop of its own
(anyio's and pytest-asyncio's default, or `asyncio.run` in a test), so the second test reuses or
closes a connection of the first test's closed loop: `RuntimeError: Event loop is closed`, for
every test after the first that runs an agent with no client of its own (`Runner.run(agent, ...)`
after `use_env`, or `OPENAI_BASE_URL` set).

The SDK offers no setting for that client (`set_default_openai_client` replaces the whole OpenAI
client, base URL included, for every later run: not the plugin's to choose), so the `ptc_emulator`
fixture puts one in the SDK's slot that keeps no idle connection: each request opens and closes
its connection on the loop that sends it, as `PTCEmulator.async_client()` does. A connection to
127.0.0.1 costs well under a millisecond. The SDK makes its client only when the slot is empty,
so the slot is filled before the SDK can: at once when the SDK is loaded, else the moment it is
imported (inside a test, by agent code that imports it late), through an import hook that
watches those two module names and nothing else.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

__all__ = ["SHARED_CLIENT_MODULES", "restore_shared_clients", "unpool_shared_clients"]

SHARED_CLIENT_MODULES = ("agents.models.openai_provider", "agents.voice.models.openai_model_provider")
"""The SDK's modules that keep a module-global `_http_client` (text models; voice models)."""

_MARK = "_ptc_emulator_unpooled"


def _unpooled_client(module: Any) -> Any:
    """An HTTP client of the kind the SDK makes itself, with no idle connection kept."""
    # The factory the SDK itself calls (openai-agents 0.24: openai's DefaultAsyncHttpx2Client).
    make = getattr(module, "DefaultAsyncHttpx2Client", None) or module.DefaultAsyncHttpxClient
    import openai

    # The SDK's own HTTP library's Limits class (it is not necessarily httpx's).
    limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=1000, max_keepalive_connections=0)
    client = make(limits=limits)
    setattr(client, _MARK, True)
    return client


def _fill(module: ModuleType) -> None:
    if hasattr(module, "_http_client") and not getattr(module._http_client, _MARK, False):
        setattr(module, "_http_client", _unpooled_client(module))  # noqa: B010  (a module global the SDK owns)


class _Filling(importlib.abc.Loader):
    """A shared-client module's own loader, which fills the slot once the module has run."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        _fill(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_resource_reader, ...: the loader's own
        return getattr(self.loader, name)


class _FillOnImport(importlib.abc.MetaPathFinder):
    """Finds the two shared-client modules as the other finders do, with a filling loader."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in SHARED_CLIENT_MODULES:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec: ModuleSpec | None = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _Filling(spec.loader)
                return spec
        return None


_HOOK = _FillOnImport()


def unpool_shared_clients() -> None:
    """Give each SDK module that keeps a shared HTTP client one without idle connections: the
    loaded ones now, the others when they are imported. Imports nothing itself: a run that
    never loads the SDK pays nothing."""
    for name in SHARED_CLIENT_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            _fill(module)
    if not all(name in sys.modules for name in SHARED_CLIENT_MODULES) and _HOOK not in sys.meta_path:
        sys.meta_path.insert(0, _HOOK)


def restore_shared_clients() -> None:
    """Undo `unpool_shared_clients`: the hook removed, the slots it filled emptied (the SDK makes
    its own client again on next use)."""
    if _HOOK in sys.meta_path:
        sys.meta_path.remove(_HOOK)
    for name in SHARED_CLIENT_MODULES:
        module = sys.modules.get(name)
        if module is not None and getattr(getattr(module, "_http_client", None), _MARK, False):
            setattr(module, "_http_client", None)  # noqa: B010
