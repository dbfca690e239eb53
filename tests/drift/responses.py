"""The drift guard's response side: a body the emulator sent, held to the installed SDK's model of
it. `problems(body, model)` walks both together and names, by path, every required field the body
lacks and every enum (`Literal`) value or union `type` tag it carries that the SDK does not know,
and values of the wrong JSON kind. The SDK's own parsing is lenient and would hide all of these;
pydantic's validation finds them too, but reports a union's failures once per member.

Extra fields are no problem: the SDK's models keep them, as they keep what a newer API sends."""

from __future__ import annotations

import types
import typing
from typing import Any, Literal, Union

from pydantic import BaseModel

__all__ = ["problems"]

_NONE = type(None)


def _strip(ann: Any) -> Any:
    while typing.get_origin(ann) is typing.Annotated:
        ann = typing.get_args(ann)[0]
    return ann


def _arms(ann: Any) -> list[Any]:
    ann = _strip(ann)
    if typing.get_origin(ann) in (Union, types.UnionType):
        return [a for arm in typing.get_args(ann) for a in _arms(arm)]
    return [ann]


def _model(ann: Any) -> type[BaseModel] | None:
    ann = _strip(ann)
    return ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None


def _tags(model: type[BaseModel]) -> tuple[Any, ...]:
    field = model.model_fields.get("type")
    if field is None:
        return ()
    return tuple(
        v for arm in _arms(field.annotation) if typing.get_origin(arm) is Literal for v in typing.get_args(arm)
    )


def problems(value: Any, ann: Any, path: str = "$") -> list[str]:
    """What is wrong with `value` as an instance of `ann` (an SDK model or annotation), by path."""
    ann = _strip(ann)
    if ann in (Any, object):
        return []
    origin = typing.get_origin(ann)
    if origin in (Union, types.UnionType):
        return _union(value, _arms(ann), path)
    if origin is Literal:
        allowed = typing.get_args(ann)
        return (
            []
            if value in allowed
            else [f"{path}: {value!r} is not a value the SDK knows ({', '.join(map(repr, allowed))})"]
        )
    if origin in (list, tuple) or (origin is not None and getattr(origin, "__name__", "") in ("Sequence", "List")):
        if not isinstance(value, list):
            return [f"{path}: {_kind(value)} where the SDK has an array"]
        (item,) = typing.get_args(ann)[:1] or (Any,)
        return [p for n, v in enumerate(value) for p in problems(v, item, f"{path}[{n}]")]
    if origin is dict or (origin is not None and getattr(origin, "__name__", "") in ("Dict", "Mapping")):
        if not isinstance(value, dict):
            return [f"{path}: {_kind(value)} where the SDK has an object"]
        args = typing.get_args(ann)
        return [p for k, v in value.items() for p in problems(v, args[1] if len(args) == 2 else Any, f"{path}.{k}")]
    model = _model(ann)
    if model is not None:
        return _fields(value, model, path)
    return _scalar(value, ann, path)


def _fields(value: Any, model: type[BaseModel], path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: {_kind(value)} where the SDK has {model.__name__}"]
    found: list[str] = []
    for name, field in model.model_fields.items():
        key = field.alias or name
        if key not in value:
            if field.is_required():
                found.append(f"{path}.{key}: missing (required by the SDK's {model.__name__})")
            continue
        found += problems(value[key], field.annotation, f"{path}.{key}")
    return found


def _union(value: Any, arms: list[Any], path: str) -> list[str]:
    if value is None:
        return [] if _NONE in arms else [f"{path}: null where the SDK allows none"]
    arms = [a for a in arms if a is not _NONE]
    models = [m for m in map(_model, arms) if m is not None]
    tagged = [m for m in models if _tags(m)]
    if isinstance(value, dict) and "type" in value and tagged and len(tagged) == len(models):
        known = [m for m in tagged if value["type"] in _tags(m)]
        if not known:
            every = sorted({str(t) for m in tagged for t in _tags(m)})
            return [f"{path}.type: {value['type']!r} is not a type the SDK knows here ({', '.join(every)})"]
        arms = [a for a in arms if _model(a) is None or _model(a) in known]
    tried = [problems(value, arm, path) for arm in arms]
    return min(tried, key=len) if tried else []


def _scalar(value: Any, ann: Any, path: str) -> list[str]:
    if ann is _NONE:
        return [] if value is None else [f"{path}: {_kind(value)} where the SDK has null"]
    if ann is bool:
        ok = isinstance(value, bool)
    elif ann is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif ann is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    elif ann is str:
        ok = isinstance(value, str)
    else:
        return []  # an annotation of no JSON kind of its own (a TypeVar, a callable): not checked
    return [] if ok else [f"{path}: {_kind(value)} where the SDK has {ann.__name__}"]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
    }.get(type(value), type(value).__name__)
