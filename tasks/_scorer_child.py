"""The scoring sandbox's child process (started by tasks.sandbox; never imported by the roles).

Run as a script with the standard library only at the top: it must not import the `tasks`
package (and through it pydantic, transformers). It speaks JSON lines on two pipes it is handed
(file descriptors in argv), then points stdin/stdout/stderr at /dev/null so that a scorer's prints
cannot corrupt the protocol.

Requests:
  {"op": "math", "gold": str, "answer": str}                      -> {"ok": true, "full": bool}
  {"op": "gym", "dataset": str, "seed": int, "size": int, "params": {..}, "entry": base64 pickle,
   "answer": str}                                                   -> {"ok": true, "full": bool, "score": str}
  {"op": "env-dataset"}                     -> {"ok": true, "rows": [[prompt, answer], ..], "source": "0x<sha256>"}
  {"op": "env", "row": int, "completion": str}                      -> {"ok": true, "reward": float.hex(total)}
The entry is the parent's own dataset entry (trusted: the parent built it), so the child scores exactly
the problem the parent posed. The "env" requests need a child started with an `environment` (a verifiers
environment, tasks.environments): it is loaded, checked and probed before the child answers "ready", or the
child answers {"ready": false, "refused": true, "why": "environment …: <reason>"}.
Failures: {"ok": false, "why": "budget" | "memory" | "error" | "network"} (the caller pays tasks.rewards.UNSCORABLE);
after "budget" or "memory" the process exits (an interrupted computation may leave library caches
half-built), and the parent starts a fresh one for the next call.

Budgets (argv): every scoring call runs under a CPU-time budget (ITIMER_PROF raises in Python code,
re-firing until the call unwinds; RLIMIT_CPU kills the process if C code runs a second past it) and
the whole process under an address-space limit (RLIMIT_AS). No new processes (RLIMIT_NPROC 0 where
the kernel enforces it, and os/subprocess entry points refuse), no file writes (RLIMIT_FSIZE 0).

No network, from the first line of `main`: the child moves into a new, empty network namespace where the
kernel lets it (unshare(CLONE_NEWNET): root or CAP_SYS_ADMIN; `netns` in the ready reply says whether it did),
and in every case Python's socket entry points (connect, connect_ex, sendto, getaddrinfo and the other name
look-ups, create_connection) refuse with NetworkRefused and record the attempt. A scoring call that attempted
the network is answered "network" however the scorer handled the refusal.
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
import types


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


# --- the network ---------------------------------------------------------------------------------

class NetworkRefused(OSError):
    """What every socket entry point raises in the scoring child."""


network_attempts: list[str] = []
"""The socket calls refused since the last reset (decisive: a scoring call that made one scores "network")."""


def _shut_network() -> bool:
    """Refuse and record every socket entry point; True when the child also got an empty network namespace."""
    import ctypes
    import socket

    netns = False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        netns = libc.unshare(0x40000000) == 0  # CLONE_NEWNET: only a loopback, down
    except (OSError, AttributeError):
        pass

    def refusing(what: str):
        def refuse(*_args, **_kwargs):
            network_attempts.append(what)
            raise NetworkRefused(f"the scoring sandbox has no network ({what})")
        return refuse

    for name in ("getaddrinfo", "gethostbyname", "gethostbyname_ex", "gethostbyaddr", "getnameinfo",
                 "create_connection"):
        setattr(socket, name, refusing(f"socket.{name}"))
    for name in ("connect", "connect_ex", "sendto"):
        setattr(socket.socket, name, refusing(f"socket.{name}"))
    return netns


# --- verifiers environments (tasks.environments) ------------------------------------------------

class EnvironmentRefused(Exception):
    """The environment is not one proofswarm can score: not single-turn, not offline, not deterministic."""


_ENV: dict = {}
_CLIENT_MODULES = ("openai", "anthropic", "httpx", "httpx2", "aiohttp", "requests", "urllib3", "websockets", "grpc")
PROBE_ROWS = 3
"""Dataset rows whose probe completions (the row's answer, an empty reply, "0") are scored twice at start."""


def _is_client(value) -> bool:
    """A model-API or HTTP client object, or a verifiers Judge or model Client."""
    import verifiers.v1 as vf

    if isinstance(value, (vf.Judge, vf.Client)):
        return True
    root = (type(value).__module__ or "").split(".", 1)[0]
    return root in _CLIENT_MODULES and not isinstance(value, (type, types.ModuleType, types.FunctionType))


def _client_in(objects) -> str | None:
    """The name of a client object among the attributes of `objects` (one level, and inside lists and dicts)."""
    for owner in objects:
        try:
            attributes = dict(vars(owner))
        except TypeError:
            continue
        for name, value in attributes.items():
            values = list(value.values()) if isinstance(value, dict) else list(value) if isinstance(
                value, (list, tuple, set)) else [value]
            for item in values:
                if _is_client(item):
                    where = owner.__name__ if isinstance(owner, types.ModuleType) else type(owner).__name__
                    return f"{where}.{name} is a {type(item).__module__}.{type(item).__name__}"
    return None


def _prompt_text(data) -> str:
    """The task's prompt as one text: the system prompt (if any), a blank line, the user's turn."""
    import verifiers.v1 as vf
    from verifiers.v1.types import content_text

    system, prompt = data.system_prompt, data.prompt
    if isinstance(prompt, str):
        user = prompt
    elif isinstance(prompt, list):
        messages = list(prompt)
        if messages and isinstance(messages[0], vf.SystemMessage) and system is None:
            system, messages = content_text(messages[0].content), messages[1:]
        if len(messages) != 1 or not isinstance(messages[0], vf.UserMessage):
            raise EnvironmentRefused("a prompt is not a single user turn (few-shot or multi-message prompts are "
                                     "not single-turn)")
        content = messages[0].content
        if not isinstance(content, str) and any(getattr(part, "type", "text") != "text" for part in content):
            raise EnvironmentRefused("a prompt has non-text content")
        user = content_text(content)
    else:
        raise EnvironmentRefused("a task has no prompt (the user does not open the conversation)")
    return f"{system}\n\n{user}" if system else user


def _needs_runtime(fn) -> bool:
    import inspect

    param = inspect.signature(fn).parameters.get("runtime")
    return param is not None and param.default is inspect.Parameter.empty


def _check_task(task, module: str, seen: set) -> None:
    """The single-turn, offline checks of one task (once per task class and config)."""
    key = (type(task), id(task.config))
    if key in seen:
        return
    seen.add(key)
    kind = type(task).__name__
    _check_plugged(task.config, module)
    if task.NEEDS_CONTAINER:
        raise EnvironmentRefused(f"its task {kind} needs a container")
    if type(task).toolsets(task.config):
        raise EnvironmentRefused(f"its task {kind} has tool servers (not single-turn)")
    if task.config.judges:
        raise EnvironmentRefused(f"its task {kind} is scored by judges (a judge model): not deterministic")
    rewards = task.hooks("reward")
    if not rewards:
        raise EnvironmentRefused(f"its task {kind} has no reward function")
    needing = [fn.__name__ for fn in rewards if _needs_runtime(fn)]
    if needing:
        raise EnvironmentRefused(f"reward {needing[0]} of {kind} needs a runtime (a sandbox or container)")
    modules = []
    for fn in rewards:
        module = sys.modules.get(getattr(fn, "__module__", ""))
        if module is not None:
            modules.append(module)
    client = _client_in([task, task.config, *modules])
    if client:
        raise EnvironmentRefused(f"its rubric can reach a model or network client ({client}): not deterministic")


def _new_trace(task, completion: str):
    import verifiers.v1 as vf
    from verifiers.v1.state import state_cls

    nodes = []
    if task.data.system_prompt:
        nodes.append(vf.MessageNode(message=vf.SystemMessage(content=task.data.system_prompt)))
    prompt = task.data.prompt
    for message in ([vf.UserMessage(content=prompt)] if isinstance(prompt, str) else list(prompt)):
        nodes.append(vf.MessageNode(parent=len(nodes) - 1 if nodes else None, message=message))
    nodes.append(vf.MessageNode(parent=len(nodes) - 1, message=vf.AssistantMessage(content=completion), sampled=True))
    return vf.Trace(task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
                    state=state_cls(type(task))(), agent=vf.AgentInfo(config=vf.AgentConfig(), name="proofswarm"),
                    nodes=nodes)


def _source_digest(module) -> str:
    """sha256 over the files of the imported environment module (its package folder, or its one file): each file's
    path relative to it, a NUL, its size, a NUL, its bytes, in path order; caches (__pycache__, .pyc) aside."""
    import hashlib
    from pathlib import Path

    origin = Path(module.__file__)
    root = origin.parent if origin.name == "__init__.py" else origin
    files = sorted(p for p in (root.rglob("*") if root.is_dir() else [root])
                   if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")
    digest = hashlib.sha256()
    for path in files:
        data = path.read_bytes()
        name = path.relative_to(root).as_posix() if root.is_dir() else path.name
        digest.update(f"{name}\0{len(data)}\0".encode() + data)
    return "0x" + digest.hexdigest()


def _check_plugged(task_config, module: str) -> None:
    """Reward and metric functions plugged through the task config must come from the environment's own
    package (the version the run spec pins), not from another module or a file on this machine."""
    for kind, plugged in (("reward", task_config.rewards), ("metric", task_config.metrics)):
        for name, entry in plugged.items():
            if entry.fn is not None and not (entry.fn.startswith(module + ".") or entry.fn.startswith(module + ":")):
                raise EnvironmentRefused(f"its {kind} {name} is plugged from {entry.fn!r}, outside the pinned "
                                         f"package {module}")


def _load_environment(config: dict) -> None:
    """Import, build and check the environment (module docstring of tasks.environments); EnvironmentRefused."""
    from importlib import metadata

    package, args = config["package"], config["args"]
    if config.get("location") and config["location"] not in sys.path:
        sys.path.append(config["location"])
    for name, pinned in (("verifiers", config["verifiers"]), (package, config["version"])):
        try:
            found = metadata.version(name)
        except metadata.PackageNotFoundError:
            found = None
        if found != pinned:
            raise EnvironmentRefused(f"the scoring process finds {name} {found}, the run spec pins {pinned}")
    import pydantic
    import verifiers.v1 as vf

    try:
        env_class = vf.environment_class(package)
        if env_class is not vf.SingleAgentEnv:
            raise EnvironmentRefused(f"it exports its own Env class {env_class.__name__} (not single-turn)")
        taskset_config = vf.taskset_config_type(package).model_validate({**args, "id": package})
        taskset = vf.load_taskset(taskset_config)
    except ModuleNotFoundError as exc:
        raise EnvironmentRefused(f"cannot import it ({exc})") from None
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise EnvironmentRefused(f"bad args: {where}: {first['msg']}") from None
    if not taskset.bounded:
        raise EnvironmentRefused("its dataset is infinite (a pool needs a fixed dataset)")
    if type(taskset).toolsets(taskset_config):
        raise EnvironmentRefused("it has tool servers (not single-turn)")
    client = _client_in([taskset, taskset_config])
    if client:
        raise EnvironmentRefused(f"it holds a model or network client ({client}): not deterministic")
    tasks = list(taskset)
    if not tasks:
        raise EnvironmentRefused("its dataset is empty")
    module = package.replace("-", "_").lower()
    seen: set = set()
    rows = []
    for task in tasks:
        _check_task(task, module, seen)
        answer = getattr(task.data, "answer", "")
        rows.append([_prompt_text(task.data), answer if isinstance(answer, str) else ""])
    _ENV.update(tasks=tasks, rows=rows, source=_source_digest(sys.modules[module]))
    _new_trace(tasks[0], "")  # the trace's provenance (verifiers' git commit look-up) is cached before lock-down


def _score_env(row: int, completion: str) -> float:
    import asyncio
    import random

    task = _ENV["tasks"][row]
    trace = _new_trace(task, completion)
    random.seed(0)  # a rubric drawing unseeded random numbers draws the same ones on every party
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(0)
    asyncio.run(task.score(trace))
    if any(value is None for value in trace.rewards.values()):
        raise ValueError("a reward was not recorded")
    return float(trace.reward)


def _budgeted_env(budget_s: float, row: int, completion: str) -> tuple[str, str | None]:
    """('ok', float.hex(total)) | ('network', None) | ('budget' | 'memory' | 'error', None)."""
    network_attempts.clear()
    status, value = _budgeted(budget_s, lambda: _score_env(row, completion))
    if network_attempts:
        return "network", None
    return status, (value.hex() if status == "ok" else None)


def _probe(budget_s: float) -> None:
    """Score each probe completion twice; a network attempt, an over-budget call or two different results
    refuse the environment (tasks.environments)."""
    cases = [(row, completion) for row in range(min(PROBE_ROWS, len(_ENV["tasks"])))
             for completion in (_ENV["rows"][row][1], "", "0")]
    rounds = []
    for _ in range(2):
        results = []
        for row, completion in cases:
            network_attempts.clear()
            status, value = _budgeted_env(budget_s, row, completion)
            if status == "network":
                raise EnvironmentRefused("scoring a completion touched the network (a judge model or remote "
                                         "scorer): not deterministic")
            if status in ("budget", "memory"):
                raise EnvironmentRefused(f"scoring a probe completion exceeded the scoring {status} budget")
            results.append((status, value))
        rounds.append(results)
    if rounds[0] != rounds[1]:
        raise EnvironmentRefused("it scored the same completion differently twice: not deterministic")


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


def _warm(kinds: list[str], environment: dict | None) -> None:
    """Import and exercise what the scorers use before the limits apply (lazy imports need files)."""
    if "env" in kinds:
        network_attempts.clear()
        _load_environment(environment)
        if network_attempts:
            raise EnvironmentRefused(f"loading it touched the network ({network_attempts[0]}); a pool's dataset "
                                     "must be built or shipped locally")
    if "math" in kinds:
        _score_math("\\frac{1}{2}", "0.5")
        _score_math("2(x+1)", "2x+2")
        _score_math("[0,1)", "[0, 1)")
    if "gym" in kinds:
        import reasoning_gym  # noqa: F401


def main() -> None:
    netns = _shut_network()
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

    environment = config.get("environment")
    refused = f"environment {environment['package']}: " if environment else ""
    try:
        _warm(config["kinds"], environment)
    except EnvironmentRefused as exc:
        reply({"ready": False, "refused": True, "why": f"{refused}{exc}"[:500]})
        return
    except Exception as exc:  # noqa: BLE001
        reply({"ready": False, "why": f"{refused}{type(exc).__name__}: {exc}"[:500]})
        return
    _lock_down(int(config["memory_bytes"]))
    if "env" in config["kinds"]:
        try:
            _probe(cpu_budget_s)
        except EnvironmentRefused as exc:
            reply({"ready": False, "refused": True, "why": f"{refused}{exc}"[:500]})
            return
    reply({"ready": True, "netns": netns})

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
        elif op == "env-dataset" and _ENV:
            reply({"ok": True, "rows": _ENV["rows"], "source": _ENV["source"]})
        elif op == "env" and _ENV:
            row = request.get("row")
            if not isinstance(row, int) or not 0 <= row < len(_ENV["tasks"]) or not isinstance(
                    request.get("completion"), str):
                reply({"ok": False, "why": "error"})
                continue
            status, value = _budgeted_env(cpu_budget_s, row, request["completion"])
            reply({"ok": True, "reward": value, "cpu_s": last_cpu_s} if status == "ok" else {"ok": False, "why": status})
            if status in ("budget", "memory"):
                return
        elif op == "ping":
            reply({"ok": True})
        else:
            reply({"ok": False, "why": "error"})


if __name__ == "__main__":
    main()
