"""`python -m ptc_emulator serve` as a subprocess: for tests that restart or kill the server, and for
the benchmarks.

    with ServerProcess(tmp_path, secret="s") as server:     # started; stopped at the end
        client = openai.OpenAI(base_url=server.base_url, api_key="sk-local")
        ...
        server.kill9()      # SIGKILL: no shutdown code runs
        server.start()      # the same port, data directory and secret
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from ptc_emulator.names import API_KEY_ENV

__all__ = ["ServerProcess", "free_port"]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _clean_env(env: dict[str, str] | None) -> dict[str, str]:
    # The suite's live-cache switch passes through (api/settings.py); nothing else of the caller's.
    base = {k: v for k, v in os.environ.items() if not k.startswith("PTC_EMULATOR_") or k == "PTC_EMULATOR_LIVE_CACHE"}
    return {**base, **(env or {})}


def _parent(pid: int) -> int | None:
    """The parent of process `pid`, or None if it has gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


class ServerProcess:
    """`python -m ptc_emulator serve ...` as a subprocess on a fixed 127.0.0.1 port, restartable.

    Its stdout and stderr (uvicorn's and the app's logs) go to `log_path`, appended across
    restarts. `kill9()` kills the server with SIGKILL and waits for its sandbox workers, which
    exit by themselves when their pipe to the server closes."""

    def __init__(
        self,
        data_dir: Path,
        *,
        store: str = "sqlite",
        secret: str | None = "hardening-secret",
        api_key: str | None = None,
        workers: int = 1,
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self._started = False
        """Whether this server has started once (a restart keeps its port)."""
        self.api_key = api_key
        command = [sys.executable, "-m", "ptc_emulator", "serve", "--port", str(self.port)]
        command += ["--data-dir", str(data_dir), "--store", store, "--workers", str(workers)]
        command += ["--log-level", "info"]  # no demos unless `args` has --demo
        self.command = [*command, *args]
        # Secrets by the environment, never on the command line (any local user can read that).
        secrets = {"PTC_EMULATOR_SECRET": secret} if secret is not None else {}
        if api_key is not None:
            secrets[API_KEY_ENV] = api_key
        self.env = {**_clean_env(env), **secrets}
        self.log_path = log_path or data_dir.parent / f"server-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.worker_pids: list[int] = []

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        return f"{self.root}/v1"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def start(self, timeout: float = 60.0) -> ServerProcess:
        assert self.proc is None or self.proc.poll() is not None, "already running"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=self.env
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                if not self._started and "Address already in use" in self.log()[-300:]:
                    # Taken since it was chosen (by another test's server): a first start takes
                    # another; a restart keeps its port, which its clients know.
                    self.port = free_port()
                    self.command[self.command.index("--port") + 1] = str(self.port)
                    return self.start(max(0.0, deadline - time.monotonic()))
                raise RuntimeError(f"the server exited with {self.proc.returncode}:\n{self.log()[-3000:]}")
            with contextlib.suppress(httpx.TransportError):
                reply = httpx.get(f"{self.root}/_emulator/health", headers=self.headers, timeout=30)
                if reply.status_code == 200 and self._ours(reply.json()["workers"]):
                    self.worker_pids = list(reply.json()["workers"])
                    self._started = True
                    return self
            if time.monotonic() > deadline:
                self.kill9()
                raise RuntimeError(f"the server did not start:\n{self.log()[-3000:]}")
            time.sleep(0.05)

    def _ours(self, workers: list[int]) -> bool:
        """Whether the server answering on the port is this process: its sandbox workers are this
        process's children. The port was free when it was chosen, but another test's server may
        have taken it since; that one's health must not pass for this one's start (its answers
        would then be another server's)."""
        assert self.proc is not None
        return all(_parent(pid) in (self.proc.pid, None) for pid in workers)

    def health(self) -> dict[str, Any]:
        reply = httpx.get(f"{self.root}/_emulator/health", headers=self.headers, timeout=10)
        reply.raise_for_status()
        self.worker_pids = list(reply.json()["workers"])
        return reply.json()  # type: ignore[no-any-return]

    def kill9(self) -> None:
        """SIGKILL the server and its workers, as a crash of the machine or an OOM kill of the group
        would: no shutdown code runs anywhere. (A worker left alone exits when it sees its pipe close,
        but one spinning in a program sees that only at the program's deadline.)"""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self._reap_workers(timeout=0)

    def stop(self) -> None:
        """A graceful stop (SIGTERM, as Ctrl-C would), then SIGKILL if it hangs."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._reap_workers()

    def _reap_workers(self, timeout: float = 15.0) -> None:
        # A worker busy with a program finishes it (bounded by the program's deadline) first.
        deadline = time.monotonic() + timeout
        while self.worker_pids and time.monotonic() < deadline:
            self.worker_pids = [pid for pid in self.worker_pids if not _gone(pid)]
            time.sleep(0.05)
        for pid in self.worker_pids:  # still there: ours to end, by pid
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.worker_pids = []

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
