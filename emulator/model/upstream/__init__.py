"""The upstream model: a real model behind an OpenAI-compatible endpoint (Chat Completions or
Responses) as the author of programs and messages, for the requests no scenario matches
(docs/any-model.md). `model.py` plays; `teach.py` and `prompt.md` say what the model is told;
`typescript.py` declares the program's tools; `transcript.py` rebuilds what it reads from the
items; `client.py` sends each turn over the protocol the upstream speaks and keeps their registry
(`protocol.py` says what a protocol does; `chat.py` and `responses.py` are the two)."""

from ptc_emulator.emulator.model.upstream.client import (
    DEFAULT_PROTOCOL,
    PROTOCOLS,
    UpstreamClient,
    UpstreamConfig,
    UpstreamProtocol,
    protocol_named,
    register,
)
from ptc_emulator.emulator.model.upstream.model import UpstreamModel

__all__ = [
    "DEFAULT_PROTOCOL",
    "PROTOCOLS",
    "UpstreamClient",
    "UpstreamConfig",
    "UpstreamModel",
    "UpstreamProtocol",
    "protocol_named",
    "register",
]
