"""Tasks: determinism, disjoint splits, exact verifiers, JSONL, difficulty band, length target."""

import json
from fractions import Fraction

import pytest

from tasks import TaskError, TaskSpec, build_task, task_names
from tasks.base import assignment_space
from tasks.difficulty import SubsetTask, difficulty_subset, filter_by_difficulty, register_subset
from tasks.procedural import SOLVERS
from tasks.rewards import canonical_reward, is_canonical
from tasks.datasets import math_answer_correct
from tasks.verify import final_answer


def test_procedural_problems_are_deterministic_by_seed_and_index():
    a, b = build_task(TaskSpec(name="rev", seed=3)), build_task(TaskSpec(name="rev", seed=3))
    assert [a.problem(i) for i in range(20)] == [b.problem(i) for i in range(20)]
    other = build_task(TaskSpec(name="rev", seed=4))
    assert [a.problem(i).prompt for i in range(20)] != [other.problem(i).prompt for i in range(20)]


def test_train_and_test_splits_are_disjoint():
    task = build_task(TaskSpec(name="rev", params={"min_digits": 3, "max_digits": 3}))
    train = {task.problem(i).prompt for i in range(2000)}
    test = {task.problem(i, "test").prompt for i in range(200)}
    assert not train & test


@pytest.mark.parametrize(
    ("name", "digits", "answer"), [("rev", "4721", "1274"), ("sort", "4721", "1247"), ("sum", "4721", "14"), ("copy", "07", "07")]
)
def test_digit_task_answers(name, digits, answer):
    assert SOLVERS[name](digits) == answer
    task = build_task(TaskSpec(name=name))
    for i in range(20):
        p = task.problem(i)
        assert p.prompt.startswith(f"{name}:") and p.prompt.endswith("=")
        assert p.answer == SOLVERS[name](p.prompt[len(name) + 1 : -1])


def test_digit_verifier_extracts_the_first_line_and_gives_no_partial_credit():
    task = build_task(TaskSpec(name="rev"))
    p = task.problem(0)
    assert task.reward(p, p.answer, len(p.answer)) == 1.0
    assert task.reward(p, p.answer + "\nanything after the answer line", 9) == 1.0
    assert task.reward(p, " " + p.answer + " ", 7) == 1.0
    assert task.reward(p, p.answer + "1", 6) == 0.0  # superstring
    assert task.reward(p, p.answer[:-1], 4) == 0.0  # substring
    assert task.reward(p, "", 0) == 0.0


def test_final_answer_is_one_answer_tag_or_one_box_and_never_the_last_line():
    # was: the last <answer>, else the last \boxed, else the last line (an echoed question scored)
    assert final_answer("work\n<answer> 42 </answer>\nmore") == "42"
    assert final_answer("so \\boxed{\\frac{1}{2}} done") == "\\frac{1}{2}"
    assert final_answer("<answer>\\boxed{7}</answer>") == "7"
    assert final_answer("first\nsecond\n\n") is None
    assert final_answer("<answer>1</answer><answer>2</answer>") is None
    assert final_answer("\\boxed{1} or \\boxed{2}") is None
    assert final_answer("") is None


@pytest.mark.parametrize(
    ("predicted", "reference", "equal"),
    [
        ("42", "42", True),
        ("42.0", "42", True),
        ("1,024", "1024", True),
        ("3/4", "0.75", True),
        ("\\$5", "5", True),
        ("421", "42", False),
        ("4", "42", False),
        ("2*x + 2", "2(x+1)", True),
        ("x^2", "x*x", True),
        ("x^2", "x^3", False),
        ("", "0", False),
        ("__import__('os')", "0", False),
        ("9^9^9^9", "1", False),
        # were accepted by the hand-written matcher (sympy, implicit multiplication, commuting symbols):
        ("7 * 8", "56", False),
        ("7 8", "56", False),
        ("stressed", "desserts", False),
        ("1/2/3", "3/2", False),
        ("12,3", "123", False),
    ],
)
def test_math_answers_are_scored_by_math_verify_within_the_bounds(predicted, reference, equal):
    assert math_answer_correct(predicted, reference) is equal


def test_jsonl_loader_and_its_errors(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps({"prompt": "1/2 + 1/4?", "answer": "3/4"}) + "\n\n" + json.dumps({"prompt": "2+2?", "answer": 4}) + "\n")
    task = build_task(TaskSpec(name="jsonl", params={"path": str(path)}))
    assert task.size() == 2
    p = task.problem(0)
    assert task.reward(p, "so the answer is\n<answer>0.75</answer>", 10) == 1.0
    assert task.reward(p, "\\boxed{0.7}", 5) == 0.0
    assert task.reward(task.problem(1), "\\boxed{4}", 1) == 1.0
    assert task.reward(task.problem(1), "4", 1) == 0.0  # was 1.0: a bare last line is not an answer
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "x"}\n')
    with pytest.raises(TaskError, match="bad.jsonl:1"):
        build_task(TaskSpec(name="jsonl", params={"path": str(bad)}))
    bad.write_text("not json\n")
    with pytest.raises(TaskError, match="not JSON"):
        build_task(TaskSpec(name="jsonl", params={"path": str(bad)}))
    with pytest.raises(TaskError, match="cannot read"):
        build_task(TaskSpec(name="jsonl", params={"path": str(tmp_path / "missing.jsonl")}))


def test_reasoning_gym_task_is_scored_exactly_after_extraction():
    task = build_task(TaskSpec(name="gym:basic_arithmetic", params={"size": 4, "test_size": 2}))
    p = task.problem(0)
    assert task.reward(p, f"<answer>{p.answer}</answer>", 3) == 1.0
    assert task.reward(p, f"<answer>{p.answer}7</answer>", 3) == 0.0
    assert task.problem(0, "test").prompt != p.prompt


def test_unknown_task_and_bad_parameters_are_named():
    with pytest.raises(TaskError, match="unknown task 'nope'"):
        build_task(TaskSpec(name="nope"))
    with pytest.raises(TaskError, match="bad parameters"):
        build_task(TaskSpec(name="rev", params={"colour": 3}))
    assert {"rev", "sort", "sum", "copy", "jsonl"} <= set(task_names())


def test_length_target_reward_subtracts_the_distance_to_the_target():
    task = build_task(TaskSpec(name="rev", length_targets=(10,)))
    p = task.problem(0)
    assert "Think for 10 tokens" in p.prompt
    assert task.reward(p, p.answer, 10) == 1.0
    assert task.reward(p, p.answer, 4) == canonical_reward(1 - Fraction(3, 10_000) * 6) == pytest.approx(1 - 0.0003 * 6)
    assert task.reward(p, "wrong", 30) == canonical_reward(Fraction(-3, 10_000) * 20) == pytest.approx(-0.0003 * 20)
    assert is_canonical(task.reward(p, p.answer, 4))  # a float32 value: what the rollout file holds


def test_difficulty_filter_keeps_the_band_of_pass_rates():
    task = build_task(TaskSpec(name="rev"))
    answers = {task.problem(i).prompt: task.problem(i).answer for i in range(4)}
    calls = {"n": 0}

    def sample(prompts):  # solves problem 0 always, 1 half the time, 2 once in four, 3 never
        calls["n"] += 1
        solve_rate = [1.0, 0.5, 0.25, 0.0]
        return [answers[p] if (calls["n"] - 1) / 4 < solve_rate[i] else "x" for i, p in enumerate(prompts)]

    report = filter_by_difficulty(task, [0, 1, 2, 3], sample, attempts=4)
    assert report.pass_rates == {0: 1.0, 1: 0.5, 2: 0.25, 3: 0.0}
    assert report.kept == [1, 2]
    subset = SubsetTask(task, report.kept)
    assert subset.problem(1).prompt == task.problem(2).prompt
    with pytest.raises(TaskError):
        filter_by_difficulty(task, [0], sample, band=(0.9, 0.1))


def test_offline_filter_on_a_length_target_task_counts_correct_answers_as_solved():
    spec = TaskSpec(name="sort", params={"min_digits": 3, "max_digits": 3}, length_targets=(2, 8))
    task = build_task(spec)
    problems = [task.problem(i) for i in range(4)]
    assert all(task.reward(p, p.answer, 3) < 1.0 for p in problems)  # no correct answer reaches 1.0
    calls = {"n": 0}

    def sample(prompts):  # problem 0 always correct, 1 half the time, 2 once in four, 3 never
        calls["n"] += 1
        solve_rate = [1.0, 0.5, 0.25, 0.0]
        by_prompt = {p.prompt: (i, p.answer) for i, p in enumerate(problems)}
        return [by_prompt[q][1] if (calls["n"] - 1) / 4 < solve_rate[by_prompt[q][0]] else "000" for q in prompts]

    subset = difficulty_subset(task, spec.model_dump(mode="json"), candidates=4, sample=sample, attempts=4,
                               band=(0.1, 0.8), base_checkpoint="0x" + "11" * 32)
    assert subset.pass_rates == [1.0, 0.5, 0.25, 0.0]
    assert subset.kept == [1, 2]

    data = subset.to_bytes()
    named = spec.model_copy(update={"subset": subset.digest})
    with pytest.raises(TaskError, match="not fetched"):
        build_task(named.model_copy(update={"subset": "0x" + "00" * 32}))
    assert register_subset(data) == subset.digest
    filtered = build_task(named)
    assert assignment_space(filtered) == 2  # workers and validators assign from the subset only
    assert [filtered.problem(i).prompt for i in range(2)] == [problems[1].prompt, problems[2].prompt]
    assert filtered.reward(filtered.problem(0), problems[1].answer, 3) == task.reward(problems[1], problems[1].answer, 3)
    assert filtered.problem(0, "test").prompt == task.problem(0, "test").prompt
    other = TaskSpec(name="rev", subset=subset.digest)
    with pytest.raises(TaskError, match="another task"):
        build_task(other)
