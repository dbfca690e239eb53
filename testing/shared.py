"""One emulator for every pytest-xdist worker of a run (`--ptc-emulator-shared`).

Each worker starting its own server costs each its V8 pool and its share of the CPUs; on a small
machine that made `-n 2` slower than a serial run (docs/pytest.md has the figures). With this, the
first worker to ask starts the server as a process of its own, with its settings, and every worker
uses it; the per-test scopes keep the tests apart. The server watches the xdist controller's
process and stops when the run ends, whichever worker finished last (or crashed).

    python -m ptc_emulator.testing.shared DIR CONTROLLER_PID    # what the first worker runs
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "shared_url"]

_URL, _SETTINGS, _LOCK, _LOG = "server.url", "settings.pickle", "server.lock", "server.log"
_STARTED: list[subprocess.Popen[bytes]] = []
"""The server this worker started: it outlives the worker's use of it, and a dropped handle to a
running process is a ResourceWarning."""


def shared_url(directory: Path, settings: Any, controller: int, timeout: float = 120.0) -> str:
    """The run's shared server's `/v1` URL, started here by the first worker to ask."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / _LOCK, "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # the others wait here while the first one starts it
        try:
            url = directory / _URL
            if url.exists():
                return url.read_text(encoding="utf-8")
            (directory / _SETTINGS).write_bytes(pickle.dumps(settings))
            with open(directory / _LOG, "ab") as log:
                process = subprocess.Popen(
                    [sys.executable, "-m", "ptc_emulator.testing.shared", str(directory), str(controller)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # not killed with the worker that started it
                )
            _STARTED.append(process)
            deadline = time.monotonic() + timeout
            while not url.exists():
                if process.poll() is not None or time.monotonic() > deadline:
                    text = (directory / _LOG).read_text(encoding="utf-8", errors="replace")
                    raise RuntimeError(f"the shared ptc-emulator server did not start:\n{text[-3000:]}")
                time.sleep(0.05)
            return url.read_text(encoding="utf-8")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def main(argv: list[str] | None = None) -> None:
    from ptc_emulator.testing.server import EmulatorServer

    directory, controller = Path((argv or sys.argv[1:])[0]), int((argv or sys.argv[1:])[1])
    settings = pickle.loads((directory / _SETTINGS).read_bytes())
    server = EmulatorServer(settings).start()
    temporary = directory / (_URL + ".tmp")
    temporary.write_text(server.base_url, encoding="utf-8")
    temporary.replace(directory / _URL)  # whole, or not there
    try:
        while _alive(controller):
            time.sleep(0.5)
    finally:
        with contextlib.suppress(OSError):
            (directory / _URL).unlink()
        server.stop()


if __name__ == "__main__":
    main()
