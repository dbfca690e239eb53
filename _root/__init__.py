"""ptc-emulator: a local stand-in for OpenAI's Responses API with Programmatic Tool Calling.

The one import root the package installs. Its subpackages live in the repository's top-level
folders, mapped here by `package-dir` in pyproject.toml:

    ptc_emulator.api       <- api/        transport: HTTP, SSE, WebSocket, CLI, pytest plugin
    ptc_emulator.emulator  <- emulator/   engine: conversation rules, scripted model, store
    ptc_emulator.sandbox   <- sandbox/    V8 worker processes that run the programs
    ptc_emulator.fixtures  <- fixtures/   the bundled scenarios (package data)
"""

__all__ = ["__version__"]


def __getattr__(name: str) -> str:
    # Looked up when asked for: importlib.metadata costs every process that imports this package
    # (each sandbox worker does) about 60 ms, and only `ptc-emulator --version` needs it.
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("ptc-emulator")
    except PackageNotFoundError:  # pragma: no cover - running from a tree that was never installed
        return "0+unknown"
