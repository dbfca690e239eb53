"""ptc-emulator: a local stand-in for OpenAI's Responses API with Programmatic Tool Calling.

The one import root the package installs. Its subpackages live in the repository's top-level
folders, mapped here by `package-dir` in pyproject.toml:

    ptc_emulator.api       <- api/        transport: HTTP, SSE, WebSocket, CLI, pytest plugin
    ptc_emulator.emulator  <- emulator/   engine: conversation rules, scripted model, store
    ptc_emulator.sandbox   <- sandbox/    V8 worker processes that run the programs
    ptc_emulator.fixtures  <- fixtures/   the bundled scenarios (package data)
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
"""The one place the version is spelt: pyproject.toml reads it (`[tool.setuptools.dynamic]`), and
so do `ptc-emulator --version` and the OpenAPI schema. A literal, so reading it costs nothing (the
package's metadata would cost every process that imports the package, each sandbox worker too,
about 60 ms)."""
