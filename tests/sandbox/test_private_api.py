"""The sandbox drives mini-racer through private names (its cheapest eval path, see
`sandbox/_v8.py::_fast_eval`). The version is pinned; this test fails, naming what moved, if an
upgrade changes any of them. It runs V8 in a subprocess: never in the pytest process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib import metadata

PROBE = textwrap.dedent(
    """
    import queue
    import time
    from py_mini_racer import MiniRacer, JSTimeoutException
    from py_mini_racer._context import _UNCANCELABLE_TASK_CALLBACK_ID
    from ptc_emulator.sandbox import _v8

    _v8.init()
    mr = MiniRacer()
    ctx = mr._ctx
    for name in ("_dll", "_ctx", "_python_to_value_handle", "_value_handle_to_python",
                 "_non_cancelable_mr_task_results_queue", "_wrap_raw_handle", "set_object_item"):
        assert hasattr(ctx, name), f"mini-racer's Context has no {name}"
    assert isinstance(ctx._non_cancelable_mr_task_results_queue, queue.Queue)
    assert _UNCANCELABLE_TASK_CALLBACK_ID == 0
    for fn in ("mr_eval", "mr_cancel_task", "mr_make_js_callback"):
        assert hasattr(ctx._dll, fn), f"libmini_racer has no {fn}"
    assert _v8._fast_eval(mr, "6 * 7", 5) == 42
    assert _v8._fast_eval(mr, "'a' + 'b'", 5) == "ab"
    try:
        _v8._fast_eval(mr, "while (true) {}", 0.2)
    except JSTimeoutException:
        pass
    else:
        raise AssertionError("a spinning eval did not time out")
    mr.close()
    # `_racer()` builds a MiniRacer by hand: one shared loop, the context maker closed by close().
    import inspect
    from py_mini_racer import _mini_racer
    from py_mini_racer._set_timeout import INSTALL_SET_TIMEOUT
    assert list(inspect.signature(_mini_racer._make_context).parameters) == ["event_loop"]
    assert "var setTimeout" in INSTALL_SET_TIMEOUT, "mini-racer's timer script changed"
    import dataclasses
    field_names = [f.name for f in dataclasses.fields(type(ctx))]
    assert "_non_cancelable_mr_task_results_queue" in field_names, "the result queue is no longer a field"
    racer = _v8._racer()
    assert hasattr(racer, "_own_context_maker") and racer._ctx is not None
    assert isinstance(racer._ctx._non_cancelable_mr_task_results_queue, queue.SimpleQueue)
    assert _v8._fast_eval(racer, "typeof setTimeout", 5) == "undefined"  # not installed by _racer
    racer.close()
    assert racer._ctx is None and racer._own_context_maker is None
    context = _v8.Context(64 * 2**20)  # installs the doorbell, then rings it from JS
    context.control("pump()", time.monotonic() + 5)
    context.wait_ring(time.monotonic() + 5)
    context.close()
    print("ok")
    """
)


def test_mini_racer_is_the_pinned_version() -> None:
    assert metadata.version("mini-racer") == "0.14.1", "re-check sandbox/_v8.py::_fast_eval, then update this pin"


def test_the_private_eval_path_still_exists_and_behaves() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
