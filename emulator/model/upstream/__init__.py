"""The upstream model: a real model behind an OpenAI-compatible endpoint (Chat Completions or
Responses) as the author of programs and messages, for the requests no scenario matches
(docs/any-model.md). `model.py` plays; `teach.py` and `prompt.md` say what the model is told;
`typescript.py` declares the program's tools; `transcript.py` rebuilds what it reads from the
items; `client.py` speaks the two protocols."""

from ptc_emulator.emulator.model.upstream.client import UpstreamClient, UpstreamConfig
from ptc_emulator.emulator.model.upstream.model import UpstreamModel

__all__ = ["UpstreamClient", "UpstreamConfig", "UpstreamModel"]
