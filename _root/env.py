"""The environment that puts agent code in a test's scope: for code that builds its own client.

Agent code under test seldom takes a client from the test. It builds `openai.OpenAI()` (which
reads `OPENAI_BASE_URL` and `OPENAI_API_KEY`), uses the Agents SDK's default client (the same
variables), or runs as a subprocess or a Node program. A scope in the base URL
(`http://127.0.0.1:PORT/scopes/<scope>/v1`) reaches all of them with no header code:

    def test_my_agent(ptc_emulator, monkeypatch):
        ptc_emulator.add_scenario(...)
        ptc_emulator.use_env(monkeypatch)          # this test's OPENAI_* variables, undone after it
        assert my_agent.run("...") == "..."         # OpenAI() inside sees only this test's scenarios

    subprocess.run(["python", "agent.py"], env={**os.environ, **ptc_emulator.env})

Imports nothing but the standard library (the pytest plugin reads it).
"""

from __future__ import annotations

from typing import Any

__all__ = ["BASE_URL_ENV", "KEY_ENV", "TRACING_OFF_ENV", "apply", "environ", "scoped_url", "server_url"]

BASE_URL_ENV = "OPENAI_BASE_URL"
KEY_ENV = "OPENAI_API_KEY"
TRACING_OFF_ENV = "OPENAI_AGENTS_DISABLE_TRACING"
"""The Agents SDK exports traces to OpenAI's servers unless this says 1: nothing may leave the machine."""

_SCOPES = "/scopes/"


def server_url(base_url: str) -> str:
    """The server's own `/v1` URL for `base_url`, scoped or not (`.../scopes/<scope>/v1` -> `.../v1`)."""
    url = base_url.rstrip("/")
    head, found, tail = url.rpartition(_SCOPES)
    if found and "/" in tail:
        url = head + "/" + tail.partition("/")[2]
    return url


def scoped_url(base_url: str, scope: str) -> str:
    """The `/v1` URL that puts every request in `scope`: `http://HOST:PORT/scopes/<scope>/v1`."""
    url = server_url(base_url)
    root, v1 = (url[: -len("/v1")], "/v1") if url.endswith("/v1") else (url, "")
    return f"{root}{_SCOPES}{scope}{v1}"


def environ(base_url: str, api_key: str) -> dict[str, str]:
    """The variables an OpenAI SDK (Python or Node) and the Agents SDK read, for `base_url`."""
    return {BASE_URL_ENV: base_url, KEY_ENV: api_key, TRACING_OFF_ENV: "1"}


def apply(monkeypatch: Any, base_url: str, api_key: str) -> dict[str, str]:
    """Set `environ(...)` with pytest's `monkeypatch` (undone when the test ends); returns it."""
    values = environ(base_url, api_key)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    return values
