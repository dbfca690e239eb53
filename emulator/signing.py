"""Everything the emulator hands out and must recognise again, bound with one HMAC secret.

* Program fingerprints: opaque, versioned, signed. They bind the program's call_id, a digest of
  its code, and what replay needs (seed, clock, the tools it may call), so a program resumes in
  any process that has the same secret, with no server state.
* Derived ids: a program's n-th tool call always gets the same call_id, and a program_output's
  id is a MAC of its content, so a modified replay is caught.
* Sealed content (`encrypted_content` of reasoning items, the runtime record of hidden MCP
  calls): encrypted and authenticated (AES-256-GCM), so a client reads nothing of it; its nonce is
  derived from the content (a synthetic IV), so the same content always seals the same way and a
  replayed program sees the items it saw live.

The secret comes from `--secret` or `PTC_EMULATOR_SECRET`, otherwise it is generated once and
kept in the data directory.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ptc_emulator.emulator import messages
from ptc_emulator.emulator.caches import Cache

__all__ = ["EMBEDDED_TOOLS_CHARS", "FINGERPRINT_VERSION", "REASONING_DOMAIN", "ProgramSeal", "Signer", "load_secret"]

FINGERPRINT_VERSION = "ptc1"
REASONING_DOMAIN = "reasoning"
"""The seal domain of reasoning items' `encrypted_content` (a `store: false` replay checks every one)."""
SECRET_ENV = "PTC_EMULATOR_SECRET"
SEAL_VERSION = "e1."
"""What sealed content starts with: the version of its format."""


EMBEDDED_TOOLS_CHARS = 512
"""A fingerprint embeds the program's tool names when their JSON list is at most this long; a
longer list (a request of thousands of tools, a large MCP listing) is bound by its digest, which
the request that resumes the program must match (`ProgramSeal.with_tools`)."""

_OPENED_ENTRIES = 4096
_OPENED_CHARS = 16 * 2**20
"""The memo of opened fingerprints: entries, and characters of their keys (fingerprint, call_id,
code; a seal it keeps holds no more than its fingerprint embeds, so about as much again)."""
_CALL_IDS = 100_000
"""The memo of derived call ids: entries (each of a server-issued call_id, an index and a derived
id: about 250 bytes, so about 25 MB at most)."""


def load_secret(explicit: str | None, data_dir: Path | None) -> bytes:
    """`explicit`, else the environment, else `<data_dir>/secret` (created on first use)."""
    value = explicit or os.environ.get(SECRET_ENV)
    if value:
        return value.encode("utf-8")
    if data_dir is None:
        return secrets.token_bytes(32)
    path = data_dir / "secret"
    data_dir.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_bytes().strip()
    with os.fdopen(fd, "wb") as f:
        f.write(secrets.token_hex(32).encode("ascii"))
    return path.read_bytes().strip()


_DIRECT_NONCE_CHARS = 16
"""The hex digits of a direct MCP call's approval request id that are its nonce (the rest, 32, its MAC)."""


def _canonical_arguments(arguments: str) -> str:
    """MCP call arguments as an id binds them: canonical JSON of the object they give ({} for any
    other text), so the same call has the same id however its JSON is spaced."""
    try:
        given = json.loads(arguments)
    except (ValueError, RecursionError):  # not JSON, or nested past what the parser takes
        given = {}
    return json.dumps(given if isinstance(given, dict) else {}, sort_keys=True, separators=(",", ":"))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True, slots=True)
class ProgramSeal:
    """What a fingerprint binds."""

    call_id: str
    code_sha256: str
    seed: int
    clock_ms: int
    tools: tuple[str, ...]
    """Every tool the program may call, sorted. Empty in a seal opened from a fingerprint that binds
    them by digest (`tools_digest`) until `with_tools` gives them."""
    tools_digest: str = ""
    """`<count>:<sha256>` of the tools' JSON list, when the fingerprint binds that instead of the
    list (set when opened; a seal made to be issued leaves it empty, `Signer.fingerprint` decides)."""

    @property
    def tools_known(self) -> bool:
        return not self.tools_digest or bool(self.tools)

    def with_tools(self, tools: Sequence[str]) -> ProgramSeal | None:
        """This seal with `tools` (sorted), if they are the ones its fingerprint binds (else None)."""
        if self.tools_digest:
            return replace(self, tools=tuple(tools)) if tools_digest(tools) == self.tools_digest else None
        return self if tuple(tools) == self.tools else None

    def describe_tools(self) -> str:
        """The tools it started with, for a message: the list, or how many when only a digest is bound."""
        if self.tools_known:
            return str(list(self.tools))
        return f"{self.tools_digest.partition(':')[0]} tools (its fingerprint binds a digest of their list)"


def tools_digest(tools: Sequence[str]) -> str:
    text = json.dumps(list(tools), separators=(",", ":"))
    return f"{len(tools)}:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class _Opened(Cache):
    """Fingerprints already opened, by (fingerprint, call_id, code) exactly as sent: a replayed
    program item comes back on every request of its conversation. At most `_OPENED_ENTRIES` of
    them and `_OPENED_CHARS` characters, the least recently used leaving first."""

    def __init__(self) -> None:
        self._seals: OrderedDict[tuple[str, str, str], ProgramSeal] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str]) -> ProgramSeal | None:
        with self._lock:
            known = self._seals.get(key)
            if known is not None:
                self._seals.move_to_end(key)
            return known

    def put(self, key: tuple[str, str, str], seal: ProgramSeal) -> None:
        size = _size(*key)
        if size > _OPENED_CHARS:
            return
        with self._lock:
            if key not in self._seals:
                self._seals[key] = seal
                self._chars += size
            while len(self._seals) > _OPENED_ENTRIES or self._chars > _OPENED_CHARS:
                dropped, _ = self._seals.popitem(last=False)
                self._chars -= _size(*dropped)

    def clear(self) -> None:
        with self._lock:
            self._seals.clear()
            self._chars = 0

    def __len__(self) -> int:
        return len(self._seals)


def _size(fingerprint: str, call_id: str, code: str) -> int:
    return len(fingerprint) + len(call_id) + len(code)


class _CallIds(Cache):
    """Derived call ids (`Signer.program_call_id`), at most `_CALL_IDS`, emptied when full: every
    resume checks every earlier call."""

    def __init__(self) -> None:
        self.ids: dict[tuple[str, int], str] = {}
        self.approvals: set[tuple[str, str, str, str, str]] = set()
        """Approval requests found issued (`Signer.issued_approval`): every resume checks them."""

    def clear(self) -> None:
        self.ids.clear()
        self.approvals.clear()

    def __len__(self) -> int:
        return len(self.ids) + len(self.approvals)


class Signer:
    def __init__(self, secret: bytes) -> None:
        self._key = hashlib.sha256(b"ptc-emulator\x00" + secret).digest()
        self.call_ids = _CallIds()
        self.opened = _Opened()
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self._aead = AESGCM(hashlib.sha256(b"ptc-emulator-seal\x00" + secret).digest())

    def mac(self, domain: str, *parts: str) -> bytes:
        message = "\x00".join((domain, *parts)).encode("utf-8")
        return hmac.digest(self._key, message, "sha256")  # HMAC-SHA256 in one call (OpenSSL's one-shot path)

    def token(self, domain: str, *parts: str, length: int = 24) -> str:
        return self.mac(domain, *parts).hex()[:length]

    # ---- programs ---------------------------------------------------------------------------

    def fingerprint(self, seal: ProgramSeal) -> str:
        """The fingerprint of a program item: its tools embedded (`k`) when their list is short,
        else its digest (`d`, see `EMBEDDED_TOOLS_CHARS`)."""
        return self._fingerprint(seal)[0]

    def _fingerprint(self, seal: ProgramSeal) -> tuple[str, ProgramSeal]:
        """The fingerprint, and the seal as opening it gives it back (without a digested list)."""
        data: dict[str, Any] = {
            "c": seal.call_id,
            "h": seal.code_sha256,
            "s": format(seal.seed, "x"),
            "t": seal.clock_ms,
        }
        listed = json.dumps(list(seal.tools), separators=(",", ":"))
        bound = seal
        if seal.tools_digest or len(listed) > EMBEDDED_TOOLS_CHARS:
            digest = seal.tools_digest if seal.tools_digest and not seal.tools else tools_digest(seal.tools)
            data["d"] = digest
            bound = replace(seal, tools=(), tools_digest=digest)
        else:
            data["k"] = list(seal.tools)
        payload = json.dumps(data, separators=(",", ":")).encode("utf-8")
        body = f"{FINGERPRINT_VERSION}.{_b64(payload)}"
        return f"{body}.{_b64(self.mac('fingerprint', body))}", bound

    def issue(self, seal: ProgramSeal, code: str) -> str:
        """`fingerprint(seal)` for a program item with this code, remembered as opened: the item
        comes back, unchanged, when its program resumes."""
        fingerprint, bound = self._fingerprint(seal)
        if seal.code_sha256 == code_digest(code):
            self.opened.put((fingerprint, seal.call_id, code), bound)
        return fingerprint

    def open_fingerprint(self, fingerprint: str, *, call_id: str, code: str, param: str) -> ProgramSeal:
        """Check a replayed program item; raise a 400 if the fingerprint or the code was modified.

        An item opened before, byte for byte the same (fingerprint, call_id and code), gets the seal
        it got then (a seal is immutable); any other is checked in full. Only items that passed are
        kept, at most `_OPENED_ENTRIES` of them and `_OPENED_CHARS` characters, the least recently
        used leaving first."""
        key = (fingerprint, call_id, code)
        known = self.opened.get(key)
        if known is not None:
            return known
        seal = self._open(fingerprint, call_id=call_id, code=code, param=param)
        self.opened.put(key, seal)
        return seal

    def caches(self) -> dict[str, Cache]:
        """The signer's caches, by name (for the app's registry)."""
        return {"opened fingerprints": self.opened, "derived call ids": self.call_ids}

    def _open(self, fingerprint: str, *, call_id: str, code: str, param: str) -> ProgramSeal:
        try:
            version, payload, signature = fingerprint.split(".")
            body = f"{version}.{payload}"
            valid = version == FINGERPRINT_VERSION and hmac.compare_digest(
                _unb64(signature), self.mac("fingerprint", body)
            )
            data: dict[str, Any] = json.loads(_unb64(payload)) if valid else {}
        except (ValueError, json.JSONDecodeError):
            valid, data = False, {}
        if not valid:
            raise messages.fingerprint_invalid(call_id, param)
        seal = ProgramSeal(
            call_id=data["c"],
            code_sha256=data["h"],
            seed=int(data["s"], 16),
            clock_ms=data["t"],
            tools=tuple(data["k"]) if "k" in data else (),
            tools_digest=data.get("d", ""),
        )
        if seal.call_id != call_id:
            raise messages.fingerprint_of_another_program(call_id, param)
        if seal.code_sha256 != code_digest(code):
            raise messages.program_code_modified(call_id, param)
        return seal

    def program_call_id(self, program_call_id: str, index: int) -> str:
        key = (program_call_id, index)
        ids = self.call_ids.ids
        found = ids.get(key)
        if found is None:  # every resume checks every earlier call: remember them
            if len(ids) > _CALL_IDS:
                ids.clear()
            found = ids[key] = "call_" + self.token("program-call", program_call_id, str(index))
        return found

    def mcp_approval_id(self, program: str, index: int, label: str, name: str, arguments: str) -> str:
        """The id of the approval request for a program's MCP call: a MAC of what is called (the
        arguments as canonical JSON of the object they give, none for any other), not only where."""
        canonical = _canonical_arguments(arguments)
        return "mcpr_" + self.token("mcp-approval", program, str(index), label, name, canonical, length=40)

    def direct_mcp_approval_id(self, label: str, name: str, arguments: str, nonce: str | None = None) -> str:
        """The id of the approval request for a direct MCP call (a scenario's `mcp` turn, no
        program): `mcpr_`, a fresh nonce (16 hex digits: unique across turns and responses), then a
        MAC of the nonce and what is called (32 hex digits), 48 in all as the hosted API's are.
        `issued_direct_approval` checks one sent back against the item that carries it."""
        if nonce is None:
            nonce = secrets.token_hex(_DIRECT_NONCE_CHARS // 2)
        canonical = _canonical_arguments(arguments)
        return "mcpr_" + nonce + self.token("mcp-approval-direct", nonce, label, name, canonical, length=32)

    def issued_direct_approval(self, request_id: str, label: str, name: str, arguments: str) -> bool:
        """Whether `request_id` is a direct call's approval request this server issued for
        `label`.`name` with these arguments (`direct_mcp_approval_id`)."""
        body = request_id.removeprefix("mcpr_")
        if body == request_id or len(body) != _DIRECT_NONCE_CHARS + 32:
            return False
        nonce = body[:_DIRECT_NONCE_CHARS]
        expected = self.direct_mcp_approval_id(label, name, arguments, nonce)
        return hmac.compare_digest(
            expected.encode("utf-8", "surrogatepass"), request_id.encode("utf-8", "surrogatepass")
        )

    def issued_approval(
        self, request_id: str, program: str, label: str, name: str, arguments: str, *, max_tool_calls: int
    ) -> bool:
        """Whether `request_id` is the approval request this server issued for a call of `program`'s
        (at some position below `max_tool_calls`) to `label`.`name` with these arguments."""
        key = (request_id, program, label, name, arguments)
        approvals = self.call_ids.approvals
        if key in approvals:
            return True
        for index in range(max_tool_calls):
            if self.mcp_approval_id(program, index, label, name, arguments) == request_id:
                if len(approvals) > _CALL_IDS:
                    approvals.clear()
                approvals.add(key)
                return True
        return False

    def program_call_item_id(self, program_call_id: str, index: int, prefix: str = "fc") -> str:
        return f"{prefix}_" + self.token("program-call-item", program_call_id, str(index), length=40)

    def program_output_id(self, program_call_id: str, status: str, result: str) -> str:
        return "po_" + self.token("program-output", program_call_id, status, result, length=40)

    def reasoning_id(self, anchor: str) -> str:
        """The reasoning item that precedes the item with `anchor` (a call_id or item id)."""
        return "rs_" + self.token("reasoning", anchor, length=40)

    # ---- sealed content ---------------------------------------------------------------------

    def seal(self, domain: str, data: dict[str, Any]) -> str:
        """`data` encrypted for this server alone, bound to `domain`."""
        plain = json.dumps(data, separators=(",", ":")).encode("utf-8")
        nonce = self.mac("seal-nonce", domain, plain.decode("utf-8"))[:12]
        return SEAL_VERSION + _b64(nonce + self._aead.encrypt(nonce, plain, domain.encode("utf-8")))

    def unseal(self, domain: str, sealed: str) -> dict[str, Any] | None:
        """What `seal` sealed in this domain, or None if it was modified, is of another domain or
        another server, or is not sealed content at all."""
        from cryptography.exceptions import InvalidTag

        if not sealed.startswith(SEAL_VERSION):
            return None
        try:
            raw = _unb64(sealed[len(SEAL_VERSION) :])
            plain = self._aead.decrypt(raw[:12], raw[12:], domain.encode("utf-8"))
            data = json.loads(plain)
        except (ValueError, InvalidTag, json.JSONDecodeError):
            return None
        return data if isinstance(data, dict) else None


def code_digest(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8")).hexdigest()
