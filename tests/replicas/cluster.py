"""A throwaway PostgreSQL cluster for the tests: `initdb` in a temporary folder, started on a free
loopback port with its unix socket in that folder, stopped and removed at the end.

The server refuses to run as root, so as root it runs as the `postgres` user (`runuser`); as
anyone else it runs as that user. `Cluster.find()` says why none can start (no server binaries;
root without a `postgres` user), for the tests to skip with that reason.

`fsync`, `synchronous_commit` and `full_page_writes` are off: a test cluster only, never a
default of anything a user runs.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg

from ptc_emulator.testing.process import free_port

__all__ = ["Cluster", "why_not"]

_FAST = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"


def _bindir() -> Path | None:
    found = shutil.which("pg_config")
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False).stdout.strip()
        if out and (Path(out) / "initdb").is_file():
            return Path(out)
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(candidate) / "initdb").is_file():
            return Path(candidate)
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def why_not() -> str | None:
    """Why no cluster can start here (None: one can)."""
    if _bindir() is None:
        return "no PostgreSQL server here (initdb not found; `make test` installs it as root with apt-get)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, and there is no `postgres` user to run the server as"
    return None


class Cluster:
    """One started cluster; `database()` makes a fresh empty database on it."""

    def __init__(self) -> None:
        reason = why_not()
        if reason is not None:
            raise RuntimeError(reason)
        self.bin = _bindir() or Path()
        self.root = Path(tempfile.mkdtemp(prefix="ptc-pg-"))
        self.data = self.root / "data"
        self.port = 0
        self._names = itertools.count(1)
        self._as: list[str] = []
        if os.geteuid() == 0:
            self._as = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.root, "postgres")
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"
        )
        self._start()

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([*self._as, str(self.bin / tool), *args], check=True, capture_output=True, cwd=self.root)

    def _start(self) -> None:
        for _ in range(5):  # another process may take the free port first: try another
            self.port = free_port()
            options = f"-h 127.0.0.1 -p {self.port} -k {self.root} {_FAST}"
            try:
                self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "60", "-o", options,
                          "start")  # fmt: skip
                return
            except subprocess.CalledProcessError:
                continue
        raise RuntimeError(f"PostgreSQL did not start: {(self.root / 'log').read_text(errors='replace')[-2000:]}")

    @property
    def admin_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url(self, name: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def database(self) -> str:
        """A new empty database; its URL."""
        name = f"ptc_{os.getpid()}_{next(self._names)}"
        with psycopg.connect(self.admin_url, autocommit=True) as db:
            db.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def halt(self) -> None:
        """Stop the server (the database is away), keeping its files and port for `resume`."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def resume(self) -> None:
        """Start the server again after `halt`, on the same port."""
        options = f"-h 127.0.0.1 -p {self.port} -k {self.root} {_FAST}"
        self._run(
            "pg_ctl", "-D", str(self.data), "-l", str(self.root / "log"), "-w", "-t", "60", "-o", options, "start"
        )

    def _processes(self) -> list[int]:
        """The server's processes: the postmaster (its pid file's first line) and its children."""
        main = int((self.data / "postmaster.pid").read_text().split()[0])
        found = [main]
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                    if int(fields[1]) == main:
                        found.append(int(entry.name))
        return found

    def freeze(self) -> None:
        """Stop the server's processes (SIGSTOP): the database accepts connections (the kernel
        does) and answers nothing, as a frozen host does. `thaw` lets them go on."""
        for pid in self._processes():
            os.kill(pid, signal.SIGSTOP)

    def thaw(self) -> None:
        for pid in self._processes():
            os.kill(pid, signal.SIGCONT)

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    @classmethod
    @contextlib.contextmanager
    def started(cls) -> Iterator[Cluster]:
        cluster = cls()
        try:
            yield cluster
        finally:
            cluster.stop()
