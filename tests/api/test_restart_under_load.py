"""Restarts under load: `kill -9` the server while clients are in the middle of their programs.

The server is `python -m ptc_emulator serve` in a subprocess. After a SIGKILL it is started again
with the same data directory, port and secret, and every client must finish its program with
the right answer: `store: false` clients by replaying their items (the program's state is in
the items, its fingerprint and the secret), `store: true` clients by continuing from the last
response id (the state is in SQLite). Nothing stored may be lost or duplicated, and the SQLite
file must be consistent (WAL mode, `PRAGMA integrity_check` = ok).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from ptc_emulator.testing.process import ServerProcess
from tests.api.api_support import ProgramRun, assert_envelope, drive, expected_total, pausing_program

SECRET = "restart-secret-0123456789"
PAUSES = 4


@contextmanager
def sdk_clients(server: ServerProcess, count: int) -> Iterator[list[openai.OpenAI]]:
    """One synchronous SDK client per conversation, without retries: a failure must show."""
    with ExitStack() as stack:
        yield [
            stack.enter_context(openai.OpenAI(base_url=server.base_url, api_key="sk", max_retries=0, timeout=60))
            for _ in range(count)
        ]


def make_runs(count: int) -> list[tuple[ProgramRun, str]]:
    """Half replay everything (`store: false`), half continue by `previous_response_id`."""
    return [
        (ProgramRun(pausing_program(100 * n, PAUSES), store=n % 2 == 1), expected_total(100 * n, PAUSES))
        for n in range(count)
    ]


def database(server: ServerProcess) -> sqlite3.Connection:
    return sqlite3.connect(server.data_dir / "responses.sqlite3")


def check_database(server: ServerProcess) -> set[str]:
    """The file is a consistent WAL database; the ids of the responses it holds."""
    with database(server) as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        ids = [row[0] for row in db.execute("SELECT id FROM responses")]
        orphans = db.execute("SELECT COUNT(*) FROM items WHERE response_id NOT IN (SELECT id FROM responses)")
        assert orphans.fetchone() == (0,)
    db.close()
    assert len(ids) == len(set(ids))
    return set(ids)


def check_retrievable(server: ServerProcess, runs: list[tuple[ProgramRun, str]]) -> None:
    """Every response a store:true client saw is there, unchanged; store:false ones never were."""
    with httpx.Client(base_url=server.base_url, timeout=30) as http:
        for run, expected in runs:
            for response_id in run.response_ids:
                reply = http.get(f"/responses/{response_id}")
                if run.store:
                    assert reply.status_code == 200, (response_id, reply.text[:300])
                    assert reply.json()["id"] == response_id
                else:
                    assert_envelope(reply, 404, f"'{response_id}' not found")
            if run.store:
                final = http.get(f"/responses/{run.response_ids[-1]}").json()
                assert final["output"][-1]["content"][0]["text"] == expected


@pytest.mark.timeout(180)
def test_kill_9_between_pauses_loses_and_duplicates_nothing(
    server_process: Callable[..., ServerProcess],
) -> None:
    server = server_process(secret=SECRET, workers=2).start()
    runs = make_runs(8)
    requests: list[dict[str, Any] | None] = [run.first() for run, _ in runs]
    kills = 0
    with ThreadPoolExecutor(len(runs)) as pool:
        for step in range(PAUSES + 1):
            with sdk_clients(server, len(runs)) as clients:

                def send(n: int, request: dict[str, Any] | None, clients: list[openai.OpenAI] = clients) -> Any:
                    assert request is not None
                    return runs[n][0].next(clients[n].responses.create(**request))

                requests = list(pool.map(send, range(len(runs)), requests))
            if step in (1, 3):  # between pauses: every client holds tool calls the server issued
                assert all(request is not None for request in requests)
                server.kill9()
                kills += 1
                server.start()
    assert kills == 2
    assert all(request is None for request in requests)
    for run, expected in runs:
        assert run.program_output.status == "completed", run.program_output.result[:300]
        assert run.text == expected
        assert len(run.response_ids) == PAUSES + 1

    check_retrievable(server, runs)
    assert server.health()["stored_responses"] == sum(len(run.response_ids) for run, _ in runs if run.store)
    server.kill9()  # leave the WAL as a crash leaves it, then read the file cold
    stored = check_database(server)
    seen = {response_id for run, _ in runs if run.store for response_id in run.response_ids}
    assert stored == seen


class Progress:
    """Responses the clients have received so far, counted across all of them."""

    def __init__(self) -> None:
        self.count = 0
        self._changed = threading.Condition()

    def add(self) -> None:
        with self._changed:
            self.count += 1
            self._changed.notify_all()

    def wait_for(self, count: int, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self.count >= count, timeout)


class Killer(threading.Thread):
    """Kills the server with SIGKILL once the clients have received the given numbers of
    responses, and starts it again at once: the kills land mid-run however fast the machine."""

    def __init__(self, server: ServerProcess, progress: Progress, at: list[int]) -> None:
        super().__init__(name="killer", daemon=True)
        self.server = server
        self.progress = progress
        self.at = at
        self.kills = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for count in self.at:
                assert self.progress.wait_for(count, timeout=120), f"the clients never got {count} responses"
                self.server.kill9()
                self.kills += 1
                self.server.start()
        except BaseException as e:  # reported by the test
            self.error = e


def drive_through_restarts(server: ServerProcess, run: ProgramRun, progress: Progress, deadline: float) -> int:
    """Drive `run` to its end, resending a request the kill cut off or refused; the resends."""
    resends = 0
    with openai.OpenAI(base_url=server.base_url, api_key="sk", max_retries=0, timeout=30) as client:
        request: dict[str, Any] | None = run.first()
        while request is not None:
            try:
                response = client.responses.create(**request)
            except openai.APIConnectionError:
                assert time.monotonic() < deadline, "the server did not come back"
                resends += 1
                time.sleep(0.1)
                continue
            progress.add()
            request = run.next(response)
    return resends


@pytest.mark.timeout(180)
def test_kill_9_mid_request_every_client_finishes(server_process: Callable[..., ServerProcess]) -> None:
    """Kills land while requests are in flight; a client resends what the kill cut off.

    A response stored just before the kill whose reply never left is legitimately in the file
    without a client having seen it (the client's resend made a second one); there can be at
    most one such response per client per kill."""
    server = server_process(secret=SECRET, workers=2).start()
    clients = 10
    pauses = 10  # 110 requests in all; the kills land after 25 and 65 of them
    runs = [
        (ProgramRun(pausing_program(100 * n, pauses), store=n % 2 == 1), expected_total(100 * n, pauses))
        for n in range(clients)
    ]
    progress = Progress()
    killer = Killer(server, progress, at=[25, 65])
    deadline = time.monotonic() + 120
    killer.start()
    with ThreadPoolExecutor(clients) as pool:
        resends = list(pool.map(lambda pair: drive_through_restarts(server, pair[0], progress, deadline), runs))
    killer.join(60)
    assert killer.error is None, repr(killer.error)
    assert killer.kills == 2
    assert sum(resends) > 0, "no request was cut off: the kills came too late to test anything"
    for run, expected in runs:
        assert run.program_output.status == "completed", run.program_output.result[:300]
        assert run.text == expected

    check_retrievable(server, runs)
    server.kill9()
    stored = check_database(server)
    seen = {response_id for run, _ in runs if run.store for response_id in run.response_ids}
    assert seen <= stored, f"lost: {sorted(seen - stored)[:5]}"
    unseen = stored - seen
    assert len(unseen) <= killer.kills * sum(1 for run, _ in runs if run.store), len(unseen)
    print(f"{sum(resends)} attempts refused or cut off by {killer.kills} kills; {len(unseen)} stored, never seen")


@pytest.mark.timeout(120)
def test_store_false_programs_resume_after_a_restart_with_a_memory_store(
    server_process: Callable[..., ServerProcess], tmp_path: Path
) -> None:
    server = server_process(store="memory", secret=SECRET).start()
    replayed = ProgramRun(pausing_program(5, 3), store=False)
    stored = ProgramRun(pausing_program(6, 3), store=True)
    with openai.OpenAI(base_url=server.base_url, api_key="sk", max_retries=0, timeout=60) as client:
        next_replayed = replayed.next(client.responses.create(**replayed.first()))
        next_stored = stored.next(client.responses.create(**stored.first()))
    assert next_replayed is not None and next_stored is not None
    server.kill9()
    server.start()
    assert server.health()["stored_responses"] == 0
    with openai.OpenAI(base_url=server.base_url, api_key="sk", max_retries=0, timeout=60) as client:
        # The store:false program picks up where it was: its state travels in the items.
        request: dict[str, Any] | None = next_replayed
        while request is not None:
            request = replayed.next(client.responses.create(**request))
        assert replayed.text == expected_total(5, 3)
        # The store:true one cannot: the memory store went with the process.
        with pytest.raises(openai.BadRequestError) as raised:
            client.responses.create(**next_stored)
        assert raised.value.code == "previous_response_not_found"

    # And it is the secret that carries it: started with another one, the server refuses the
    # same replay, since the program's fingerprint no longer verifies.
    other = server_process(tmp_path / "other", store="memory", secret="another-secret-9876543210").start()
    run = ProgramRun(pausing_program(5, 3), store=False)
    with openai.OpenAI(base_url=server.base_url, api_key="sk", max_retries=0, timeout=60) as client:
        request = run.next(client.responses.create(**run.first()))
    assert request is not None
    reply = httpx.post(f"{other.base_url}/responses", json=request, timeout=60)
    assert_envelope(reply, 400, "fingerprint")
    with openai.OpenAI(base_url=server.base_url, api_key="sk", max_retries=0, timeout=60) as client:
        assert drive(client, ProgramRun(pausing_program(1, 1), store=False)).text == expected_total(1, 1)
