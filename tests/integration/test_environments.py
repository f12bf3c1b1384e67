"""Environments from `verifiers` (issue 28 item 3): a run spec names a single-turn environment by package and
pinned version; worker, validator and trainer load it, take its dataset and score with its rubric, exactly
(float32, bit for bit); an environment at another version, or one whose rubric is not deterministic (a judge,
the network, state carried between calls, a model client), is refused with one line before anything starts.
The environment pool itself trains end to end in tests/e2e/test_environment_pool.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from fractions import Fraction
from importlib import metadata
from pathlib import Path

import pytest
import torch

pytest.importorskip("verifiers", reason="the `envs` extra (make install) brings verifiers")

from inference.tiny import build_char_tokenizer  # noqa: E402
from proofs.assignment import assign_prompts  # noqa: E402
from protocol.digest import Digest  # noqa: E402
from protocol.rollouts import decode_rollouts, encode_rollouts, write_rollout_file  # noqa: E402
from protocol.runspec import RunSpec, SamplingSpec, load_run_spec, with_environment_pinned  # noqa: E402
from protocol.submission import SubmissionBinding  # noqa: E402
from tasks import TaskSpec, build_task  # noqa: E402
from tasks.base import TaskError, assignment_space  # noqa: E402
from tasks.environments import EnvironmentSpec, EnvironmentTask  # noqa: E402
from tasks.rewards import canonical_reward, is_canonical  # noqa: E402
from tests.support.paths import ROOT  # noqa: E402
from tests.integration.test_reward_hacking import POOL_SEED, WORKER, ScriptedBackend, _validator  # noqa: E402
from trainer.filtering import informative_groups  # noqa: E402
from trainer.main import main as trainer_main  # noqa: E402
from trainer.work_source import LocalDirectorySource  # noqa: E402
from worker.rollouts import make_rollouts  # noqa: E402

DIGIT_SORT = EnvironmentSpec(package="proofswarm-digit-sort", version="0.1.0", args={"size": 300})
SPEC = TaskSpec(name="env", environment=DIGIT_SORT)


@pytest.fixture(scope="module")
def digit_sort() -> EnvironmentTask:
    task = build_task(SPEC)
    assert isinstance(task, EnvironmentTask)
    return task


# --- the shipped environment: its dataset and its rubric, exact ------------------------------------------

def test_the_dataset_is_the_environments_own_split_by_prompt_hash(digit_sort):
    assert digit_sort.size("train") + digit_sort.size("test") == 300
    assert 10 < digit_sort.size("test") < 60  # test_fraction 0.1
    p = digit_sort.problem(0)
    digits = p.prompt.removeprefix("sort:").removesuffix("=")
    assert p.prompt == f"sort:{digits}=" and p.answer == "".join(sorted(digits))
    with pytest.raises(TaskError):
        digit_sort.problem(digit_sort.size("train"))


def test_the_rubric_is_the_reward_rounded_once_to_float32(digit_sort):
    p = next(digit_sort.problem(i) for i in range(50) if len(digit_sort.problem(i).answer) == 3)
    a = p.answer
    wrong = "".join("9" if c != "9" else "0" for c in a)
    one_right = a[0] + wrong[1:]  # exact 0, in_place 1/3 of 1/4: a float64 that float32 rounds
    cases = {a: 1.25, a + "\nmore lines": 1.25, f"  {a} ": 1.25, "": 0.0, wrong: 0.0, a + "0": 0.25 * 3 / 4}
    for completion, expected in cases.items():
        assert digit_sort.reward(p, completion, 4) == expected, completion
    partial = digit_sort.reward(p, one_right, 4)
    assert partial == canonical_reward(Fraction(0.25 * (1 / 3))) and is_canonical(partial)
    assert partial != 0.25 * (1 / 3)  # the float64 total itself is not a float32: the rounding is real
    assert digit_sort.reward_matches(p, one_right, 4, partial)
    assert not digit_sort.reward_matches(p, one_right, 4, float(torch.tensor(partial).nextafter(torch.tensor(1.0))))
    assert digit_sort.is_correct(p, a) and not digit_sort.is_correct(p, one_right)


def test_worker_validator_and_trainer_compute_the_same_environment_rewards(digit_sort, tmp_path):
    sampling = SamplingSpec(group_size=4, temperature=1.0, max_tokens=8)
    spec = RunSpec(task=SPEC, sampling=sampling, prompts_per_submission=3, pool_seed=POOL_SEED)
    tokenizer = build_char_tokenizer()
    binding = SubmissionBinding(chain_id=31337, pool_contract="0x" + "cc" * 20, pool_id=1, worker=WORKER, step=0, nonce=4)
    indices = assign_prompts(spec.pool_seed_bytes, WORKER, 4, assignment_space(digit_sort), 3)
    answer = digit_sort.problem(indices[0]).answer
    texts = [answer, answer[::-1], "", answer[:1]]
    batch = make_rollouts(ScriptedBackend(tokenizer, texts), tokenizer, digit_sort, SPEC, indices, sampling,
                          binding, Digest(b"\x01" * 32), spec.pool_seed_bytes)
    worker_rewards = [s.reward for s in batch.samples]
    assert all(is_canonical(r) for r in worker_rewards) and len(set(worker_rewards)) > 2

    data = encode_rollouts(batch)
    validator = _validator(spec)
    assert validator._assignment_and_rewards(decode_rollouts(data), tokenizer) is None
    write_rollout_file(tmp_path / "000.parquet", decode_rollouts(data))
    (item,) = LocalDirectorySource(tmp_path).poll()
    trainer_rewards = torch.tensor([s.reward for s in item.batch.samples]).view(-1, sampling.group_size)
    assert trainer_rewards.flatten().tolist() == worker_rewards
    assert informative_groups(trainer_rewards).keep  # partial credit: informative groups


# --- the run spec ------------------------------------------------------------------------------------------

def test_a_run_spec_names_the_environment_and_other_specs_keep_their_bytes():
    spec = RunSpec(task=SPEC, pool_seed=POOL_SEED)
    again = RunSpec.model_validate_json(spec.model_dump_json())
    assert again == spec and again.task.environment == DIGIT_SORT
    plain = RunSpec(task=TaskSpec(name="sort"), pool_seed=POOL_SEED)
    assert "environment" not in plain.model_dump_json()  # the digests of existing pools' run specs do not move
    with pytest.raises(ValueError, match="environment"):
        TaskSpec(name="env")
    example = load_run_spec(ROOT / "examples" / "run-env.toml").task.environment
    assert (example.package, example.version, example.verifiers) == (
        "proofswarm-digit-sort", metadata.version("proofswarm-digit-sort"), metadata.version("verifiers"))
    with pytest.raises(ValueError, match="environment"):
        TaskSpec(name="sort", environment=DIGIT_SORT)


def test_the_dataset_and_the_code_are_pinned_by_digest_and_others_are_refused(digit_sort):
    assert digit_sort.dataset_digest.startswith("0x") and len(digit_sort.dataset_digest) == 66
    pinned = DIGIT_SORT.model_copy(update={"dataset": digit_sort.dataset_digest})
    assert EnvironmentTask(pinned).size() == digit_sort.size()  # the same scoring child: only the rows are listed
    with pytest.raises(TaskError, match="the dataset built here .* is not the one the run spec pins"):
        EnvironmentTask(DIGIT_SORT.model_copy(update={"dataset": "0x" + "00" * 32}))
    with pytest.raises(TaskError, match="are not the ones the run spec pins.*was changed on this machine"):
        EnvironmentTask(DIGIT_SORT.model_copy(update={"source": "0x" + "00" * 32}))
    spec = RunSpec(task=SPEC, pool_seed=POOL_SEED)
    pinned_spec = with_environment_pinned(spec).task.environment
    assert (pinned_spec.dataset, pinned_spec.source) == (digit_sort.dataset_digest, digit_sort.source_digest)
    assert EnvironmentTask(pinned_spec).size() == digit_sort.size()
    assert with_environment_pinned(RunSpec(task=TaskSpec(name="sort"), pool_seed=POOL_SEED)).task.environment is None


@pytest.mark.parametrize(("change", "message"), [
    ({"version": "0.2.0"}, "pins proofswarm-digit-sort==0.2.0 but 0.1.0 is installed"),
    ({"verifiers": "0.3.9"}, "pins verifiers==0.3.9 but 0.4.0 is installed"),
    ({"package": "proofswarm-no-such-env"}, "needs proofswarm-no-such-env==0.1.0, which is not installed"),
])
def test_another_installed_version_is_refused(change, message):
    spec = DIGIT_SORT.model_copy(update=change)
    with pytest.raises(TaskError, match=message):
        EnvironmentTask(spec)


def test_trainer_init_refuses_an_environment_with_a_judge_in_one_line(tmp_path, capsys):
    """The whole path of a refusal: run spec → the scoring child's load checks → TaskError → exit 2, one line,
    before a model is built or anything is published (the other refusals are the next test's)."""
    run_spec = tmp_path / "run.toml"
    run_spec.write_text(textwrap.dedent(f"""
        pool_seed = "{POOL_SEED}"
        [task]
        name = "env"
        [task.environment]
        package = "proofswarm-digit-sort"
        version = "0.1.0"
        args = {{ size = 5, task = {{ judges = [{{ id = "reference" }}] }} }}
    """))
    assert trainer_main(["init", "--run-spec", str(run_spec), "--kubo-api", "/ip4/127.0.0.1/tcp/9"]) == 2
    err = capsys.readouterr().err
    assert err == ("error: the pool's task cannot run here: environment proofswarm-digit-sort: its task DigitSortTask "
                   "is scored by judges (a judge model): not deterministic\n")


# --- rubrics that are not deterministic are refused -------------------------------------------------------

FAKE = '''
import random
import socket

import verifiers.v1 as vf

__all__ = ["FakeTaskset"]
CALLS = [0]


class FakeData(vf.TaskData):
    answer: str


class FakeTask(vf.Task[FakeData]):
    @vf.reward
    async def right(self, trace: vf.Trace) -> float:
        return 1.0 if trace.last_reply == self.data.answer else 0.0
{extra}

class FakeTaskset(vf.Taskset[FakeTask, vf.TasksetConfig]):
    def load(self):
        return [FakeTask(FakeData(prompt={prompt}, answer="1"), self.config.task) for _ in range(3)]
'''
REWARDS = {
    "network": '''
    @vf.reward
    async def remote(self, trace: vf.Trace) -> float:
        try:  # a remote grader; the refusal is swallowed, the attempt still counts
            socket.create_connection(("127.0.0.1", 9), timeout=0.2).close()
        except OSError:
            pass
        return 0.0''',
    "counter": '''
    @vf.reward
    async def drift(self, trace: vf.Trace) -> float:
        CALLS[0] += 1
        return CALLS[0] / 1000''',
    "client": '''
    @vf.reward
    async def graded(self, trace: vf.Trace) -> float:
        return 0.0 if CLIENT is None else 1.0

import openai  # noqa: E402
CLIENT = openai.AsyncOpenAI(api_key="none", base_url="http://127.0.0.1:9/v1")''',
    "history": '''
    @vf.reward
    async def late(self, trace: vf.Trace) -> float:
        CALLS[0] += 1  # honest for a process's first 18 calls, then alternating
        return 0.0 if CALLS[0] <= 18 else float(CALLS[0] % 2)''',
    "seeded-random": '''
    @vf.reward(weight=0.5)
    async def noise(self, trace: vf.Trace) -> float:
        return random.random()''',
}
FEW_SHOT = '[vf.UserMessage(content="1?"), vf.AssistantMessage(content="1"), vf.UserMessage(content="1?")]'


def _fake_environment(root: Path, name: str, extra: str = "", prompt: str = '"1?"') -> EnvironmentSpec:
    """An installed environment package `name` 0.1.0 under `root` (a module and its dist-info)."""
    module = name.replace("-", "_")
    (root / module).mkdir(parents=True)
    (root / module / "__init__.py").write_text(FAKE.format(extra=extra, prompt=prompt))
    dist = root / f"{module}-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\n")
    return EnvironmentSpec(package=name, version="0.1.0", test_fraction=0)


CHECKS = """
import json, sys
import tasks._scorer_child as child
child.isolate()
child._warm(["env"], {})
sys.addaudithook(child._audit)  # the template's hook, without the uid drop (the packages live in a private tmp)
child._POLICY["locked"] = True
verdicts = {}
for name, config in json.loads(sys.argv[1]).items():
    child._ENV.clear()
    children = child.Children(5.0, 60.0, code=True, closing=())
    try:
        child._load_environment(config)
        child._warm_rubric()
        child._probe(children)
        verdicts[name] = ["accepted", [children.call(i, {"op": "env", "row": 0, "completion": "1"})["reward"]
                                       for i in range(2)]]
    except child.EnvironmentRefused as exc:
        verdicts[name] = [str(exc), []]
    children.stop()
print(json.dumps(verdicts))
"""
"""The scoring child's load checks and probe, run on many environments in one process (each scoring child
would import verifiers again: ~2 s apiece); the sandbox path of a refusal is the trainer-init test's."""


def test_environments_whose_rubric_is_not_deterministic_are_refused(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    plugged = tmp_path / "elsewhere.py"
    plugged.write_text("async def bonus(trace):\n    return 1.0\n")
    cases = {name: _fake_environment(tmp_path, f"envs-fake-{name}", extra) for name, extra in REWARDS.items()}
    cases["few-shot"] = _fake_environment(tmp_path, "envs-fake-few-shot", prompt=FEW_SHOT)
    cases["judge"] = DIGIT_SORT.model_copy(update={"args": {"size": 5, "task": {"judges": [{"id": "reference"}]}}})
    cases["plugged"] = DIGIT_SORT.model_copy(update={"args": {"size": 5, "task": {"rewards": {
        "bonus": {"fn": f"{plugged}:bonus"}}}}})
    expected = {
        "network": "scoring a completion touched the network",
        "counter": "scored the same completion differently after",
        "history": "scores depend on call history or order",
        # an HTTP client's import writes a temporary file (trio → ctypes.util): refused before the client check
        "client": "cannot load it inside the scoring sandbox",
        "few-shot": "not a single user turn", "judge": "scored by judges (a judge model)", "plugged": "is plugged from",
        "seeded-random": "accepted",  # random is reseeded before every call: the same draws everywhere
    }
    configs = {name: spec.child_config() for name, spec in cases.items()}
    out = subprocess.run([sys.executable, "-c", CHECKS, json.dumps(configs)], capture_output=True, text=True,
                         timeout=120, check=False, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    verdicts = json.loads(out.stdout.strip().splitlines()[-1])
    assert {name: verdict for name, (verdict, _) in verdicts.items() if expected[name] not in verdict} == {}
    (first, second) = verdicts["seeded-random"][1]
    assert first == second and 1.0 < float.fromhex(first) < 1.5
