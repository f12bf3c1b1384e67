"""The scoring sandbox's processes (started by tasks.sandbox; never imported by the roles).

Run as a script with the standard library only at the top: it must not import the `tasks` package (and
through it pydantic, transformers). Two processes live here:

- the **template**, started once per sandbox: it isolates itself, imports and warms the scorer libraries (and
  builds its reasoning-gym dataset) while it can still read them, then locks itself down (below) and, for a
  verifiers environment, only then imports the environment's package and probes its rubric. It never runs a
  scorer on a worker's text: it answers the party's requests by handing each to a scorer child;
- a **scorer child**, forked from the template for each scoring session (tasks.sandbox.scoring_session: one
  rollout file), so nothing a completion does to the interpreter (a replaced `float`, a poisoned cache)
  reaches another file. It inherits the warmed libraries (a fork costs milliseconds, not an import).

The template speaks JSON lines on two pipes it is handed (file descriptors in argv), then points
stdin/stdout/stderr at /dev/null so that a scorer's prints cannot corrupt the protocol. Requests carry a
`session` (an integer); a new session gets a new child.

  {"op": "math", "gold": str, "answer": str}                      -> {"ok": true, "full": bool}
  {"op": "gym", "entry": base64 pickle, "answer": str}              -> {"ok": true, "full": bool, "score": str}
  {"op": "env-dataset"}                     -> {"ok": true, "rows": [[prompt, answer], ..], "source": "0x<sha256>"}
  {"op": "env", "row": int, "completion": str}                      -> {"ok": true, "reward": float.hex(total)}
  {"op": "ping"}                                                    -> {"ok": true, "isolation": {..}}
The entry is the parent's own dataset entry (trusted: the parent built it), so the child scores exactly the
problem the parent posed; the template built the dataset object itself from the sandbox's config. Failures:
{"ok": false, "why": "budget" | "memory" | "error" | "network" | "refused" | "wall" | "killed"} (the caller pays
tasks.rewards.UNSCORABLE); after any of them but "error" the child is gone and the next call gets a fresh one.

The boundary (docs/protocol.md, "Threat model"), in the order it is built:
1. A network namespace, first thing (as another user than root, inside a new user namespace): it has only a
   loopback, down, so there is no route anywhere, whatever the code does.
2. After the warm-up: as root, a new mount namespace with every mount remounted read-only; the template drops to uid/gid 65534 (no groups, no capabilities, no new
   privileges); hard rlimits equal soft ones for address space (RLIMIT_AS), file size (0) and core dumps (0);
   an audit hook (sys.addaudithook, which no Python code can remove) refuses and records every socket other
   than a local socket pair, every connect/bind/send/name look-up, every write-open, remove, rename, mkdir,
   chmod, every process start or signal, every ctypes call, and every import of a module not already loaded.
3. In each scorer child, on top: RLIMIT_NPROC 0 (no process or thread can start: enforced for a non-root
   uid), RLIMIT_CPU hard = soft (a backstop past the child's whole allowance), and for math and reasoning-gym
   no `compile`/`exec`/`eval` (an evaluator reached by an answer is refused and recorded) but sympy's
   generator of monomial code (`_CODE_BUILDERS`), which builds from an integer, never from text.
The CPU budget of one call is kept by the template, outside the child: it reads the child's CPU time from
/proc while it waits and SIGKILLs it past the budget, so no signal mask, handler or rlimit the scorer sets
can lift it. A call during which anything was refused is answered "network" (a socket attempt) or "refused".
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import pickle
import random
import resource
import select
import signal
import sys
import time
import types

NOBODY = 65534
"""The uid and gid the template drops to when started as root."""
CHILD_CALLS = 256
"""Calls one scorer child answers before the template forks a fresh one (the child's RLIMIT_CPU allowance)."""
POLL_S = 0.02
"""How often the template reads a busy child's CPU time."""

_CLONE_NEWNS, _CLONE_NEWUSER, _CLONE_NEWNET = 0x00020000, 0x10000000, 0x40000000
_MS = {"rdonly": 1, "nosuid": 2, "nodev": 4, "noexec": 8, "remount": 32, "bind": 4096, "rec": 16384,
       "private": 1 << 18, "noatime": 1024, "nodiratime": 2048, "relatime": 1 << 21}
_PR_SET_NO_NEW_PRIVS = 38


# --- isolation -----------------------------------------------------------------------------------

def _remount_read_only(libc) -> bool:
    """Every mount of this (new, private) mount namespace read-only; False when one could not be."""
    if libc.mount(None, b"/", None, _MS["rec"] | _MS["private"], None) != 0:
        return False
    with open("/proc/self/mountinfo", encoding="utf-8") as lines:
        mounts = [(line.split()[4], line.split()[5]) for line in lines]
    every = True
    for point, options in mounts:
        path = point.encode().decode("unicode_escape").encode("latin-1")  # mountinfo escapes spaces as \040
        flags = _MS["remount"] | _MS["bind"] | _MS["rdonly"]
        for option in options.split(","):
            flags |= _MS.get(option, 0) if option in ("nosuid", "nodev", "noexec", "noatime", "nodiratime",
                                                        "relatime") else 0
        if libc.mount(None, path, None, flags, None) != 0:
            every = False
    return every


def isolate() -> dict:
    """Enter the namespaces (module docstring, step 1); what was obtained, for the ready reply."""
    import ctypes

    facts = {"netns": False, "readonly": False, "uid": os.geteuid()}
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return facts
    if os.geteuid() == 0:
        facts["netns"] = libc.unshare(_CLONE_NEWNET) == 0
    else:
        facts["netns"] = libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0
    libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    return facts


def _drop_privileges() -> int:
    """As root: uid and gid 65534, no supplementary groups (and so no capabilities). The uid it runs as."""
    if os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
    return os.geteuid()


def _hard_limit(which: int, value: int) -> None:
    """soft = hard = value (lowering only: a limit below the current hard one)."""
    _, hard = resource.getrlimit(which)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(which, (value, value))


class NetworkRefused(OSError):
    """What every network entry point raises in the scoring sandbox."""


attempts: list[str] = []
"""What the audit hook refused since the last call began ("network: …", "process: …", "file: …", "code: …")."""
_POLICY = {"locked": False, "child": False, "code": True, "imports": True}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC
_NETWORK = frozenset({"socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
                      "socket.gethostbyname", "socket.gethostbyaddr", "socket.getnameinfo", "socket.sethostname"})
_PROCESS = frozenset({"os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.forkpty", "subprocess.Popen",
                      "pty.spawn", "os.startfile"})
_CHILD_PROCESS = frozenset({"os.fork", "os.kill", "os.killpg", "signal.pthread_kill"})
"""What the template does itself (fork and kill its scorer children) and a scorer child may not."""
_FILES = frozenset({"os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown", "os.link",
                    "os.symlink", "os.truncate", "os.utime", "os.setxattr", "os.removexattr", "os.chflags",
                    "os.lchflags", "shutil.rmtree", "shutil.copyfile", "shutil.move", "os.mkfifo", "os.mknod"})


_CODE_BUILDERS = frozenset({("sympy/polys/monomials.py", "_build")})
"""The only places a math or reasoning-gym scorer child may compile code: sympy's polynomial rings generate
their monomial operations from the number of generators (an integer), never from text."""


def _refused(kind: str, what: str, error: type[BaseException] = PermissionError):
    attempts.append(f"{kind}: {what}")
    raise error(f"the scoring sandbox refuses {what}")


def _audit(event: str, args: tuple) -> None:
    """The audit hook (module docstring, step 2): refuse and record; installed once, never removed."""
    if not _POLICY["locked"]:
        return
    if event == "open":
        path, mode, flags = args
        if isinstance(path, int):
            return  # an inherited descriptor (the child's reply pipe): no file is opened
        if (flags or 0) & _WRITE_FLAGS or (isinstance(mode, str) and any(c in mode for c in "wax+")):
            _refused("file", f"writing {path!r}")
    elif event == "socket.__new__":
        import socket

        if args[1] != socket.AF_UNIX:  # asyncio's event loop wakes itself through a local socket pair
            _refused("network", f"a socket of family {args[1]}", NetworkRefused)
    elif event in _NETWORK:
        _refused("network", event, NetworkRefused)
    elif event in _PROCESS or (event in _CHILD_PROCESS and _POLICY["child"]):
        _refused("process", event)
    elif event in _FILES:
        _refused("file", event)
    elif event.startswith("ctypes."):
        _refused("process", event)
    elif event == "import" and not _POLICY["imports"]:
        attempts.append(f"import: {args[0]}")
        raise ImportError(f"the scoring sandbox imports nothing new ({args[0]})")
    elif event in ("compile", "exec") and not _POLICY["code"]:
        caller = sys._getframe(1).f_code
        if (caller.co_filename.rsplit("site-packages/", 1)[-1], caller.co_name) not in _CODE_BUILDERS:
            _refused("code", f"{event} (an evaluator) from {caller.co_name}")


def lock_down(memory_bytes: int, isolation: dict) -> None:
    """Step 2 of the boundary, in the template; records in `isolation` what it obtained."""
    if os.geteuid() == 0:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        isolation["readonly"] = libc.unshare(_CLONE_NEWNS) == 0 and _remount_read_only(libc)
    _hard_limit(resource.RLIMIT_CORE, 0)
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing
    _hard_limit(resource.RLIMIT_FSIZE, 0)
    isolation["uid"] = _drop_privileges()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard == resource.RLIM_INFINITY or memory_bytes <= hard:
        _hard_limit(resource.RLIMIT_AS, memory_bytes)
    sys.addaudithook(_audit)
    _POLICY["locked"] = True


def _enter_child(cpu_allowance_s: float, code: bool) -> None:
    """Step 3, in a freshly forked scorer child."""
    _POLICY.update(child=True, code=code, imports=False)
    _hard_limit(resource.RLIMIT_NPROC, 0)
    _hard_limit(resource.RLIMIT_CPU, math.ceil(_cpu_seconds() + cpu_allowance_s) + 1)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_of(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) of process `pid`, from /proc; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


# --- scorers -------------------------------------------------------------------------------------

_MATH = {}


def _exact_number(text: str):
    """A number token of an answer as a sympy number, parsed here: digits (and one decimal point) only.

    math-verify's LaTeX converter turns number tokens into numbers with `sympy.Number(text)`, which hands the
    string to `sympify` and so to `parse_expr`, an evaluator. The grammar's token holds digits only, but no
    worker text may reach an evaluator: these parse it themselves, to the same value (`Integer`, or the `Float`
    that parse_expr's auto_number would build), and refuse anything else."""
    import re

    import sympy

    if re.fullmatch(r"[0-9]+", text, re.ASCII):
        return sympy.Integer(int(text))
    if re.fullmatch(r"[0-9]*\.[0-9]+|[0-9]+\.[0-9]*", text, re.ASCII):
        return sympy.Float(text)
    raise ValueError(f"not a number token: {text[:40]!r}")


def _math_modules():
    if not _MATH:
        import latex2sympy2_extended.latex2sympy2 as converter
        import math_verify.parser
        from math_verify import LatexExtractionConfig, parse, verify

        def parse_number(self, text):  # noqa: ARG001 - replaces the converter's method (see _exact_number)
            text = text.replace(",", "")
            return _exact_number(text.lstrip("0") or "0" if text.isdigit() else text)

        def convert_number(number: str):
            if "," in number and number.startswith("0"):
                number = number.replace(",", ".")
            return _exact_number(number.translate(str.maketrans("", "", ", ")).lstrip("0") or "0")

        converter._Latex2Sympy.parse_number = parse_number
        converter.convert_number = convert_number
        math_verify.parser.Number = _exact_number  # its only use builds a number from matched digits
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


def _build_gym(config: dict) -> None:
    """The template's reasoning-gym dataset (trusted input: the run spec's name, seed and parameters)."""
    import reasoning_gym

    _GYM["dataset"] = reasoning_gym.create_dataset(config["dataset"], seed=config["seed"], size=config["size"],
                                                   **config["params"])


def _score_gym(entry_b64: str, answer: str) -> dict:
    entry = pickle.loads(base64.b64decode(entry_b64))
    score = _GYM["dataset"].score_answer(answer, entry)
    value = float(score)
    return {"full": value == 1.0, "score": repr(value)}


# --- verifiers environments (tasks.environments) ------------------------------------------------

class EnvironmentRefused(Exception):
    """The environment is not one proofswarm can score: not single-turn, not offline, not deterministic."""


_ENV: dict = {}
_CLIENT_MODULES = ("openai", "anthropic", "httpx", "httpx2", "aiohttp", "requests", "urllib3", "websockets", "grpc")
PROBE_ROWS = 3
"""Dataset rows whose probe completions (the row's answer, an empty reply, "0") `_probe` scores at start."""


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
    except EnvironmentRefused:
        raise
    except Exception as exc:  # noqa: BLE001 - its import-time code runs under the sandbox's limits
        raise EnvironmentRefused(f"cannot load it inside the scoring sandbox ({type(exc).__name__}: {exc})"[:300]) \
            from None
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


def _score_env(row: int, completion: str) -> dict:
    import asyncio

    task = _ENV["tasks"][row]
    trace = _new_trace(task, completion)
    random.seed(0)  # a rubric drawing unseeded random numbers draws the same ones on every party
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(0)
    asyncio.run(task.score(trace))
    if any(value is None for value in trace.rewards.values()):
        raise ValueError("a reward was not recorded")
    return {"reward": float(trace.reward).hex()}


# --- scorer children ---------------------------------------------------------------------------------

def _answer(request: dict) -> dict:
    """One scoring call inside a scorer child: its reply fields, or raises (caught by `_serve`)."""
    op = request.get("op")
    if op == "math" and isinstance(request.get("gold"), str) and isinstance(request.get("answer"), str):
        return {"full": _score_math(request["gold"], request["answer"])}
    if op == "gym" and "dataset" in _GYM and isinstance(request.get("answer"), str):
        return _score_gym(request["entry"], request["answer"])
    if op == "env" and _ENV:
        row = request.get("row")
        if isinstance(row, int) and not isinstance(row, bool) and 0 <= row < len(_ENV["tasks"]) and isinstance(
                request.get("completion"), str):
            return _score_env(row, request["completion"])
    raise ValueError("not a scoring request")


def _serve(requests, replies) -> None:
    """A scorer child's loop: one reply line per request line, until the template closes the pipe."""
    for line in requests:
        attempts.clear()
        started = _cpu_seconds()
        try:
            fields, status = _answer(json.loads(line)), "ok"
        except MemoryError:
            fields, status = {}, "memory"
        except BaseException:  # noqa: BLE001 - a scorer that fails (or exits) on an answer scores it 0, everywhere
            fields, status = {}, "error"
        if attempts:
            status = "network" if any(a.startswith("network") for a in attempts) else "refused"
        reply = ({"ok": True, **fields} if status == "ok" else {"ok": False, "why": status})
        reply["cpu_s"] = _cpu_seconds() - started
        if status != "ok":
            reply["attempts"] = attempts[:4]
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
        if status in ("memory", "refused", "network"):
            return  # whatever the call left behind dies with this child


class Children:
    """The template's scorer children: one per session, replaced after a failure; the CPU budget kept here."""

    def __init__(self, cpu_budget_s: float, wall_limit_s: float, code: bool, closing: tuple[int, ...]) -> None:
        self.cpu_budget_s, self.wall_limit_s, self.code = cpu_budget_s, wall_limit_s, code
        self.closing = closing  # the template's own pipes to the party: a child must not hold them
        self.pid = 0
        self.session: object = None
        self.calls = 0
        self.started = 0
        self._to = self._from = -1
        self._buffer = b""

    def _fork(self, session: object) -> None:
        self.stop()
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the scorer child
            try:
                for fd in (*self.closing, down_w, up_r):
                    os.close(fd)
                _enter_child(CHILD_CALLS * self.cpu_budget_s, self.code)
                _serve(os.fdopen(down_r, "r", encoding="utf-8"), os.fdopen(up_w, "w", encoding="utf-8"))
            finally:
                os._exit(0)
        os.close(down_r)
        os.close(up_w)
        self.pid, self.session, self.calls, self.started = pid, session, 0, self.started + 1
        self._to, self._from, self._buffer = down_w, up_r, b""

    def stop(self) -> int:
        """Kill and reap the current child (if any); its wait status (a child that had already ended keeps its own)."""
        if not self.pid:
            return 0
        for fd in (self._to, self._from):
            os.close(fd)
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _, status = os.waitpid(self.pid, 0)
        self.pid = 0
        return status

    def call(self, session: object, request: dict) -> dict:
        """The reply of a child of `session` to `request` (a fresh child for a new session)."""
        if not self.pid or session != self.session or self.calls >= CHILD_CALLS:
            self._fork(session)
        self.calls += 1
        try:
            os.write(self._to, (json.dumps(request) + "\n").encode())
        except OSError:
            self.stop()
            return {"ok": False, "why": "killed"}
        reply = self._await()
        if not reply.get("ok") and reply.get("why") != "error":
            self.stop()
        return reply

    def _await(self) -> dict:
        cpu_start = _cpu_of(self.pid) or 0.0
        deadline = time.monotonic() + self.wall_limit_s
        while b"\n" not in self._buffer:
            readable, _, _ = select.select([self._from], [], [], POLL_S)
            if readable:
                chunk = os.read(self._from, 1 << 16)
                if not chunk:
                    return {"ok": False, "why": self._death()}
                self._buffer += chunk
                continue
            cpu = _cpu_of(self.pid)
            if cpu is None:
                return {"ok": False, "why": self._death()}
            if cpu - cpu_start > self.cpu_budget_s:
                return {"ok": False, "why": "budget"}
            if time.monotonic() > deadline:
                return {"ok": False, "why": "wall"}
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            reply = json.loads(line)
        except ValueError:
            return {"ok": False, "why": "killed"}
        return reply if isinstance(reply, dict) else {"ok": False, "why": "killed"}

    def _death(self) -> str:
        """Why the child ended without a reply: its RLIMIT_CPU ("budget") or anything else ("killed")."""
        status = self.stop()
        killed_by = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        return "budget" if killed_by in (signal.SIGKILL, signal.SIGXCPU) else "killed"


def _probe(children: Children) -> None:
    """Refuse a rubric whose scores are not a function of the completion alone (tasks.environments). The probe
    cases (three rows' reference answer, an empty reply, "0") are scored by a fresh child in order; then a
    second fresh child makes as many calls as any child ever answers (CHILD_CALLS): random cases, with one round
    of every case in random order at a random point. Every call must return what the first child returned, so
    a rubric that changes after any number of calls a child can reach, or with the order of calls, is refused."""
    cases = [(row, completion) for row in range(min(PROBE_ROWS, len(_ENV["tasks"])))
             for completion in (_ENV["rows"][row][1], "", "0")]
    draw = random.SystemRandom()

    def score(session: str, case: tuple[int, str]) -> dict:
        reply = children.call(session, {"op": "env", "row": case[0], "completion": case[1]})
        why = reply.get("why")
        if why == "network":
            raise EnvironmentRefused("scoring a completion touched the network (a judge model or remote scorer): "
                                     "not deterministic")
        if why in ("budget", "memory", "wall", "killed"):
            raise EnvironmentRefused(f"scoring a probe completion exceeded the scoring {why} budget")
        if why == "refused":
            raise EnvironmentRefused(f"scoring a completion did what the sandbox refuses ({reply['attempts'][0]})")
        return {key: reply.get(key) for key in ("ok", "reward", "why")}

    first = {case: score("probe-first", case) for case in cases}
    extra = CHILD_CALLS - len(cases)
    at = draw.randint(0, extra)
    sequence = [draw.choice(cases) for _ in range(at)] + draw.sample(cases, len(cases)) + [
        draw.choice(cases) for _ in range(extra - at)]
    for calls, case in enumerate(sequence):
        if score("probe-second", case) != first[case]:
            raise EnvironmentRefused(f"it scored the same completion differently after {calls} other calls: its "
                                     "scores depend on call history or order, not deterministic")
    children.stop()


# --- the template ------------------------------------------------------------------------------

_MATH_LAZY_MODULES = ("sympy.tensor.tensor", "sympy.physics.units", "sympy.physics.matrices", "sympy.sets.setexpr",
                      "sympy.sets.handlers.functions", "sympy.sets.handlers.issubset")
"""Modules sympy imports inside functions that math-verify reaches (found by scoring random admitted answers
with imports watched): a scorer child imports nothing, so the template loads them."""


def _warm(kinds: list[str], config: dict) -> None:
    """Import and exercise what the scorers use while files can still be read (nothing new imports later)."""
    if "env" in kinds:
        import asyncio  # noqa: F401

        import verifiers.v1  # noqa: F401 - the library; the environment's own package is imported after lock-down
        from verifiers.v1.utils.version import verifiers_commit

        verifiers_commit()  # a trace's provenance (a `git` look-up, cached): no process starts after lock-down
    if "math" in kinds:
        import importlib

        for name in _MATH_LAZY_MODULES:
            importlib.import_module(name)
        _score_math("\\frac{1}{2}", "0.5")
        _score_math("2(x+1)", "2x+2")
        _score_math("[0,1)", "[0, 1)")
        _score_math("\\sqrt{2}\\pi", "\\pi\\sqrt{2}")
    if "gym" in kinds:
        _build_gym(config["gym"])


def _warm_rubric() -> None:
    """Score the first row's reference answer once in the template, so that what the rubric and verifiers import
    on first use is loaded before imports stop (its result is not used: the probe decides)."""
    if "numpy" in sys.modules:
        import numpy.random  # noqa: F401 - _score_env reseeds it
    try:
        _score_env(0, _ENV["rows"][0][1])
    except Exception:  # noqa: BLE001
        pass
    attempts.clear()


def main() -> None:
    isolation = isolate()
    request_fd, reply_fd = int(sys.argv[1]), int(sys.argv[2])
    config = json.loads(sys.argv[3])
    kinds = config["kinds"]
    sys.dont_write_bytecode = True
    sys.set_int_max_str_digits(4300)
    logging.disable(logging.CRITICAL)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    requests = os.fdopen(request_fd, "r", encoding="utf-8")
    replies = os.fdopen(reply_fd, "w", encoding="utf-8")

    def reply(obj: dict) -> None:
        replies.write(json.dumps(obj) + "\n")
        replies.flush()

    environment = config.get("environment")
    refused = f"environment {environment['package']}: " if environment else ""
    children = Children(float(config["cpu_budget_s"]), float(config["wall_limit_s"]), code="env" in kinds,
                        closing=(request_fd, reply_fd))
    try:
        _warm(kinds, config)
        lock_down(int(config["memory_bytes"]), isolation)
        if environment:
            if not isolation["netns"]:
                raise EnvironmentRefused("this machine gives the scoring process no network namespace (no root and "
                                         "no user namespaces), so a rubric's network access cannot be ruled out")
            network = len(attempts)
            _load_environment(environment)
            if len(attempts) > network:
                raise EnvironmentRefused(f"loading it did what the sandbox refuses ({attempts[network]}); a pool's "
                                         "dataset must be built or shipped locally")
            _warm_rubric()
        _POLICY["imports"] = False
        if environment:
            _probe(children)
    except EnvironmentRefused as exc:
        reply({"ready": False, "refused": True, "why": f"{refused}{exc}"[:500]})
        return
    except Exception as exc:  # noqa: BLE001
        reply({"ready": False, "why": f"{refused}{type(exc).__name__}: {exc}"[:500]})
        return
    reply({"ready": True, "isolation": isolation})

    for line in requests:
        try:
            request = json.loads(line)
            op = request["op"]
        except (ValueError, KeyError, TypeError):
            reply({"ok": False, "why": "error"})
            continue
        if op == "ping":
            reply({"ok": True, "isolation": isolation, "children": children.started})
        elif op == "env-dataset" and _ENV:
            reply({"ok": True, "rows": _ENV["rows"], "source": _ENV["source"]})
        else:
            reply(children.call(request.pop("session", None), request))
    children.stop()


if __name__ == "__main__":
    main()
