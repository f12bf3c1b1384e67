"""No worker's bytes ever run as code (issue 42): the attacks of the security review, replayed.

- Answers that were code in a scorer: refused datasets (tasks.gym), and the same answers sent straight to a scorer
  that would evaluate them are refused by the sandbox (no evaluator runs; nothing is created).
- State never crosses files: each scoring session is a fresh process; the attacker's file is rejected and the honest
  file that follows is accepted by the same validator process.
- The sandbox is a boundary: rubric code that starts a process, lifts its limits, truncates or removes a file,
  opens a raw `_socket`, calls libc through ctypes or masks the CPU budget does no harm, is recorded, and scores 0.
- Every scorer path admitted reaches no evaluator (its source, statically; scoring answers with evaluators watched).
"""

from __future__ import annotations

import base64
import inspect
import json
import os
import pickle
import re
import socket
import subprocess
import sys
import tempfile
import types
from pathlib import Path

import pytest

import reasoning_gym
from inference.tiny import build_char_tokenizer
from proofs.assignment import assign_prompts
from protocol.digest import Digest
from protocol.runspec import RunSpec, SamplingSpec
from protocol.submission import SubmissionBinding
from protocol.verdicts import Reason
from tasks import TaskSpec, build_task
from tasks.base import TaskError, assignment_space
from tasks.environments import EnvironmentSpec
from tasks.gym import SCORED_GYM_DATASETS
from tasks.sandbox import ScoringSandbox, scoring_session
from tests.support.paths import ROOT
from tests.integration.test_reward_hacking import POOL_SEED, WORKER, ScriptedBackend, _validator
from worker.rollouts import make_rollouts


# --- answers that were code --------------------------------------------------------------------------------

REFUSED = ["n_queens", "string_insertion", "spiral_matrix", "binary_matrix", "bitwise_arithmetic", "number_sorting",
           "countdown", "puzzle24", "polynomial_multiplication", "simple_integration", "intermediate_integration",
           "codeio", "bf", "rubiks_cube", "propositional_logic", "polynomial_equations", "simple_equations",
           "advanced_geometry", "composite"]


@pytest.mark.parametrize("name", REFUSED)
def test_datasets_whose_scorer_evaluates_the_answer_are_refused_by_name(name):
    with pytest.raises(TaskError, match=f"reasoning-gym dataset '{name}' is not scored by proofswarm"):
        build_task(TaskSpec(name=f"gym:{name}", params={"size": 2, "test_size": 1}))


def _code_answers(marker: Path) -> dict[str, list[str]]:
    """The review's answer shapes: calls through parentheses and newlines, __import__, strings built without
    quotes, walrus; each would create `marker` (or start `sh`) if it ran."""
    touch = f"__import__('os').system('touch {marker}')"
    return {
        "n_queens": [touch, f"(__import__)('subprocess').run(['sh','-c','touch {marker}'])",
                     "(f:=__import__)\n('os').system(int.to_bytes(115*256+104,2,'big').decode())"],
        "string_insertion": [touch, "__builtins__.__dict__.__setitem__('float', lambda *a: 1.0)"],
        "intermediate_integration": [f"Function(\"x\")(x) + {touch}", "exec(chr(105)+chr(109))"],
    }


@pytest.mark.parametrize("dataset", ["n_queens", "string_insertion", "intermediate_integration"])
def test_code_answers_sent_straight_to_an_evaluating_scorer_run_nothing(dataset, tmp_path):
    """Past tasks.gym's refusal (a party running an older allow-list): the scorer child refuses the evaluator."""
    os.chmod(tmp_path, 0o777)  # writable by the sandbox's uid, so that only the sandbox can stop the write
    marker = tmp_path / "pwned"
    entry = reasoning_gym.create_dataset(dataset, seed=0, size=1)[0]
    sandbox = ScoringSandbox(("gym",), gym={"dataset": dataset, "seed": 0, "size": 1, "params": {}})
    try:
        for answer in _code_answers(marker)[dataset]:
            reply = sandbox.request({"op": "gym", "entry": base64.b64encode(pickle.dumps(entry)).decode(),
                                     "answer": answer})
            assert not reply.get("full"), (answer, reply)
            if not reply["ok"]:
                assert reply["why"] in ("refused", "error"), reply
        assert not marker.exists()
        # the reference answer afterwards: scored 1 by a fresh child where the scorer needs no evaluator for it;
        # the integration scorer evaluates every answer, the reference too, so it can only be refused
        reply = sandbox.request({"op": "gym", "entry": base64.b64encode(pickle.dumps(entry)).decode(),
                                 "answer": str(entry["answer"])})
        if dataset == "intermediate_integration":
            assert reply["why"] == "refused" and "parse_expr" in reply["attempts"][0], reply
        else:
            assert reply["ok"] and reply["full"], reply
    finally:
        sandbox.close()


def test_the_poisoned_interpreter_dies_with_its_session():
    """A scorer that ran the poison (here: a float that pays everything, set by an evaluating scorer that the
    sandbox refuses) cannot reach a later answer: the refusal ends that child, and a new session has a new one."""
    entry = reasoning_gym.create_dataset("n_queens", seed=0, size=1)[0]
    sandbox = ScoringSandbox(("gym",), gym={"dataset": "n_queens", "seed": 0, "size": 1, "params": {}})
    encoded = base64.b64encode(pickle.dumps(entry)).decode()
    try:
        with scoring_session():
            poison = sandbox.request({"op": "gym", "entry": encoded,
                                      "answer": "[__builtins__.__setitem__('float', lambda *a: 1.0)]"})
            assert not poison["ok"] and poison["why"] == "refused" and "code" in poison["attempts"][0]
            wrong = sandbox.request({"op": "gym", "entry": encoded, "answer": entry["answer"].replace("Q", "_", 1)})
            assert not wrong.get("full"), wrong  # the same session, a fresh child: the poison never ran
        with scoring_session():
            right = sandbox.request({"op": "gym", "entry": encoded, "answer": entry["answer"]})
            assert right["ok"] and right["full"]
    finally:
        sandbox.close()


def test_the_attackers_file_is_rejected_and_the_next_honest_file_accepted_by_the_same_validator():
    task_spec = TaskSpec(name="gym:products", params={"size": 4, "test_size": 2})
    sampling = SamplingSpec(group_size=4, temperature=1.0, max_tokens=160)
    spec = RunSpec(task=task_spec, sampling=sampling, prompts_per_submission=2, pool_seed=POOL_SEED)
    tokenizer = build_char_tokenizer()
    task = build_task(task_spec)
    checker = _validator(spec)

    def file(nonce: int, texts_for):
        binding = SubmissionBinding(chain_id=31337, pool_contract="0x" + "cc" * 20, pool_id=1, worker=WORKER,
                                    step=0, nonce=nonce)
        indices = assign_prompts(spec.pool_seed_bytes, WORKER, nonce, assignment_space(task), 2)
        texts = [text for i in indices for text in texts_for(task.problem(i))]
        return make_rollouts(ScriptedBackend(tokenizer, texts), tokenizer, task, task_spec, indices, sampling,
                             binding, Digest(b"\x01" * 32), spec.pool_seed_bytes)

    poison = ["<answer>__builtins__.__setitem__('float',lambda *a:1.0)</answer>",
              "<answer>(f)(x)</answer>", "<answer>__import__('os').system('sh')</answer>", "<answer>7</answer>"]
    attack = file(5, lambda problem: poison)
    attack.samples[:] = [s.model_copy(update={"reward": 1.0}) for s in attack.samples]  # every answer claims 1
    outcome = checker._assignment_and_rewards(attack, tokenizer)
    assert outcome is not None and outcome.reason == Reason.REWARD

    honest = file(6, lambda problem: [f"<answer>{problem.answer}</answer>", "<answer>1</answer>"] * 2)
    assert sorted({s.reward for s in honest.samples}) == [0.0, 1.0]
    assert checker._assignment_and_rewards(honest, tokenizer) is None


# --- rubric code inside the boundary -------------------------------------------------------------------------

RUBRIC = '''
import ctypes, mmap, os, posix, resource, signal, _socket

import verifiers.v1 as vf

__all__ = ["HostileTaskset"]
VICTIM, MARKER, PORT = {victim!r}, {marker!r}, {port}


def attack(kind):
    """1.0 when the attack did what it meant to; every refusal is swallowed, as a real attacker would."""
    if kind == "SPAWN":
        return float(posix.system("touch " + MARKER) == 0)
    if kind == "FORK":
        pid = os.fork()
        if pid == 0:
            open(MARKER, "w").close()
            os._exit(0)
        return 1.0
    if kind == "RLIMIT":
        resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        block = mmap.mmap(-1, 3 << 30)
        block[-1] = 1
        return 1.0
    if kind == "TRUNC":
        open(VICTIM, "w").close()
        return 1.0
    if kind == "UNLINK":
        os.unlink(VICTIM)
        return 1.0
    if kind == "SOCKET":
        raw = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        raw.connect(("127.0.0.1", PORT))
        return 1.0
    if kind == "CTYPES":
        return float(ctypes.CDLL(None).system(("touch " + MARKER).encode()) == 0)
    if kind == "SPIN":
        signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGPROF, signal.SIGXCPU}})
        signal.signal(signal.SIGXCPU, signal.SIG_IGN)
        _, hard = resource.getrlimit(resource.RLIMIT_CPU)
        resource.setrlimit(resource.RLIMIT_CPU, (hard, hard))
        while True:
            pass
    return 0.0


class HostileData(vf.TaskData):
    answer: str


class HostileTask(vf.Task[HostileData]):
    @vf.reward
    async def hostile(self, trace: vf.Trace) -> float:
        try:
            return attack(trace.last_reply)
        except BaseException:
            return 0.0


class HostileTaskset(vf.Taskset[HostileTask, vf.TasksetConfig]):
    def load(self):
        return [HostileTask(HostileData(prompt="1?", answer="1"), self.config.task) for _ in range(3)]
'''
ATTACKS = ["SPAWN", "FORK", "RLIMIT", "TRUNC", "UNLINK", "SOCKET", "CTYPES", "SPIN"]


def _world_readable_package(name: str, source: str) -> tuple[Path, EnvironmentSpec]:
    """An installed environment package in a folder the sandbox's uid can read (pytest's tmp is root-only)."""
    root = Path(tempfile.mkdtemp(prefix="proofswarm-hostile-"))
    module = name.replace("-", "_")
    (root / module).mkdir()
    (root / module / "__init__.py").write_text(source)
    dist = root / f"{module}-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    for path in [root, *root.rglob("*")]:
        os.chmod(path, 0o777 if path.is_dir() else 0o666)  # writable by anyone: only the sandbox stops a write
    return root, EnvironmentSpec(package=name, version="0.1.0", test_fraction=0)


def _config(spec: EnvironmentSpec, root: Path) -> dict:
    return {"package": spec.package, "version": spec.version, "verifiers": spec.verifiers, "args": spec.args,
            "location": str(root)}


@pytest.fixture(scope="module")
def hostile():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    root = Path(tempfile.mkdtemp(prefix="proofswarm-victims-"))
    os.chmod(root, 0o777)
    victim, marker = root / "victim.txt", root / "pwned"
    root_pkg, spec = _world_readable_package("proofswarm-hostile", RUBRIC.format(
        victim=str(victim), marker=str(marker), port=listener.getsockname()[1]))
    sandbox = ScoringSandbox(("env",), cpu_budget_s=2.0, environment=_config(spec, root_pkg))
    yield sandbox, victim, marker, listener
    sandbox.close()
    listener.close()


@pytest.mark.parametrize("kind", ATTACKS)
def test_rubric_code_inside_the_sandbox_does_no_harm(hostile, kind):
    sandbox, victim, marker, listener = hostile
    victim.write_text("precious")
    os.chmod(victim, 0o666)
    reply = sandbox.request({"op": "env", "row": 0, "completion": kind})
    assert not marker.exists(), kind
    assert victim.read_text() == "precious", kind
    with pytest.raises(BlockingIOError):
        listener.accept()
    if reply["ok"]:  # the rubric swallowed every refusal: then the attack itself must have failed
        assert float.fromhex(reply["reward"]) == 0.0, (kind, reply)
    expected = {"SOCKET": {"network"}, "SPIN": {"budget"}, "RLIMIT": {"ok", "memory"}}.get(kind, {"refused"})
    assert (reply.get("why") or "ok") in expected, (kind, reply)
    if reply.get("why") == "refused":
        assert reply["attempts"], reply
    assert sandbox.isolation["uid"] != 0 and sandbox.isolation["netns"] and sandbox.isolation["readonly"]


def test_environment_code_runs_its_import_time_code_under_the_limits():
    root = Path(tempfile.mkdtemp(prefix="proofswarm-victims-"))
    os.chmod(root, 0o777)
    marker = root / "pwned-at-import"
    source = RUBRIC.format(victim="/nonexistent", marker="/nonexistent", port=9) + (
        f"\nopen({str(marker)!r}, 'w').write('imported as ' + str(os.getuid()))\n")
    root_pkg, spec = _world_readable_package("proofswarm-hostile-import", source)
    sandbox = ScoringSandbox(("env",), environment=_config(spec, root_pkg))
    with pytest.raises(TaskError, match="environment proofswarm-hostile-import: cannot load it inside the scoring"):
        sandbox.request({"op": "ping"})
    assert not marker.exists()


# --- no admitted scorer path reaches an evaluator -------------------------------------------------------------

EVALUATOR = re.compile(r"\beval\(|\bexec\(|\bcompile\(|sympify|parse_expr|literal_eval|\bS\(|sympy|parse_latex|"
                       r"latex2sympy|math_verify")
GENERATION_ONLY = {"basic_arithmetic": "eval_floordiv evaluates the expressions it generates, never an answer"}


def _reachable(fn, seen: set) -> None:
    """The reasoning-gym functions `fn` names in its source, transitively (methods of classes it names too)."""
    if fn in seen:
        return
    seen.add(fn)
    try:
        source = inspect.getsource(fn)
    except (TypeError, OSError):
        return
    scope = getattr(fn, "__globals__", {})
    for name in set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source)):
        value = scope.get(name)
        if isinstance(value, types.FunctionType) and value.__module__.startswith("reasoning_gym"):
            _reachable(value, seen)
        elif isinstance(value, type) and value.__module__.startswith("reasoning_gym"):
            for member in vars(value).values():
                if isinstance(member, types.FunctionType):
                    _reachable(member, seen)


def _source(fn) -> str:
    try:
        return inspect.getsource(fn)
    except (TypeError, OSError):  # a function made at run time (a lambda from a factory): its maker was read
        return ""


def test_no_admitted_gym_scorer_names_an_evaluator_in_its_source():
    from reasoning_gym.factory import DATASETS

    assert SCORED_GYM_DATASETS <= set(DATASETS)
    found = {}
    for name in sorted(SCORED_GYM_DATASETS):
        dataset_class = DATASETS[name][0]
        seen: set = set()
        _reachable(dataset_class.score_answer, seen)
        for method_name, method in vars(dataset_class).items():  # helpers score_answer calls through self
            if isinstance(method, types.FunctionType) and method_name in inspect.getsource(dataset_class.score_answer):
                _reachable(method, seen)
        hits = {hit for fn in seen for hit in EVALUATOR.findall(_source(fn))}
        if name not in GENERATION_ONLY:  # and the whole modules of its classes
            modules = {inspect.getmodule(k) for k in dataset_class.__mro__ if k.__module__.startswith("reasoning_gym")}
            hits |= {hit for module in modules for hit in EVALUATOR.findall(inspect.getsource(module))}
        if hits:
            found[name] = sorted(hits)
    assert found == {}


WATCHED = """
import json, sys, random
sys.path.insert(0, {root!r})
import ast, sympy, sympy.parsing.sympy_parser as sp
sy = sys.modules["sympy.core.sympify"]
import reasoning_gym
import tasks._scorer_child as child

calls = []
watching = [False]

def hook(event, args):
    if watching[0] and event in ("compile", "exec"):
        caller = sys._getframe(1).f_code
        if (caller.co_filename.rsplit("site-packages/", 1)[-1], caller.co_name) not in child._CODE_BUILDERS:
            calls.append(event + " from " + caller.co_name)

def watch(module, name):
    original = getattr(module, name)
    def watched(*args, **kwargs):
        if watching[0] and any(isinstance(a, str) for a in args):
            calls.append(name)
        return original(*args, **kwargs)
    setattr(module, name, watched)

for module, name in [(sp, "parse_expr"), (sy, "sympify"), (sympy, "sympify"), (ast, "literal_eval")]:
    watch(module, name)
singleton = type(sympy.S)  # S("...") is sympify through the singleton registry's __call__
original_call = singleton.__call__
def called(self, *args, **kwargs):
    if watching[0] and any(isinstance(a, str) for a in args):
        calls.append("S")
    return original_call(*args, **kwargs)
singleton.__call__ = called
sys.addaudithook(hook)

def watched(score, *args):
    # score(*args) with the evaluators watched; a scorer that raises on an answer is fine here
    watching[0] = True
    try:
        score(*args)
    except Exception:
        pass
    watching[0] = False

child._warm(["math"], {{}})
names, payloads = json.loads(sys.argv[1]), json.loads(sys.argv[2])
report = {{}}
for name in names:
    dataset = reasoning_gym.create_dataset(name, seed=0, size=3)
    calls.clear()
    for entry in dataset:
        for answer in [str(entry["answer"]), str(entry["answer"])[::-1], str(entry["answer"]) + "0", *payloads]:
            watched(dataset.score_answer, answer, entry)
    if calls:
        report["gym:" + name] = sorted(set(calls))
rng = random.Random(42)
golds = ["2(x+1)", "\\\\frac{{x^2-1}}{{x+1}}", "\\\\sin(x)^2+\\\\cos(x)^2", "[0,1)", "\\\\{{1,2\\\\}}", "x^{{10}}", "\\\\sqrt{{2}}\\\\pi"]
answers = ["2x+2", "(x-1)", "1", "[0, 1)", "\\\\{{2,1\\\\}}", "x^{{9}}\\\\cdot x", "\\\\pi\\\\sqrt{{2}}", "0.5", "9999", "3.25"]
calls.clear()
for gold in golds:
    for answer in answers + payloads:
        watched(child._score_math, gold, answer)
if calls:
    report["math"] = sorted(set(calls))
print(json.dumps(report))
"""
PAYLOADS = ["__import__('os').system('true')", "(f)(x)", "f\n(x)", "(a:=1)", "[x for x in ()]", "lambda: 0",
            "int.to_bytes(29545,2,'big').decode()", "1" * 30, ""]


def test_no_admitted_scorer_path_reaches_an_evaluator_when_it_scores():
    """Every admitted reasoning-gym scorer and the math scorer, on references, near misses and code-shaped answers,
    with eval/exec/compile (audit hook), sympy's parse_expr/sympify/S and ast.literal_eval watched."""
    script = WATCHED.format(root=str(ROOT))
    out = subprocess.run([sys.executable, "-c", script, json.dumps(sorted(SCORED_GYM_DATASETS)), json.dumps(PAYLOADS)],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {}


# --- every parser of worker bytes, fuzzed (bench.fuzz runs the same properties long) ---------------------------

@pytest.mark.parametrize("name", ["rollout files (mutated)", "rollout headers (JSON)", "rollout headers (bytes)",
                                  "completions (final answer)", "answer bounds and literals", "math grader (sandbox)",
                                  "checkpoint manifests"])
def test_parsers_of_worker_bytes_raise_only_their_documented_refusal(name):
    from bench.fuzz import properties

    properties(60 if "sandbox" not in name else 15)[name]()


def test_trainer_init_refuses_a_dataset_whose_scorer_evaluates_in_one_line(tmp_path, capsys):
    import textwrap

    from trainer.main import main as trainer_main

    run_spec = tmp_path / "run.toml"
    run_spec.write_text(textwrap.dedent(f"""
        pool_seed = "{POOL_SEED}"
        [task]
        name = "gym:n_queens"
    """))
    assert trainer_main(["init", "--run-spec", str(run_spec), "--kubo-api", "/ip4/127.0.0.1/tcp/9"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: the pool's task cannot run here: reasoning-gym dataset 'n_queens' is not scored by "
                          "proofswarm: its scorer evaluates the answer as code") and err.count("\n") == 1
