"""Reward values: exact, so that worker, validator and trainer compare them with `==`.

A task's reward is a rational number computed exactly (integers and `fractions.Fraction`, never a
float operation whose rounding could differ), then rounded once to the nearest float32:
`float32(float64(r))`, both steps IEEE round-to-nearest-even, which every party performs
bit-identically. float32 is the rollout file's `reward` column type, so the value a worker writes
is the value it computed, and the validator's recomputation equals it bit for bit.

Scorers pay 1 for an accepted answer and 0 otherwise (`UNSCORABLE` = 0 also for an answer that
cannot be scored within its budget, see tasks.verify and tasks.sandbox); the length-target
wrapper (tasks.length) subtracts an exact rational penalty.
"""

from __future__ import annotations

import math
import numbers
import struct
from fractions import Fraction

UNSCORABLE = 0.0
"""The reward of a completion that cannot be scored: no final answer, an answer outside the bounds
of tasks.verify, or a scorer that exceeded its CPU/memory budget. Equal to a wrong answer's."""

CORRECT = 1.0
WRONG = 0.0


def canonical_reward(value: Fraction | int) -> float:
    """The reward for the exact rational `value`: float32(float64(value)), as a Python float.

    Python's float(Fraction) is correctly rounded to float64, and packing as IEEE float32
    rounds to nearest-even: the same bits on every machine.
    """
    if isinstance(value, float):
        raise TypeError("canonical_reward takes an exact int or Fraction, not a float")
    as_double = float(Fraction(value))
    return struct.unpack("<f", struct.pack("<f", as_double))[0]


def _as_float(reward: object) -> float | None:
    if isinstance(reward, bool) or not isinstance(reward, numbers.Real):
        return None
    value = float(reward)
    return value if math.isfinite(value) else None


def is_canonical(reward: float) -> bool:
    """Whether `reward` is a finite float32 value (what a rollout file can hold exactly)."""
    value = _as_float(reward)
    if value is None:
        return False
    try:
        return struct.unpack("<f", struct.pack("<f", value))[0] == value
    except OverflowError:
        return False


def rewards_equal(computed: float, claimed: float) -> bool:
    """The reward check: bit-identical finite float32 values (so 0.0 and -0.0 differ, NaN equals
    nothing). No tolerance: every party computes rewards exactly (see the module docstring)."""
    if not (is_canonical(computed) and is_canonical(claimed)):
        return False
    return struct.pack("<f", float(computed)) == struct.pack("<f", float(claimed))
