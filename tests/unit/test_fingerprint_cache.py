"""`Signer.open_fingerprint` keeps the program items it opened (emulator/signing.py): the same item
again gets the same seal, and an item changed in any byte after it was opened is refused exactly as
before; the memory stays bounded."""

from __future__ import annotations

import json

import pytest

from ptc_emulator.emulator import signing
from ptc_emulator.emulator.errors import InvalidRequest
from ptc_emulator.emulator.signing import ProgramSeal, Signer, code_digest

CODE = "const a = await tools.add({a: 1, b: 2});\ntext(String(a))"


def issued(signer: Signer, call_id: str = "call_1", code: str = CODE) -> str:
    seal = ProgramSeal(call_id=call_id, code_sha256=code_digest(code), seed=7, clock_ms=1000, tools=("add",))
    return signer.fingerprint(seal)


def refusal(signer: Signer, fingerprint: str, call_id: str, code: str) -> tuple[str, str | None]:
    with pytest.raises(InvalidRequest) as caught:
        signer.open_fingerprint(fingerprint, call_id=call_id, code=code, param="input[1]")
    return caught.value.message, caught.value.param


def test_an_item_changed_after_it_was_opened_is_refused_as_before() -> None:
    signer, fresh = Signer(b"secret"), Signer(b"secret")
    fingerprint = issued(signer)
    first = signer.open_fingerprint(fingerprint, call_id="call_1", code=CODE, param="input[1]")
    assert signer.open_fingerprint(fingerprint, call_id="call_1", code=CODE, param="input[1]") is first
    assert first == fresh.open_fingerprint(fingerprint, call_id="call_1", code=CODE, param="input[1]")

    tampered = [
        (fingerprint[:-1] + ("A" if fingerprint[-1] != "A" else "B"), "call_1", CODE),
        (fingerprint, "call_1", CODE + " "),
        (fingerprint, "call_2", CODE),
        (issued(Signer(b"other")), "call_1", CODE),
    ]
    for fp, call_id, code in tampered:
        assert refusal(signer, fp, call_id, code) == refusal(fresh, fp, call_id, code)
    assert "program code cannot be modified" in refusal(signer, fingerprint, "call_1", CODE + " ")[0]
    # ... and the item as issued still opens.
    assert signer.open_fingerprint(fingerprint, call_id="call_1", code=CODE, param="input[1]") == first


def test_the_opened_items_stay_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(signing, "_OPENED_ENTRIES", 5)
    monkeypatch.setattr(signing, "_OPENED_CHARS", 2_000)
    signer = Signer(b"secret")
    for n in range(30):
        code = f"text('{n}')" + " " * (n * 20)
        fingerprint = issued(signer, f"call_{n}", code)
        signer.open_fingerprint(fingerprint, call_id=f"call_{n}", code=code, param="input[0]")
        kept = signer.opened._seals
        assert len(kept) <= 5
        assert signer.opened._chars == sum(len(a) + len(b) + len(c) for a, b, c in kept) <= 2_000


def test_an_issued_item_opens_to_the_seal_it_was_issued_with() -> None:
    signer = Signer(b"secret")
    seal = ProgramSeal(call_id="call_9", code_sha256=code_digest(CODE), seed=2**127 + 5, clock_ms=17, tools=("a", "b"))
    fingerprint = signer.issue(seal, CODE)
    assert fingerprint == Signer(b"secret").fingerprint(seal)
    assert signer.open_fingerprint(fingerprint, call_id="call_9", code=CODE, param="input[0]") is seal
    assert Signer(b"secret").open_fingerprint(fingerprint, call_id="call_9", code=CODE, param="input[0]") == seal
    assert refusal(signer, fingerprint, "call_9", CODE + ";") == refusal(
        Signer(b"secret"), fingerprint, "call_9", CODE + ";"
    )
    # A seal whose digest is not of this code is issued, never remembered.
    other = ProgramSeal(call_id="call_8", code_sha256=code_digest("x"), seed=1, clock_ms=1, tools=())
    odd = signer.issue(other, CODE)
    assert refusal(signer, odd, "call_8", CODE) == refusal(Signer(b"secret"), odd, "call_8", CODE)


def test_a_long_tool_list_is_bound_by_digest_and_an_old_embedding_fingerprint_still_opens() -> None:
    signer = Signer(b"secret")
    names = tuple(f"tool_{n:05d}" for n in range(2000))
    seal = ProgramSeal(call_id="call_7", code_sha256=code_digest(CODE), seed=3, clock_ms=5, tools=names)
    fingerprint = signer.issue(seal, CODE)
    assert len(fingerprint) < 1024
    opened = Signer(b"secret").open_fingerprint(fingerprint, call_id="call_7", code=CODE, param="input[0]")
    assert opened.tools == () and not opened.tools_known
    assert opened.with_tools(names) == signer.open_fingerprint(
        fingerprint, call_id="call_7", code=CODE, param="input[0]"
    ).with_tools(names)
    resolved = opened.with_tools(names)
    assert resolved is not None and resolved.tools == names
    assert opened.with_tools(names[1:]) is None and opened.with_tools((*names, "more")) is None
    # A fingerprint of the earlier format, the whole list embedded, opens to that list.
    payload = json.dumps({"c": "call_7", "h": code_digest(CODE), "s": "3", "t": 5, "k": list(names)})
    body = f"{signing.FINGERPRINT_VERSION}.{signing._b64(payload.encode())}"
    old = f"{body}.{signing._b64(signer.mac('fingerprint', body))}"
    kept = signer.open_fingerprint(old, call_id="call_7", code=CODE, param="input[0]")
    assert kept.tools == names and kept.tools_known and kept.with_tools(names) is kept
