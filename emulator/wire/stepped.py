"""A long list in a request body validated a step at a time.

Validating a list is one call into pydantic's core, which holds the interpreter until it returns:
a worker thread validating 100,000 items keeps the event loop waiting for as long (issue 38).
`stepped`, a list field's wrap validator, validates a list of more than `STEP` items `STEP` at a
time; between two steps the interpreter may run another thread, so a worker validating a long
body lets the event loop serve other clients.

An invalid list costs no more: of its items' errors, only the first item whose error is deepest
(the one `api.errors.validation_error` words, as the hosted API names one error) is raised, at its
place in the list as sent, with the list's own errors (a union's other branches, `input`'s string).
The other items' errors would be worded by no one: building 100,000 of them took seconds.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError, ValidatorFunctionWrapHandler
from pydantic_core import InitErrorDetails

__all__ = ["STEP", "stepped"]

STEP = 200
"""Items validated at a time: some milliseconds of work for the largest items a body may hold."""


def stepped(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """`handler(value)` (a list field's validation), a step at a time when `value` is a long list."""
    if not isinstance(value, list) or len(value) <= STEP:
        return handler(value)
    done: list[Any] = []
    worst: tuple[int, int] | None = None  # the deepest item error's depth, and its item's place
    for start in range(0, len(value), STEP):
        try:
            part = handler(value[start : start + STEP])
        except ValidationError as e:
            found = _deepest(e)
            if found is None:  # an error of no one item: the list as a whole decides
                return handler(value)
            depth, at = found
            if worst is None or depth > worst[0]:
                worst = (depth, start + at)
            continue
        if worst is None:
            done.extend(part)
    if worst is None:
        return done
    at = worst[1]
    try:
        handler([value[at]])
    except ValidationError as e:
        raise _placed(e, at, value) from None
    return handler(value)  # (not reached: the item failed in its step)


def _index(loc: tuple[Any, ...]) -> int | None:
    """Where in `loc` the list's item index is (the first integer: union branches are strings)."""
    return next((n for n, part in enumerate(loc) if isinstance(part, int)), None)


def _deepest(error: ValidationError) -> tuple[int, int] | None:
    """The depth of the first deepest error of one item, and that item's place in the step."""
    best: tuple[int, int] | None = None
    for e in error.errors(include_url=False, include_context=False, include_input=False):
        loc = tuple(e["loc"])
        at = _index(loc)
        if at is not None and (best is None or len(loc) > best[0]):
            best = (len(loc), int(loc[at]))
    return best


def _placed(error: ValidationError, at: int, value: list[Any]) -> ValidationError:
    """The errors of `[value[at]]` as those of `value`: the item at its place, the list as given."""
    details: list[InitErrorDetails] = []
    for e in error.errors(include_url=False):
        loc = tuple(e["loc"])
        n = _index(loc)
        if n is None:
            detail = InitErrorDetails(type=e["type"], loc=loc, input=value)
        else:
            detail = InitErrorDetails(type=e["type"], loc=(*loc[:n], at, *loc[n + 1 :]), input=e["input"])
        if "ctx" in e:
            detail["ctx"] = e["ctx"]
        details.append(detail)
    return ValidationError.from_exception_data(error.title, details)
