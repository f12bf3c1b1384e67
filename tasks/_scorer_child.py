"""The scoring sandbox's child process (started by tasks.sandbox; never imported by the roles).

Run as a script with the standard library only at the top: it must not import the `tasks`
package (and through it pydantic, transformers). It speaks JSON lines on two pipes it is handed
(file descriptors in argv), then points stdin/stdout/stderr at /dev/null so that a scorer's prints
cannot corrupt the protocol.

Requests:
  {"op": "math", "gold": str, "answer": str}                      -> {"ok": true, "full": bool}
  {"op": "gym", "dataset": str, "seed": int, "size": int, "params": {..}, "entry": base64 pickle,
   "answer": str}                                                   -> {"ok": true, "full": bool, "score": str}
The entry is the parent's own dataset entry (trusted: the parent built it), so the child scores exactly
the problem the parent posed.
Failures: {"ok": false, "why": "budget" | "memory" | "error"} (the caller pays tasks.rewards.UNSCORABLE);
after "budget" or "memory" the process exits (an interrupted computation may leave library caches
half-built), and the parent starts a fresh one for the next call.

Budgets (argv): every scoring call runs under a CPU-time budget (ITIMER_PROF raises in Python code,
re-firing until the call unwinds; RLIMIT_CPU kills the process if C code runs a second past it) and
the whole process under an address-space limit (RLIMIT_AS). No new processes (RLIMIT_NPROC 0 where
the kernel enforces it, and os/subprocess entry points refuse), no file writes (RLIMIT_FSIZE 0).
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import pickle
import resource
import signal
import sys


class BudgetExceeded(BaseException):
    """Raised by the CPU timer; a BaseException so that scorers' `except Exception` do not swallow it."""


_expired = False
last_cpu_s = 0.0
"""CPU seconds of the latest budgeted call: reported as `cpu_s` for diagnostics only, never decisive."""


def _on_timer(signum, frame):  # noqa: ARG001
    global _expired
    _expired = True
    raise BudgetExceeded


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _budgeted(budget_s: float, fn):
    """fn() under `budget_s` seconds of CPU time; ('ok', value) | ('budget', None) | ('memory', None) |
    ('error', None). A call that swallowed the timer's exception still counts as over budget."""
    global _expired, last_cpu_s
    _expired = False
    started = _cpu_seconds()
    soft = math.ceil(started + budget_s) + 1
    _, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))
    signal.setitimer(signal.ITIMER_PROF, budget_s, 0.01)
    try:
        try:
            value = fn()
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0, 0)
            last_cpu_s = _cpu_seconds() - started
    except BudgetExceeded:
        return "budget", None
    except MemoryError:
        return "memory", None
    except RecursionError:
        return "error", None
    except Exception:  # noqa: BLE001 - a scorer that fails on an answer scores it 0, on every party alike
        return "error", None
    if _expired:
        return "budget", None
    return "ok", value


# --- scorers -------------------------------------------------------------------------------------

_MATH = {}


def _math_modules():
    if not _MATH:
        from math_verify import LatexExtractionConfig, parse, verify

        _MATH.update(parse=parse, verify=verify, config=[LatexExtractionConfig(boxed_match_priority=0)])
    return _MATH


def _parse_boxed(text: str):
    m = _math_modules()
    # math-verify's own timeouts are signal.alarm (wall clock, main thread only): off; the budget is ours
    return m["parse"]("\\boxed{" + text + "}", extraction_config=m["config"], parsing_timeout=None)


def _score_math(gold: str, answer: str) -> bool:
    m = _math_modules()
    parsed_gold, parsed_answer = _parse_boxed(gold), _parse_boxed(answer)
    if not parsed_gold or not parsed_answer:
        return False
    return bool(m["verify"](parsed_gold, parsed_answer, timeout_seconds=None))


_GYM: dict[str, object] = {}


def _gym_dataset(request: dict):
    key = json.dumps([request["dataset"], request["seed"], request["size"], request["params"]], sort_keys=True)
    if key not in _GYM:
        import reasoning_gym

        _GYM[key] = reasoning_gym.create_dataset(request["dataset"], seed=request["seed"], size=request["size"],
                                                 **request["params"])
    return _GYM[key]


# --- the process ---------------------------------------------------------------------------------

def _refuse(*_args, **_kwargs):
    raise PermissionError("the scoring sandbox starts no processes")


def _lock_down(memory_bytes: int) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    try:
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))  # not enforced for root; the patches below are
    except (ValueError, OSError):
        pass
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or memory_bytes <= hard:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, hard))
    import subprocess

    for name in ("system", "popen", "fork", "forkpty", "execv", "execve", "execl", "execle", "execlp", "execlpe",
                 "execvp", "execvpe", "spawnv", "spawnve", "spawnl", "spawnle", "posix_spawn", "posix_spawnp",
                 "kill", "killpg"):
        if hasattr(os, name):
            setattr(os, name, _refuse)
    subprocess.Popen.__init__ = _refuse  # type: ignore[method-assign]


def _warm(kinds: list[str]) -> None:
    """Import and exercise what the scorers use before the limits apply (lazy imports need files)."""
    if "math" in kinds:
        _score_math("\\frac{1}{2}", "0.5")
        _score_math("2(x+1)", "2x+2")
        _score_math("[0,1)", "[0, 1)")
    if "gym" in kinds:
        import reasoning_gym  # noqa: F401


def main() -> None:
    request_fd, reply_fd = int(sys.argv[1]), int(sys.argv[2])
    config = json.loads(sys.argv[3])
    cpu_budget_s, prepare_budget_s = float(config["cpu_budget_s"]), float(config["prepare_budget_s"])
    sys.dont_write_bytecode = True
    sys.set_int_max_str_digits(4300)
    logging.disable(logging.CRITICAL)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    requests = os.fdopen(request_fd, "r", encoding="utf-8")
    replies = os.fdopen(reply_fd, "w", encoding="utf-8")
    signal.signal(signal.SIGPROF, _on_timer)

    def reply(obj: dict) -> None:
        replies.write(json.dumps(obj) + "\n")
        replies.flush()

    try:
        _warm(config["kinds"])
    except Exception as exc:  # noqa: BLE001
        reply({"ready": False, "why": f"{type(exc).__name__}: {exc}"[:500]})
        return
    _lock_down(int(config["memory_bytes"]))
    reply({"ready": True})

    for line in requests:
        try:
            request = json.loads(line)
            op = request["op"]
        except (ValueError, KeyError, TypeError):
            reply({"ok": False, "why": "error"})
            continue
        if op == "math":
            status, full = _budgeted(cpu_budget_s, lambda: _score_math(request["gold"], request["answer"]))
            reply({"ok": True, "full": bool(full), "cpu_s": last_cpu_s} if status == "ok"
                  else {"ok": False, "why": status})
            if status in ("budget", "memory"):
                return  # an interrupted computation may leave caches half-built: the next call gets a fresh process
        elif op == "gym":
            status, dataset = _budgeted(prepare_budget_s, lambda: _gym_dataset(request))
            if status != "ok":
                reply({"ok": False, "why": "prepare-" + status})
                continue
            entry = pickle.loads(base64.b64decode(request["entry"]))
            status, score = _budgeted(cpu_budget_s, lambda: dataset.score_answer(request["answer"], entry))
            if status != "ok":
                reply({"ok": False, "why": status})
                if status in ("budget", "memory"):
                    return
                continue
            try:
                value = float(score)
            except (TypeError, ValueError, OverflowError):
                reply({"ok": False, "why": "error"})
                continue
            reply({"ok": True, "full": value == 1.0, "score": repr(value), "cpu_s": last_cpu_s})
        elif op == "ping":
            reply({"ok": True})
        else:
            reply({"ok": False, "why": "error"})


if __name__ == "__main__":
    main()
