"""Where a role's wall time goes: `with phase("generate"): …` appends one JSON line per phase.

Off unless `PROOFSWARM_PHASE_LOG=<path>` is set (then a no-op costs one dict lookup). Each line is
`{"role", "phase", "t", "s"}`: the role from `PROOFSWARM_PHASE_ROLE` (default: the process id), the
phase name, its start (unix time) and its *exclusive* seconds — a phase nested in another (a fetch
inside a publish) is subtracted from the outer one, so a role's phases never count a second twice
within one thread. Lines are short single `write`s in append mode, so processes may share one file.
bench.protocol reads the file.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

LOG_ENV = "PROOFSWARM_PHASE_LOG"
ROLE_ENV = "PROOFSWARM_PHASE_ROLE"
_nesting = threading.local()


@contextmanager
def phase(name: str) -> Iterator[None]:
    """Time the block as phase `name` of this process's role, when the phase log is on."""
    path = os.environ.get(LOG_ENV)
    if not path:
        yield
        return
    stack = _nesting.__dict__.setdefault("inner", [])
    stack.append(0.0)
    t, started = time.time(), time.perf_counter()
    try:
        yield
    finally:
        elapsed = time.perf_counter() - started
        inner = stack.pop()
        if stack:
            stack[-1] += elapsed
        line = json.dumps({"role": os.environ.get(ROLE_ENV) or str(os.getpid()), "phase": name, "t": round(t, 4),
                           "s": round(max(elapsed - inner, 0.0), 5)})
        with open(path, "a") as log:
            log.write(line + "\n")


def read_phases(path: str | os.PathLike) -> list[dict]:
    """The phase log's records (a line cut short by a killed process is skipped)."""
    try:
        lines = open(path).read().splitlines()
    except FileNotFoundError:
        return []
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            continue
    return records
