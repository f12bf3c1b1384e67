"""Bounded, isolated scoring: library scorers (math-verify, reasoning-gym) and verifiers rubrics run in a
sandbox of two kinds of process (tasks/_scorer_child.py): a template that isolates itself, warms the libraries
and locks itself down, and a scorer child forked from it for each scoring session.

Why processes: a worker's completion is hostile. No answer reaches an evaluator (tasks.verify, tasks.gym), but
the parsers and CAS that score answers are large, and a C-level computation such as a big-integer power cannot
be interrupted inside the interpreter that started it. So each rollout file is scored in a fresh child
(`scoring_session`), unprivileged, without network, unable to write a file or start a process, under hard
rlimits, with a CPU budget kept from outside it (the template SIGKILLs a child past its budget). A call that
exceeds its budget, runs out of memory, raises, does what the sandbox refuses, or kills the child is scored
`UNSCORABLE` (0). The boundary is listed step by step in tasks/_scorer_child.py and docs/protocol.md.

Why parties agree: the budget is the second line of defence. Every answer is first bounded by tasks.verify
(length, characters, digit runs, exponents, LaTeX commands) before it reaches a parser, and the bounds are
chosen so that admitted answers score in milliseconds (tests/integration/test_reward_hacking.py); an input refused by the
bounds is refused identically everywhere because the bounds are pure functions of the text. The budget is CPU
time, not wall time, so a busy machine does not hit it sooner. The only way two parties could disagree is an
admitted answer that is *correct* and costs about the budget to recognise: a wrong answer scores 0 whether or
not it finishes.

Budgets: `CPU_BUDGET_S` per completion, `MEMORY_BYTES` of address space, and a wall-clock guard `WALL_LIMIT_S`
only for a child that stops using CPU altogether.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from tasks.base import TaskError

CPU_BUDGET_S = 5.0
"""CPU seconds one completion's scoring may take (math-verify, a reasoning-gym scorer or a rubric)."""
MEMORY_BYTES = 2 * 1024**3
"""Address-space limit of the scoring processes (RLIMIT_AS, hard = soft)."""
WALL_LIMIT_S = 60.0
"""The template's guard for a child that neither answers nor uses up its CPU budget (then: killed, 0)."""
START_LIMIT_S = 300.0
"""Wall seconds the template may take to warm up (imports, a reasoning-gym dataset, an environment's probe)."""

_CHILD = Path(__file__).with_name("_scorer_child.py")
_SESSIONS = itertools.count(1)
_CURRENT = threading.local()
UNSCOPED = 0
"""The session of calls made outside `scoring_session`: they share one child (replaced after any failure)."""


@contextlib.contextmanager
def scoring_session() -> Iterator[None]:
    """Every scoring call inside shares one fresh scorer child per sandbox: use one per rollout file, so that
    nothing a completion does to its scorer's interpreter reaches another file. Whatever comes from a worker is
    scored inside one (the validator's reward check, the worker's own file); calls outside any session (a party
    scoring its own policy's text: the trainer's evaluation and difficulty filter) share one child."""
    previous = getattr(_CURRENT, "session", None)
    _CURRENT.session = next(_SESSIONS)
    try:
        yield
    finally:
        _CURRENT.session = previous


def _session() -> int:
    return getattr(_CURRENT, "session", None) or UNSCOPED


class ScoringSandbox:
    """One template process, started on first use, replaced when it dies. Thread-safe."""

    def __init__(self, kinds: tuple[str, ...], cpu_budget_s: float = CPU_BUDGET_S,
                 memory_bytes: int = MEMORY_BYTES, wall_limit_s: float = WALL_LIMIT_S,
                 environment: dict | None = None, gym: dict | None = None) -> None:
        self.kinds = tuple(sorted(kinds))
        self.environment = environment
        self.gym = gym
        self.cpu_budget_s = cpu_budget_s
        self.memory_bytes = memory_bytes
        self.wall_limit_s = wall_limit_s
        self.isolation: dict = {}
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._pid = 0
        self._to_child: int | None = None
        self._from_child: int | None = None
        self._buffer = b""
        self.restarts = 0

    # -- process management ------------------------------------------------------------------------

    def _start(self) -> None:
        request_r, request_w = os.pipe()
        reply_r, reply_w = os.pipe()
        config = {"cpu_budget_s": self.cpu_budget_s, "wall_limit_s": self.wall_limit_s,
                  "memory_bytes": self.memory_bytes, "kinds": list(self.kinds), "environment": self.environment,
                  "gym": self.gym}
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR")}
        env.update(PYTHONHASHSEED="0", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
                   PYTHONDONTWRITEBYTECODE="1")
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-B", str(_CHILD), str(request_r), str(reply_w), json.dumps(config)],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                pass_fds=(request_r, reply_w), cwd=tempfile.gettempdir(), env=env, start_new_session=True)
        finally:
            os.close(request_r)
            os.close(reply_w)
        self._pid = os.getpid()
        self._to_child, self._from_child, self._buffer = request_w, reply_r, b""
        ready = self._read_reply(time.monotonic() + START_LIMIT_S)
        if not ready or not ready.get("ready"):
            why = (ready or {}).get("why", "it exited")
            self._stop()
            if (ready or {}).get("refused"):
                raise TaskError(why)  # a verifiers environment the template refused (tasks.environments)
            raise TaskError(f"the scoring sandbox did not start: {why}")
        self.isolation = ready.get("isolation", {})

    def _stop(self) -> None:
        proc, self._proc = self._proc, None
        for fd in (self._to_child, self._from_child):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._to_child = self._from_child = None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # the template and its scorer child
            except OSError:
                proc.kill()
        if proc is not None:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not fail
                pass

    def close(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                self._stop()

    def _read_reply(self, deadline: float) -> dict | None:
        assert self._from_child is not None
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            readable, _, _ = select.select([self._from_child], [], [], left)
            if not readable:
                continue
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except ValueError:
            return None
        return reply if isinstance(reply, dict) else None

    # -- requests ----------------------------------------------------------------------------------

    def request(self, payload: dict) -> dict:
        """The reply to `payload` from a scorer child of the current `scoring_session` (outside one, the child
        shared by unscoped calls), or {"ok": False, "why": "killed" | "wall"} when the template died or stalled (it is then
        replaced). TaskError only when the sandbox cannot start at all."""
        data = (json.dumps({**payload, "session": _session()}) + "\n").encode()
        with self._lock:
            for _ in range(2):
                if self._proc is None or self._pid != os.getpid() or self._proc.poll() is not None:
                    if self._proc is not None and self._pid == os.getpid():
                        self._stop()
                        self.restarts += 1
                    self._proc = None
                    self._start()
                try:
                    os.write(self._to_child, data)  # type: ignore[arg-type]
                except OSError:
                    self._stop()
                    self.restarts += 1
                    continue  # the template was gone before the request: nothing was scored, start afresh
                reply = self._read_reply(time.monotonic() + self.wall_limit_s + START_LIMIT_S)
                if reply is not None:
                    return reply
                stalled = self._proc is not None and self._proc.poll() is None
                self._stop()
                self.restarts += 1
                return {"ok": False, "why": "wall" if stalled else "killed"}
            return {"ok": False, "why": "killed"}


_SANDBOXES: dict[str, ScoringSandbox] = {}
_SANDBOXES_LOCK = threading.Lock()


def shared_sandbox(*kinds: str, gym: dict | None = None) -> ScoringSandbox:
    """The process-wide sandbox for these scorer kinds ('math', 'gym' with its dataset), started on first request."""
    key = json.dumps([sorted(kinds), gym], sort_keys=True)
    with _SANDBOXES_LOCK:
        if key not in _SANDBOXES:
            _SANDBOXES[key] = ScoringSandbox(tuple(kinds), gym=gym)
        return _SANDBOXES[key]


@atexit.register
def _close_all() -> None:
    for sandbox in list(_SANDBOXES.values()):
        sandbox.close()
