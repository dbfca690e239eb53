"""Signing (emulator/signing.py) beyond fingerprints: where the secret comes from, sealed
content that opens only unchanged and only in its own domain, and the derived ids."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ptc_emulator.emulator import signing
from ptc_emulator.emulator.errors import InvalidRequest
from ptc_emulator.emulator.signing import ProgramSeal, Signer, code_digest


def test_the_secret_is_the_explicit_one_then_the_environment_then_the_data_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(signing.SECRET_ENV, "from-env")
    assert signing.load_secret("explicit", tmp_path) == b"explicit"
    assert signing.load_secret(None, tmp_path) == b"from-env"
    monkeypatch.delenv(signing.SECRET_ENV)
    made = signing.load_secret(None, tmp_path / "data")
    assert len(made) == 64 and bytes.fromhex(made.decode())  # 32 random bytes, as hex
    path = tmp_path / "data" / "secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert signing.load_secret(None, tmp_path / "data") == made  # kept across restarts


def test_without_a_data_dir_each_server_has_its_own_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(signing.SECRET_ENV, raising=False)
    first, second = signing.load_secret(None, None), signing.load_secret(None, None)
    assert len(first) == 32 and first != second


def test_sealed_content_opens_unchanged_in_its_own_domain_only() -> None:
    signer = Signer(b"secret")
    sealed = signer.seal("reasoning", {"summary": "Add the numbers.", "n": 1})
    assert signer.unseal("reasoning", sealed) == {"summary": "Add the numbers.", "n": 1}
    assert signer.unseal("other-domain", sealed) is None
    assert Signer(b"another secret").unseal("reasoning", sealed) is None


@pytest.mark.parametrize(
    "tamper",
    [
        lambda s: "x" + s[1:],
        lambda s: s[:-1] + ("A" if s[-1] != "A" else "B"),
        lambda s: s.replace(".", ""),
        lambda s: s + ".extra",
        lambda s: "",
        lambda s: "not base64!.@@@",
    ],
    ids=["payload", "signature", "no-separator", "three-parts", "empty", "garbage"],
)
def test_tampered_sealed_content_does_not_open(tamper: object) -> None:
    signer = Signer(b"secret")
    sealed = signer.seal("reasoning", {"summary": "x"})
    assert signer.unseal("reasoning", tamper(sealed)) is None  # type: ignore[operator]


def test_derived_ids_are_stable_distinct_and_prefixed() -> None:
    signer = Signer(b"secret")
    assert (
        signer.program_call_id("call_p", 0)
        == signer.program_call_id("call_p", 0)
        == Signer(b"secret").program_call_id("call_p", 0)
    )
    assert signer.program_call_id("call_p", 0) != signer.program_call_id("call_p", 1)
    assert signer.program_call_id("call_p", 0).startswith("call_")
    assert signer.program_call_item_id("call_p", 0).startswith("fc_")
    assert signer.program_call_item_id("call_p", 0, prefix="ctc").startswith("ctc_")
    assert signer.program_output_id("call_p", "completed", "3") != signer.program_output_id("call_p", "completed", "4")
    assert signer.reasoning_id("call_p").startswith("rs_")
    assert len(signer.reasoning_id("call_p")) == len("rs_") + 40


def test_the_code_digest_is_the_sha256_of_the_utf8_code() -> None:
    assert signing.code_digest("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    assert signing.code_digest("é") != signing.code_digest("e")


def _seal(**changes: object) -> ProgramSeal:
    fields: dict[str, object] = {
        "call_id": "call_1",
        "code_sha256": code_digest("text(1)"),
        "seed": 7,
        "clock_ms": 1_700_000_000_000,
        "tools": ("add",),
    }
    return ProgramSeal(**{**fields, **changes})  # type: ignore[arg-type]


def test_a_fingerprint_opens_with_its_own_code_and_no_other() -> None:
    signer = Signer(b"secret")
    fingerprint = signer.fingerprint(_seal())
    assert signer.open_fingerprint(fingerprint, call_id="call_1", code="text(1)", param="input") == _seal()
    with pytest.raises(InvalidRequest):
        signer.open_fingerprint(fingerprint, call_id="call_1", code="text(2)", param="input")
    with pytest.raises(InvalidRequest):
        signer.open_fingerprint(fingerprint, call_id="call_2", code="text(1)", param="input")
    with pytest.raises(InvalidRequest):
        Signer(b"another secret").open_fingerprint(fingerprint, call_id="call_1", code="text(1)", param="input")


def test_derived_ids_depend_on_the_secret_and_the_call() -> None:
    one, two = Signer(b"a"), Signer(b"b")
    assert one.program_call_id("call_1", 0) == one.program_call_id("call_1", 0)
    assert (
        len({one.program_call_id("call_1", 0), one.program_call_id("call_1", 1), two.program_call_id("call_1", 0)}) == 3
    )
