"""The drift guard's request side: what the installed SDK's request-params types
(`openai/types/**/*_params.py`, TypedDicts) let a client send, against what the emulator accepts.

`sdk_paths(params)` walks a params TypedDict into the paths a client can fill: its fields, nested
TypedDicts, list items, a union's variants by their `type` tag, and the values of a closed
`Literal`. `refused_by_schema(model, path)` asks the emulator's own request model (the pydantic
model FastAPI validates the route's body with) whether it takes that path, by validating a body
that holds only it and reading the errors: an unknown field is `extra_forbidden` there, an unknown
variant a tag error, an unknown value a literal error. Nothing else of the body needs to be valid,
so any path is probed alone. A query-only route's accepted names are its FastAPI parameters.

`unaccepted(route, model)` is what the guard reports: every path the emulator's schema refuses
that is not on the refusal list (`refusals.REFUSED`) or under a refused path.
"""

from __future__ import annotations

import dataclasses
import importlib
import sys
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, NotRequired, Required, Union

from pydantic import BaseModel, ValidationError
from typing_extensions import is_typeddict

from ptc_emulator.api.errors import _param  # the API's rendering of a pydantic location as a param

__all__ = ["Path", "Route", "render", "refused_by_schema", "sdk_paths", "unaccepted"]

MAX_DEPTH = 8
"""Steps deep a path goes (the SDK's filters nest themselves)."""


@dataclasses.dataclass(frozen=True)
class Step:
    kind: Literal["key", "item", "tag", "value"]
    name: Any = None


Path = tuple[Step, ...]


def render(path: Path) -> str:
    """`input[type=configuration_update].reasoning.effort`, `include[]='reasoning.encrypted_content'`."""
    out = ""
    for step in path:
        if step.kind == "key":
            out += f".{step.name}" if out else str(step.name)
        elif step.kind == "item":
            out += "[]"
        elif step.kind == "tag":
            out += f"[type={step.name}]"
        else:
            out += f"={step.name!r}"
    return out


@dataclasses.dataclass(frozen=True)
class Route:
    """A route the emulator serves, and the SDK type of what a client sends it."""

    name: str
    """`POST /v1/responses`: how the refusal list and the reports name it."""
    params: str
    """`module:TypedDict` in the installed SDK."""
    model: str | None = None
    """`module:Model` of the emulator's body model; None for a route that takes a query only."""
    reads: tuple[str, ...] = ()
    """Query names the route reads itself rather than through a declared parameter
    (`metadata[key]=value`)."""

    def sdk_type(self) -> Any | None:
        """The params TypedDict, or None when the installed SDK has no such module (an older one)."""
        module, _, name = self.params.partition(":")
        try:
            return getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            return None

    def body_model(self) -> type[BaseModel] | None:
        if self.model is None:
            return None
        module, _, name = self.model.partition(":")
        model: type[BaseModel] = getattr(importlib.import_module(module), name)
        return model


# ---- the SDK's side -------------------------------------------------------------------------------


def _hints(td: Any) -> dict[str, Any]:
    module = sys.modules.get(td.__module__)
    return typing.get_type_hints(td, globalns=vars(module) if module else None, include_extras=True)


def _strip(ann: Any) -> Any:
    """`Required[X]`, `NotRequired[X]`, `Annotated[X, ...]` -> X."""
    while True:
        origin = typing.get_origin(ann)
        if origin in (Required, NotRequired, typing.Annotated) or (
            origin is not None and getattr(origin, "__name__", "") in ("Required", "NotRequired")
        ):
            ann = typing.get_args(ann)[0]
        else:
            return ann


def _arms(ann: Any) -> list[Any]:
    ann = _strip(ann)
    if typing.get_origin(ann) in (Union, types.UnionType):
        return [a for arm in typing.get_args(ann) for a in _arms(arm)]
    return [ann]


_SEQUENCES = (list, Sequence, Iterable, typing.List, typing.Sequence, typing.Iterable)  # noqa: UP006


def _is_sequence(ann: Any) -> bool:
    origin = typing.get_origin(ann)
    if origin in (list, tuple) or origin in (Sequence, Iterable):
        return True
    return getattr(ann, "__name__", "") == "SequenceNotStr" or getattr(origin, "__name__", "") == "SequenceNotStr"


def _tags(td: Any) -> list[str]:
    ann = _hints(td).get("type")
    if ann is None:
        return []
    return [v for arm in _arms(ann) if typing.get_origin(arm) is Literal for v in typing.get_args(arm)]


def sdk_paths(params: Any) -> list[Path]:
    """Every path a client may fill in `params` (a TypedDict), parents before children."""
    found: list[Path] = []
    for arm in _arms(params):  # a union of params (streaming or not): the paths of each
        _walk_typeddict(arm, (), found, frozenset())
    return list(dict.fromkeys(found))


def _walk_typeddict(td: Any, at: Path, found: list[Path], seen: frozenset[Any]) -> None:
    if td in seen or len(at) >= MAX_DEPTH:
        return
    for name, ann in _hints(td).items():
        path = (*at, Step("key", name))
        found.append(path)
        _walk(ann, path, found, seen | {td})


def _walk(ann: Any, at: Path, found: list[Path], seen: frozenset[Any]) -> None:
    if len(at) >= MAX_DEPTH:
        return
    arms = _arms(ann)
    if any(a is str for a in arms):  # any string: the Literal values beside it are hints
        arms = [a for a in arms if typing.get_origin(a) is not Literal]
    variants: dict[str, list[Any]] = {}
    for arm in arms:
        if is_typeddict(arm):
            tags = _tags(arm)
            if tags and sum(is_typeddict(a) for a in arms) > 1:
                for tag in tags:
                    variants.setdefault(tag, []).append(arm)
            else:
                _walk_typeddict(arm, at, found, seen)
        elif typing.get_origin(arm) is Literal:
            for value in typing.get_args(arm):
                if isinstance(value, str) and at and at[-1].kind != "tag":
                    found.append((*at, Step("value", value)))
        elif _is_sequence(arm):
            args = typing.get_args(arm)
            if args:
                _walk(args[0], (*at, Step("item")), found, seen)
    for tag, tds in variants.items():
        path = (*at, Step("tag", tag))
        found.append(path)
        for td in tds:
            _walk_typeddict(td, path, found, seen)


# ---- the emulator's side --------------------------------------------------------------------------


PROBE = None
"""What a probe puts at the end of its path: the value does not matter to the questions asked
(an unknown key, variant or value is one whatever it holds), and null is JSON."""


def _body(path: Path) -> Any:
    """A body holding only `path` (a tag's variant with its `type`)."""

    def build(steps: Path) -> Any:
        if not steps:
            return PROBE
        step, rest = steps[0], steps[1:]
        if step.kind == "key":
            return {step.name: build(rest)}
        if step.kind == "item":
            return [build(rest)]
        if step.kind == "value":
            return step.name
        inner = build(rest)
        return {"type": step.name, **(inner if isinstance(inner, dict) else {})}

    return build(path)


def _param_of(path: Path) -> str:
    """The API param the path's last step is at (`input[0].reasoning`), as errors name it."""
    out = ""
    for step in path:
        if step.kind == "key":
            out += f".{step.name}" if out else str(step.name)
        elif step.kind == "item":
            out += "[0]"
    return out


def refused_by_schema(model: type[BaseModel], path: Path) -> bool:
    """Whether the emulator's body model refuses what `path` names (see the module docstring)."""
    body = _body(path)
    try:
        model.model_validate(body)
    except ValidationError as e:
        errors = e.errors()
    else:
        return False
    where = _param_of(path)
    last = path[-1]
    for error in errors:
        kind = error["type"]
        at = _param(error["loc"], body, missing_key=kind == "missing")
        if last.kind == "key" and kind == "extra_forbidden" and at == where:
            return True
        if last.kind == "tag":
            if kind in ("union_tag_invalid", "union_tag_not_found") and at == where:
                return True
            tag_at = f"{where}.type" if where else "type"
            if kind == "literal_error" and at == tag_at:
                return True
        if last.kind == "value" and kind in ("literal_error", "enum") and at == where:
            return True
    return False


def unaccepted(
    route: Route,
    refused: Mapping[tuple[str, str], Any],
    *,
    params: Iterable[str] = (),
    model: type[BaseModel] | None = None,
) -> list[str]:
    """`route`'s SDK paths that the emulator neither accepts nor lists as refused (nor any parent of
    them). `params`: the names of the route's declared query, header and path parameters (the
    SDK sends some fields there, not in the body); `model`: the body model to ask (the route's own
    by default: a test passes a changed one)."""
    sdk = route.sdk_type()
    if sdk is None:
        return []
    model = model if model is not None else route.body_model()
    elsewhere = {_name(p) for p in (*params, *route.reads)}
    listed = {path for (name, path) in refused if name == route.name}
    missing: list[str] = []
    for path in sdk_paths(sdk):
        rendered = render(path)
        if _under(rendered, listed) or _under(rendered, missing):
            continue
        if _name(path[0].name) in elsewhere:
            continue  # a parameter of the query, a header or the path, which the route declares
        if model is None:  # a route without a body: every field is a parameter
            if len(path) == 1:
                missing.append(rendered)
            continue
        if refused_by_schema(model, path):
            missing.append(rendered)
    return missing


def _name(name: str) -> str:
    """`Idempotency-Key` and `idempotency_key` alike."""
    return name.lower().replace("-", "_")


def _under(rendered: str, parents: Iterable[str]) -> bool:
    return any(rendered == p or rendered.startswith((f"{p}.", f"{p}[", f"{p}=")) for p in parents)


def every_path(routes: Iterable[Route]) -> Iterator[tuple[str, str]]:
    """(route, path) for every path of every route whose SDK type exists: what a refusal may name."""
    for route in routes:
        params = route.sdk_type()
        if params is not None:
            yield from ((route.name, render(p)) for p in sdk_paths(params))
