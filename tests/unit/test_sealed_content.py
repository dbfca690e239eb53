"""Sealed content (`encrypted_content`) is encrypted, not only signed: a client reads nothing of it,
cannot change it, and cannot move it to another domain or another server."""

from __future__ import annotations

import base64

from ptc_emulator.emulator.signing import REASONING_DOMAIN, Signer

RECORD = {"id": "rs_rt_1", "calls": [{"server": "wiki", "result": "db password is hunter2"}]}


def _decoded(sealed: str) -> bytes:
    """Every dot-separated part of the sealed text, base64-decoded."""
    return b"|".join(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)) for part in sealed.split("."))


def test_the_content_cannot_be_read_from_what_the_client_gets() -> None:
    sealed = Signer(b"secret").seal(REASONING_DOMAIN, RECORD)
    assert b"hunter2" not in _decoded(sealed) and b"wiki" not in _decoded(sealed)
    assert "hunter2" not in sealed
    # the old format was base64 JSON with a signature: readable by anyone
    assert Signer(b"secret").unseal(REASONING_DOMAIN, sealed) == RECORD


def test_the_same_content_seals_the_same_way_so_a_replay_sees_what_the_live_run_saw() -> None:
    signer = Signer(b"secret")
    assert signer.seal(REASONING_DOMAIN, RECORD) == signer.seal(REASONING_DOMAIN, RECORD)
    assert signer.seal(REASONING_DOMAIN, RECORD) != signer.seal(REASONING_DOMAIN, {**RECORD, "id": "rs_rt_2"})


def test_modified_foreign_or_misplaced_content_is_refused() -> None:
    signer = Signer(b"secret")
    sealed = signer.seal(REASONING_DOMAIN, RECORD)
    flipped = sealed[:-2] + ("A" if sealed[-2] != "A" else "B") + sealed[-1]
    assert signer.unseal(REASONING_DOMAIN, flipped) is None
    assert Signer(b"another secret").unseal(REASONING_DOMAIN, sealed) is None
    assert signer.unseal("another-domain", sealed) is None
    for junk in ("", "e1.", "e1.!!", "not sealed", sealed[len("e1.") :]):
        assert signer.unseal(REASONING_DOMAIN, junk) is None
    assert signer.unseal(REASONING_DOMAIN, signer.seal(REASONING_DOMAIN, {"a": 1})) == {"a": 1}
