"""`GET /v1/models` and `GET /v1/models/{model}`, in the SDK's `Model` shape.

The emulator answers for any model name: the scripted model plays inline programs and scenarios
whatever `model` a request names (a scenario may match some by `match.model`), and a model
upstream is asked under the request's name or its own. So a retrieve answers every id, and the
list names the models the emulator is told of by name: the model upstream's (`--model-upstream-
model`) and each plain `match.model` of the scenarios the caller's scope can match. `created`
is when the server started; `owned_by` is `ptc-emulator`. Frameworks that probe the endpoint
before they start (and the SDK's `models.list()` / `models.retrieve()`) get what they parse.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from ptc_emulator.api.context import scope_of

__all__ = ["OWNER", "router"]

router = APIRouter(prefix="/v1/models")

OWNER = "ptc-emulator"


def _model(model_id: str, request: Request) -> dict[str, Any]:
    return {"id": model_id, "object": "model", "created": request.app.state.emulator.started_at, "owned_by": OWNER}


@router.get("")
async def list_models(request: Request) -> dict[str, Any]:
    state = request.app.state.emulator
    named = set(state.scenarios.models(scope_of(request.headers, None)))
    if state.settings.model_upstream is not None and state.settings.model_upstream_model is not None:
        named.add(state.settings.model_upstream_model)
    return {"object": "list", "data": [_model(name, request) for name in sorted(named)]}


@router.get("/{model:path}")
async def retrieve_model(model: str, request: Request) -> dict[str, Any]:
    return _model(model, request)
