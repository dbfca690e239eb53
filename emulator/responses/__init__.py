"""The Responses engine: a create goes in, a Response comes out.

engine.py       `Engine`: `attempt` reads the request and its history, holds it to the rules
                and has the model plan (every 400 comes before a streamed reply starts);
                `complete` has the model play and builds, stores and journals the Response
body.py         the Response object a create returns
usage.py        token counts with OpenAI's tokenizer, the prompt cache (`cached_tokens`)
live.py         a streamed response told while a model that reports its output plays
background.py   `background: true`: queued at once, finished by a task of its own
"""

from ptc_emulator.emulator.responses.background import Background
from ptc_emulator.emulator.responses.body import response_body
from ptc_emulator.emulator.responses.engine import Engine, Prepared, Refused, Runner, Trace
from ptc_emulator.emulator.responses.live import LiveTelling
from ptc_emulator.emulator.responses.usage import PromptCache

__all__ = [
    "Background",
    "Engine",
    "LiveTelling",
    "Prepared",
    "PromptCache",
    "Refused",
    "Runner",
    "Trace",
    "response_body",
]
