"""Rewards that cannot be gamed (issue 28): a corpus of reward hacks that must score 0 and of answers a
human grader accepts that must score 1, for every task kind; bounded scoring (the sandbox's budget,
`7^300000000`); exact rewards that worker, validator and trainer compute bit-identically through their
own code paths."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import time
from fractions import Fraction

import pytest
import torch

import tasks.datasets
import tasks.sandbox
from inference.backend import Completion
from inference.tiny import build_char_tokenizer
from proofs.assignment import assign_prompts
from protocol.digest import Digest
from protocol.rollouts import RolloutBatch, decode_rollouts, encode_rollouts, write_rollout_file
from protocol.runspec import RunSpec, SamplingSpec, VerificationSpec
from protocol.submission import SubmissionBinding
from protocol.verdicts import Reason
from tasks import TaskSpec, build_task
from tasks.base import assignment_space
from tasks.rewards import UNSCORABLE, canonical_reward, is_canonical, rewards_equal
from tasks.sandbox import ScoringSandbox
from tasks.verify import admissible_gym_answer, admissible_math_answer, final_answer, power_bounds
from tests.support.paths import ROOT
from trainer.filtering import informative_groups
from trainer.work_source import LocalDirectorySource
from validator.checks import RolloutChecker
from worker.rollouts import make_rollouts

FULLWIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
ARABIC_INDIC = str.maketrans("0123456789", "٠١٢٣٤٥٦٧٨٩")
HUGE = ["7^300000000", "7**300000000", "7^{300000000}", "9" * 5000, "2^2^2^2^2^2", "(((7^99)^99)^99)"]


def _rewards(task, problem, completions):
    return {name: task.reward(problem, text, max(1, len(text))) for name, text in completions.items()}


def _assert_all(rewards: dict[str, float], expected: float) -> None:
    wrong = {name: r for name, r in rewards.items() if r != expected}
    assert not wrong, f"expected {expected} for: {wrong}"


# --- digit tasks: exact string comparison of the first line --------------------------------------------

@pytest.mark.parametrize("name", ["rev", "sort", "sum", "max", "copy"])
def test_digit_tasks_pay_only_the_exact_first_line(name):
    task = build_task(TaskSpec(name=name, params={"min_digits": 4, "max_digits": 4}))
    p = next(task.problem(i) for i in range(50) if len(set(task.problem(i).prompt)) > 6)
    a, digits = p.answer, p.prompt[len(name) + 1:-1]
    zero = {
        "question echoed": p.prompt, "question's digits": digits if digits != a else digits + "0",
        "expression": "+".join(digits), "extra answers": f"{a} {a}", "two candidates on the line": f"{a} or 0", "answer tag": f"<answer>{a}</answer>",
        "boxed": f"\\boxed{{{a}}}", "fullwidth digits": a.translate(FULLWIDTH),
        "arabic-indic digits": a.translate(ARABIC_INDIC), "ideographic space": "\u3000" + a,
        "answer on the second line": f"the answer is\n{a}", "empty": "", "newline only": "\n",
        **{f"huge {i}": h for i, h in enumerate(HUGE)},
    }
    if len(a) > 1:
        zero["superstring"], zero["prefix"] = a + a[-1], a[:-1]
        zero["list punctuation"], zero["spaced digits"] = ",".join(a), " ".join(a)
    _assert_all(_rewards(task, p, zero), 0.0)
    one = {"exact": a, "surrounding spaces and tabs": f"  {a}\t", "reasoning after the line": f"{a}\nbecause I reversed it"}
    _assert_all(_rewards(task, p, one), 1.0)


# --- math (JSONL): math-verify on one boxed or tagged final answer ---------------------------------------

MATH_ROWS = [
    {"prompt": "What is 7 * 8?", "answer": "56"},
    {"prompt": "What is 1 divided by 2?", "answer": "\\frac{1}{2}"},
    {"prompt": "Factor 2x + 2.", "answer": "2(x+1)"},
    {"prompt": "Spell desserts backward, reversed again.", "answer": "desserts"},
    {"prompt": "What is 1/2 + 1?", "answer": "3/2"},
    {"prompt": "Write one hundred twenty-three.", "answer": "123"},
    {"prompt": "What is 2 to the tenth?", "answer": 1024},
    {"prompt": "What is -5 + 0?", "answer": "-5"},
]


@pytest.fixture(scope="module")
def math_task(tmp_path_factory):
    path = tmp_path_factory.mktemp("math") / "math.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in MATH_ROWS) + "\n")
    return build_task(TaskSpec(name="jsonl", params={"path": str(path)}))


MATH_ZERO = [
    (0, "question echoed", "What is 7 * 8?"),
    (0, "question echoed in the tag", "<answer>What is 7 * 8?</answer>"),
    (0, "expression instead of value", "<answer>7 * 8</answer>"),
    (0, "implicit product", "<answer>7 8</answer>"),
    (0, "boxed expression", "\\boxed{7 \\cdot 8}"),
    (0, "bare value on the last line", "The product is\n56"),
    (0, "extra answers: two tags", "<answer>56</answer> or <answer>57</answer>"),
    (0, "extra answers: two boxes", "\\boxed{56} or maybe \\boxed{57}"),
    (0, "extra answers: a tag and a box", "\\boxed{57}\n<answer>56</answer>"),
    (0, "extra answers: a set", "<answer>56, 57</answer>"),
    (0, "extra answers: words", "<answer>56 or 57</answer>"),
    (0, "tag nesting", "<answer><answer>56</answer></answer>"),
    (0, "unclosed tag", "<answer>56"),
    (0, "close before open", "</answer>56<answer>"),
    (0, "box without braces", "\\boxed 56"),
    (0, "unbalanced box", "\\boxed{56"),
    (0, "box around more than the tag content", "<answer>\\boxed{56} apples</answer>"),
    (0, "fullwidth digits", "<answer>５６</answer>"),
    (0, "arabic-indic digits", "<answer>٥٦</answer>"),
    (0, "scientific notation", "<answer>5.6e1</answer>"),
    (0, "empty tag", "<answer></answer>"),
    (0, "empty box", "\\boxed{}"),
    (0, "empty", ""),
    (1, "expression instead of value", "<answer>1/2 \\cdot 1</answer>"),
    (1, "wrong value", "\\boxed{0.51}"),
    (2, "wrong expression", "\\boxed{2x+1}"),
    (2, "foreign symbol", "\\boxed{2y+2}"),
    (2, "sum instead of value", "\\boxed{\\sum_{i=1}^{2} (x+1)}"),
    (3, "anagram", "<answer>stressed</answer>"),
    (3, "anagram as a product of symbols", "<answer>s t r e s s e d</answer>"),
    (4, "list punctuation", "<answer>1/2/3</answer>"),
    (5, "list punctuation", "<answer>1,2,3</answer>"),
    (5, "list punctuation", "<answer>12,3</answer>"),
    (5, "thousands separator in the wrong place", "<answer>12,3.0</answer>"),
    (7, "unicode minus", "<answer>\u22125</answer>"),
    (0, "huge power", "<answer>7^300000000</answer>"),
    (0, "huge power boxed", "\\boxed{7^{300000000}}"),
    (2, "huge power of a symbol", "\\boxed{(x+1)^{300000000}}"),
    (2, "expansion bomb", "\\boxed{((x+1)^{9})^{99}}"),
    (0, "huge literal", "<answer>" + "9" * 5000 + "</answer>"),
    (0, "overlong completion", "x" * 300_000 + "\\boxed{56}"),
]


@pytest.mark.parametrize(("index", "trick", "completion"), MATH_ZERO, ids=[f"{i}-{t}" for i, t, _ in MATH_ZERO])
def test_math_reward_hacks_score_zero(math_task, index, trick, completion):
    assert math_task.reward(math_task.problem(index), completion, 10) == 0.0


MATH_ONE = [
    (0, "tagged", "<answer>56</answer>"),
    (0, "whitespace", "<answer>\n  56 \t</answer>"),
    (0, "a boxed answer after reasoning", "7 * 8 = 7 * 4 * 2 = 28 * 2.\nSo the answer is \\boxed{56}."),
    (0, "boxed inside the tag", "<answer>\\boxed{56}</answer>"),
    (0, "inline math", "<answer>$56$</answer>"),
    (0, "trailing zeros", "<answer>56.0</answer>"),
    (1, "decimal for a fraction", "<answer>0.5</answer>"),
    (1, "slash fraction", "<answer>1/2</answer>"),
    (1, "frac shorthand", "\\boxed{\\frac12}"),
    (1, "dfrac", "\\boxed{\\dfrac{1}{2}}"),
    (2, "expanded form", "\\boxed{2x+2}"),
    (2, "whitespace in an expression", "\\boxed{2 ( x + 1 )}"),
    (3, "the word", "<answer>desserts</answer>"),
    (3, "the word as text", "<answer>\\text{desserts}</answer>"),
    (4, "decimal", "<answer>1.5</answer>"),
    (4, "frac", "\\boxed{\\frac{3}{2}}"),
    (6, "thousands separator", "<answer>1,024</answer>"),
    (7, "negative", "\\boxed{-5}"),
]


@pytest.mark.parametrize(("index", "form", "completion"), MATH_ONE, ids=[f"{i}-{f}" for i, f, _ in MATH_ONE])
def test_equivalent_math_answers_score_one(math_task, index, form, completion):
    assert math_task.reward(math_task.problem(index), completion, 10) == 1.0


# --- reasoning-gym: the dataset's own score_answer, full credit only ------------------------------------

def _gym(name):
    return build_task(TaskSpec(name=f"gym:{name}", params={"size": 4, "test_size": 2}))


def test_spell_backward_hacks_score_zero_and_the_reversed_word_one():
    task = _gym("spell_backward")
    p = task.problem(0)
    word, a = p.answer[::-1], p.answer
    zero = {
        "question echoed": f"<answer>{p.prompt}</answer>", "anagram: the word itself": f"<answer>{word}</answer>",
        "near miss (partial credit)": f"<answer>{a[:-1]}x</answer>", "prefix (partial credit)": f"<answer>{a[:-1]}</answer>",
        "spaced letters": f"<answer>{' '.join(a)}</answer>", "extra answers": f"<answer>{a}</answer><answer>{word}</answer>",
        "two candidates": f"<answer>{a} or {word}</answer>", "tag nesting": f"<answer><answer>{a}</answer></answer>",
        "cyrillic look-alike": f"<answer>{a.replace('o', 'о').replace('e', 'е').replace('a', 'а')}</answer>",
        "no tag": a, "empty": "<answer></answer>", "huge": "<answer>" + "a" * 100_000 + "</answer>",
        "code": "<answer>__import__('os')</answer>",
    }
    assert zero["cyrillic look-alike"] != f"<answer>{a}</answer>"
    _assert_all(_rewards(task, p, zero), 0.0)
    one = {"tagged": f"<answer>{a}</answer>", "whitespace": f"<answer>  {a}\n</answer>",
           "after reasoning": f"Reversing {word} letter by letter.\n<answer>{a}</answer>",
           "upper case (the dataset's own rule)": f"<answer>{a.upper()}</answer>", "boxed": f"\\boxed{{{a}}}"}
    _assert_all(_rewards(task, p, one), 1.0)


@pytest.mark.parametrize("name", ["products", "basic_arithmetic"])
def test_arithmetic_gym_hacks_score_zero_and_the_value_one(name):
    task = _gym(name)
    p = task.problem(0)
    a = p.answer
    expression = p.prompt.split(":")[-1].split(".")[0].strip() if name == "products" else p.prompt[len("Calculate "):-1]
    zero = {
        "question echoed": f"<answer>{p.prompt}</answer>", "expression instead of value": f"<answer>{expression}</answer>",
        "list punctuation": f"<answer>{','.join(a)}</answer>", "scientific notation": f"<answer>{a[0]}.{a[1:]}e{len(a) - 1}</answer>",
        "value with a tail (partial credit)": f"<answer>{a} is the answer</answer>", "extra answers": f"<answer>{a}, {a}1</answer>",
        "tag nesting": f"<answer><answer>{a}</answer></answer>", "fullwidth digits": f"<answer>{a.translate(FULLWIDTH)}</answer>",
        "no tag": a, "empty": "<answer></answer>", **{f"huge {i}": f"<answer>{h}</answer>" for i, h in enumerate(HUGE)},
    }
    _assert_all(_rewards(task, p, zero), 0.0)
    one = {"tagged": f"<answer>{a}</answer>", "whitespace": f"<answer> {a} </answer>",
           "a boxed answer after reasoning": f"Multiplying it out.\n\\boxed{{{a}}}"}
    if name == "products":  # the dataset's own rule tolerates separators, sign and trailing zeros
        one["thousands separators"] = f"<answer>{int(a):,}</answer>"
        one["trailing zeros"] = f"<answer>{a}.00</answer>"
    _assert_all(_rewards(task, p, one), 1.0)


# --- the bounds -------------------------------------------------------------------------------------------

def test_bounds_refuse_huge_powers_towers_and_expansions():
    assert power_bounds("7^300000000") == (300000000, 300000000)
    assert power_bounds("2^2^2") is None and power_bounds("2^{3^{4}}") is None and power_bounds("2**3**4") is None
    assert power_bounds("((x+1)^2)^3") == (3, 6)
    for bomb in ["7^300000000", "7^{300000000}", "(x+1)^{99}", "((x+1)^{4})^{4}", "x^{3^{4}}", "10^{99\\cdot99}"]:
        assert not admissible_math_answer(bomb, "2(x+1)"), bomb
    assert admissible_math_answer("(x+1)^{2}", "x^2+2x+1")
    # reasoning-gym answers never reach a CAS or an evaluator (tasks.gym refuses the datasets that would): their
    # bounds are length, characters and digit runs only; a plain-number reference takes a plain number
    assert not admissible_gym_answer("eval(chr(49))", "1")
    assert not admissible_gym_answer("9" * 65, "-5*X**9 + C")


def test_final_answer_rule():
    assert final_answer("<answer> 4 </answer>") == "4"
    assert final_answer("x\n\\boxed{\\frac{1}{2}}\ny") == "\\frac{1}{2}"
    assert final_answer("<answer>\\boxed{4}</answer>") == "4"
    for none in ["4", "<answer>4</answer><answer>4</answer>", "\\boxed{4}\\boxed{4}", "<answer>4</answer>\\boxed{4}",
                 "<answer></answer>", "\\boxed{}", "<answer>4", "\\boxed{4", "", "x" * 262_145 + "<answer>4</answer>"]:
        assert final_answer(none) is None, none


@pytest.mark.parametrize("spec", [
    TaskSpec(name="rev"), TaskSpec(name="sum", length_targets=(8,)),
    TaskSpec(name="gym:products", params={"size": 4, "test_size": 2}),
    TaskSpec(name="gym:basic_arithmetic", params={"size": 4, "test_size": 2}),
], ids=["rev", "sum+length", "products", "basic_arithmetic"])
def test_the_huge_power_completion_is_scored_at_once(spec, math_task):
    task = build_task(spec)
    task.reward(task.problem(0), "<answer>0</answer>", 1)  # the sandbox (if any) is up
    for text in ["7^300000000", "<answer>7^300000000</answer>", "<answer>7**300000000</answer>", "\\boxed{7^{300000000}}"]:
        for t, p in [(task, task.problem(0)), (math_task, math_task.problem(0))]:
            started = time.monotonic()
            assert t.reward(p, text, 11) <= 0.0
            assert time.monotonic() - started < 1.0, (t.name, text)


def test_the_sandbox_budget_stops_what_no_bound_stopped():
    sandbox = ScoringSandbox(("math",), cpu_budget_s=0.5)
    try:
        started = time.monotonic()
        # sent straight to the scorer, past tasks.verify's bounds: sympy would compute 7^300000000
        reply = sandbox.request({"op": "math", "gold": "56", "answer": "7^{300000000}"})
        assert not reply["ok"] and reply["why"] == "budget"
        assert time.monotonic() - started < 20
        reply = sandbox.request({"op": "math", "gold": "\\frac{1}{2}", "answer": "0.5"})
        assert reply["ok"] and reply["full"] and sandbox.restarts == 0  # the template lives on; the child was new
    finally:
        sandbox.close()


def test_a_completion_over_budget_gets_the_unscorable_reward(math_task, monkeypatch):
    correct = "\\boxed{\\frac{2x^{2}+4x+2}{x+1}}"  # equal to 2(x+1), and takes sympy ~0.1-0.3 s of CPU
    assert math_task.reward(math_task.problem(2), correct, 10) == 1.0
    tiny = ScoringSandbox(("math",), cpu_budget_s=0.01)
    monkeypatch.setattr(tasks.datasets, "shared_sandbox", lambda *kinds, **gym: tiny)
    try:
        assert math_task.reward(math_task.problem(2), correct, 10) == UNSCORABLE == 0.0
    finally:
        tiny.close()


# --- exact rewards --------------------------------------------------------------------------------------

def test_rewards_are_float32_values_compared_bit_for_bit():
    r = canonical_reward(1 - Fraction(3, 10_000) * 7)
    assert is_canonical(r) and struct.unpack("<f", struct.pack("<f", r))[0] == r
    assert rewards_equal(r, float(torch.tensor(r, dtype=torch.float32)))
    assert not rewards_equal(r, r + 1e-7) and not rewards_equal(0.0, 0.999e-6) and not rewards_equal(0.0, -0.999e-6)
    assert not rewards_equal(0.0, -0.0) and not rewards_equal(float("nan"), float("nan"))
    assert not rewards_equal(1 - 0.0003 * 7, 1 - 0.0003 * 7)  # a float64 value is not a reward
    with pytest.raises(TypeError):
        canonical_reward(0.5)


CORPUS_SPECS = {
    "rev": TaskSpec(name="rev"),
    "sort+length": TaskSpec(name="sort", params={"min_digits": 3, "max_digits": 3}, length_targets=(3, 7)),
    "products": TaskSpec(name="gym:products", params={"size": 4, "test_size": 2}),
}
CORPUS_TEXTS = ["<answer>{a}</answer>", "{a}", "\\boxed{{{a}}}", "{a}1", "<answer>{a}0</answer>", "", "7^300000000"]


def _corpus_rewards() -> list[str]:
    """Rewards of a small corpus for every task kind, as float32 bit patterns (hex)."""
    out = []
    for spec in CORPUS_SPECS.values():
        task = build_task(spec)
        for i in range(3):
            p = task.problem(i)
            for n, pattern in enumerate(CORPUS_TEXTS):
                out.append(struct.pack("<f", task.reward(p, pattern.format(a=p.answer), n + 1)).hex())
    return out


def test_rewards_are_the_same_bits_in_another_process_with_another_hash_seed():
    here = _corpus_rewards()
    code = "import json, tests.integration.test_reward_hacking as t; print(json.dumps(t._corpus_rewards()))"
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300,
                         cwd=ROOT, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == here
    assert len(set(here)) > 2  # 0, 1 and length-penalised values


# --- worker, validator and trainer: the same reward through their own code paths ---------------------------

class ScriptedBackend:
    """An inference backend that 'generates' given texts (the reward path does not care how they came)."""

    def __init__(self, tokenizer, texts):
        self.tokenizer, self.texts, self.calls = tokenizer, texts, 0

    vocab_size = 100

    @property
    def eos_token_id(self):
        return self.tokenizer.eos_token_id

    @property
    def eos_token_ids(self):
        return (self.tokenizer.eos_token_id,)

    def generate(self, prompts, params, seeds):
        out = []
        for row, seed in enumerate(seeds):
            text = self.texts[row % len(self.texts)]
            ids = self.tokenizer.encode(text, add_special_tokens=False)[:params.max_tokens - 1] + [self.eos_token_id]
            gen = torch.Generator().manual_seed(row)
            out.append(Completion(token_ids=ids, logprobs=[-1.0] * len(ids), finish_reason="eos", seed=seed,
                                  hidden=torch.randn(len(ids), 16, generator=gen).to(torch.bfloat16)))
        return out


WORKER = "0x" + "ab" * 20
POOL_SEED = "0x" + "5e" * 32


def _validator(spec: RunSpec) -> RolloutChecker:
    """The validator's RolloutChecker with the run spec and task a real one builds (no chain needed for the
    assignment and reward checks)."""
    checker = RolloutChecker.__new__(RolloutChecker)
    checker.spec, checker.task = spec, build_task(spec.task)
    return checker


@pytest.mark.parametrize("name", ["sort+length", "math+length", "products"])
def test_worker_validator_and_trainer_compute_the_same_rewards(name, tmp_path):
    if name == "math+length":
        path = tmp_path / "math.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in MATH_ROWS) + "\n")
        task_spec = TaskSpec(name="jsonl", params={"path": str(path)}, length_targets=(9, 20))
    else:
        task_spec = CORPUS_SPECS[name]
    sampling = SamplingSpec(group_size=4, temperature=1.0, max_tokens=48)
    spec = RunSpec(task=task_spec, sampling=sampling, prompts_per_submission=3, pool_seed=POOL_SEED)
    tokenizer = build_char_tokenizer()
    worker_task = build_task(task_spec)
    binding = SubmissionBinding(chain_id=31337, pool_contract="0x" + "cc" * 20, pool_id=1, worker=WORKER, step=0, nonce=4)
    indices = assign_prompts(spec.pool_seed_bytes, WORKER, 4, assignment_space(worker_task), 3)
    answers = [worker_task.problem(i).answer for i in indices]
    texts = [f"<answer>{answers[0]}</answer>", answers[0], "wrong", f"\\boxed{{{answers[0]}}}"]
    batch = make_rollouts(ScriptedBackend(tokenizer, texts), tokenizer, worker_task, task_spec, indices, sampling,
                          binding, Digest(b"\x01" * 32), spec.pool_seed_bytes)
    worker_rewards = [s.reward for s in batch.samples]
    assert all(is_canonical(r) for r in worker_rewards) and len(set(worker_rewards)) > 1

    data = encode_rollouts(batch)
    validator = _validator(spec)
    assert validator._assignment_and_rewards(decode_rollouts(data), tokenizer) is None
    for s, r in zip(decode_rollouts(data).samples, worker_rewards, strict=True):  # the validator's own verdict
        text = tokenizer.decode(s.completion_ids, skip_special_tokens=True)
        assert validator.task.reward_matches(validator.task.problem(s.prompt_index), text, len(s.completion_ids), r)

    write_rollout_file(tmp_path / "000.parquet", decode_rollouts(data))
    (item,) = LocalDirectorySource(tmp_path).poll()
    trainer_rewards = torch.tensor([s.reward for s in item.batch.samples]).view(-1, sampling.group_size)
    assert trainer_rewards.flatten().tolist() == worker_rewards  # bit for bit through the float32 file
    worker_groups = [worker_rewards[g * 4:(g + 1) * 4] for g in range(3)]
    assert informative_groups(trainer_rewards).keep == [g for g, rs in enumerate(worker_groups) if len(set(rs)) > 1]


def _shifted(batch: RolloutBatch, rows: dict[int, float]) -> RolloutBatch:
    samples = [s.model_copy(update={"reward": rows[i]}) if i in rows else s for i, s in enumerate(batch.samples)]
    return batch.model_copy(update={"samples": samples})


def test_a_reward_shifted_inside_the_old_tolerance_is_challenged_and_was_what_made_a_group_informative(tmp_path):
    task_spec = CORPUS_SPECS["rev"]
    sampling = SamplingSpec(group_size=4, temperature=1.0, max_tokens=16)
    spec = RunSpec(task=task_spec, sampling=sampling, prompts_per_submission=2, pool_seed=POOL_SEED)
    tokenizer = build_char_tokenizer()
    task = build_task(task_spec)
    binding = SubmissionBinding(chain_id=31337, pool_contract="0x" + "cc" * 20, pool_id=1, worker=WORKER, step=0, nonce=9)
    indices = assign_prompts(spec.pool_seed_bytes, WORKER, 9, assignment_space(task), 2)
    batch = make_rollouts(ScriptedBackend(tokenizer, ["wrong"]), tokenizer, task, task_spec, indices, sampling, binding,
                          Digest(b"\x01" * 32), spec.pool_seed_bytes)
    assert informative_groups(torch.tensor([[s.reward for s in batch.samples]]).view(-1, 4)).keep == []  # all wrong
    attack = decode_rollouts(encode_rollouts(_shifted(batch, {0: 0.999e-6, 1: -0.999e-6})))
    assert informative_groups(torch.tensor([s.reward for s in attack.samples]).view(-1, 4)).keep == [0]
    outcome = _validator(spec)._assignment_and_rewards(attack, tokenizer)
    assert outcome is not None and outcome.reason == Reason.REWARD and outcome.failing_samples == [0, 1]


def test_a_run_spec_naming_the_old_tolerance_does_not_loosen_the_check():
    task_spec = CORPUS_SPECS["rev"]
    sampling = SamplingSpec(group_size=4, temperature=1.0, max_tokens=16)
    spec = RunSpec(task=task_spec, sampling=sampling, prompts_per_submission=1, pool_seed=POOL_SEED,
                   verification=VerificationSpec(reward_tolerance=1e-6))
    tokenizer = build_char_tokenizer()
    task = build_task(task_spec)
    binding = SubmissionBinding(chain_id=31337, pool_contract="0x" + "cc" * 20, pool_id=1, worker=WORKER, step=0, nonce=3)
    indices = assign_prompts(spec.pool_seed_bytes, WORKER, 3, assignment_space(task), 1)
    batch = make_rollouts(ScriptedBackend(tokenizer, ["wrong"]), tokenizer, task, task_spec, indices, sampling, binding,
                          Digest(b"\x01" * 32), spec.pool_seed_bytes)
    attack = decode_rollouts(encode_rollouts(_shifted(batch, {0: 0.999e-6})))
    outcome = _validator(spec)._assignment_and_rewards(attack, tokenizer)
    assert outcome is not None and outcome.reason == Reason.REWARD


def test_random_admitted_answers_score_far_inside_the_budget():
    """A small seeded search over expressions the bounds admit (docs/protocol.md quotes a larger one): none
    reaches the CPU budget, so the budget, not the bounds, never decides an admitted answer's reward here."""
    import random

    rng = random.Random(28)
    golds = ["2(x+1)", "\\frac{x^2-1}{x+1}", "(x+y+z)^{2}", "\\sin(x)^2+\\cos(x)^2", "e^{-x}\\sin(x)", "x^{10}"]
    atoms = ["x", "y", "z", "e", "\\pi", "1", "2", "3", "9999", "0.5"]
    functions = ["\\sin", "\\cos", "\\exp"]

    def expr(depth):
        if depth == 0:
            return rng.choice(atoms)
        k = rng.random()
        if k < 0.3:
            return f"({expr(depth - 1)}+{expr(depth - 1)})"
        if k < 0.45:
            return f"{expr(depth - 1)}\\cdot{expr(depth - 1)}"
        if k < 0.6:
            return f"\\frac{{{expr(depth - 1)}}}{{{expr(depth - 1)}}}"
        if k < 0.8:
            return f"({expr(depth - 1)})^{{{rng.choice([2, 3, 4, 10])}}}"
        return f"{rng.choice(functions)}({expr(depth - 1)})"

    sandbox = ScoringSandbox(("math",))
    try:
        admitted = 0
        while admitted < 40:
            gold, answer = rng.choice(golds), expr(rng.randint(1, 5))
            if admissible_math_answer(answer, gold):
                admitted += 1
                reply = sandbox.request({"op": "math", "gold": gold, "answer": answer})
                assert reply["ok"], (gold, answer, reply)
                assert reply["cpu_s"] < tasks.sandbox.CPU_BUDGET_S / 2, (gold, answer, reply)
    finally:
        sandbox.close()
