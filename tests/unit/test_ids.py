"""Ids come from the operating system's CSPRNG: earlier ids say nothing about the next one.

The attack this guards against: the ids used to come from one Mersenne Twister seeded once, so
624 of its 32-bit outputs (104 ids of 192 bits) rebuild its state, and the next `resp_…` id of
another client (and so its stored response) could be predicted.
"""

from __future__ import annotations

import random

from ptc_emulator.emulator.ids import new_id


def _untemper(y: int) -> int:
    y ^= y >> 18
    y ^= (y << 15) & 0xEFC60000
    for _ in range(7):
        y ^= (y << 7) & 0x9D2C5680
    for _ in range(3):
        y ^= y >> 11
    return y & 0xFFFFFFFF


def _words(identifier: str) -> list[int]:
    """The 32-bit generator outputs behind a 192-bit id, as a Mersenne Twister would emit them."""
    value = int(identifier.split("_", 1)[1], 16)
    return [(value >> (32 * i)) & 0xFFFFFFFF for i in range(6)]


def _predict(ids: list[str]) -> str:
    """The next id, if the ids came from Python's Mersenne Twister."""
    words = [w for identifier in ids for w in _words(identifier)][-624:]
    twister = random.Random()
    twister.setstate((3, tuple(_untemper(w) for w in words) + (624,), None))
    return f"resp_{twister.getrandbits(192):048x}"


def test_the_prediction_works_on_a_mersenne_twister() -> None:
    # The attack is real: on a seeded generator 104 ids give the next one away.
    twister = random.Random(1234)
    ids = [f"resp_{twister.getrandbits(192):048x}" for _ in range(104)]
    assert _predict(ids) == f"resp_{twister.getrandbits(192):048x}"


def test_the_next_id_cannot_be_predicted_from_earlier_ones() -> None:
    ids = [new_id("resp") for _ in range(104)]
    assert _predict(ids) != new_id("resp")
    assert len({new_id("call") for _ in range(1000)}) == 1000
    assert all(len(i) == len("resp_") + 48 for i in ids)
