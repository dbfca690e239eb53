"""The routes, one module per surface; routes translate, the engine decides.

    responses.py       `/v1/responses` over HTTP (`streaming.py`: with `stream: true`, and a stored
                       response streamed again)
    websocket.py       WebSocket mode (`steering.py`: `response.steer`)
    conversations.py   `/v1/conversations`
    agents.py          the beta Agents API
    admin.py           `/_emulator/`: scenarios at run time, the journal, reset, health

Each module's `router` is included by `app.create_app`.
"""

__all__ = ["admin", "agents", "conversations", "responses", "steering", "streaming", "websocket"]
