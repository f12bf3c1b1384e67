"""Scoring cost per completion for each task kind, through the parties' own Task.reward path.

    python -m bench.scoring [--files 4] [--per-file 32]

For each kind (a digit task, math through math-verify, a reasoning-gym dataset, the shipped verifiers
environment) it scores `files` files of `per-file` completions (half right, half wrong), each file in its own
scoring session (a fresh scorer process per file, tasks.sandbox.scoring_session) and, as the same run's
baseline, all of them in one session (one process: what a file would cost without its fresh process). The
difference divided by the number of files is the cost of a fresh process. Start-up (the sandbox's template:
imports, warm-up, an environment's probe) is timed apart. Wall clock on an otherwise idle machine; the last line
is one JSON object. Runs on code before scoring sessions existed too (then both columns are one process).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import tempfile
import time
from pathlib import Path

from bench.cleanup import exit_on_signals
from bench.report import add_record_option, emit
from tasks import TaskSpec, build_task

try:
    from tasks.sandbox import scoring_session
except ImportError:  # the code before issue 42: one scoring process for everything
    scoring_session = contextlib.nullcontext


def _cases(kind: str, workdir: Path):
    """(task, [(problem, completion)]) with half right and half wrong answers."""
    if kind == "digits (rev)":
        task = build_task(TaskSpec(name="rev"))
        problems = [task.problem(i) for i in range(8)]
        return task, [(p, p.answer if i % 2 else "0") for i, p in enumerate(problems)]
    if kind == "math (jsonl)":
        path = workdir / "math.jsonl"
        rows = [("Half?", "\\frac{1}{2}", "0.5"), ("Factor 2x+2", "2(x+1)", "2x+2"),
                ("Interval", "[0,1)", "[0, 1)"), ("Root", "\\sqrt{2}\\pi", "\\pi\\sqrt{2}")]
        path.write_text("".join(json.dumps({"prompt": p, "answer": a}) + "\n" for p, a, _ in rows))
        task = build_task(TaskSpec(name="jsonl", params={"path": str(path)}))
        answers = [alt for _, _, alt in rows]
        return task, [(task.problem(i % 4), f"\\boxed{{{answers[i % 4] if i % 2 else 'x+7'}}}") for i in range(8)]
    if kind == "gym (products)":
        task = build_task(TaskSpec(name="gym:products", params={"size": 8, "test_size": 2}))
        problems = [task.problem(i) for i in range(8)]
        return task, [(p, f"<answer>{p.answer if i % 2 else '7'}</answer>") for i, p in enumerate(problems)]
    task = build_task(TaskSpec(name="env", environment={"package": "proofswarm-digit-sort", "version": "0.1.0",
                                                        "args": {"size": 50}, "test_fraction": 0}))
    problems = [task.problem(i) for i in range(8)]
    return task, [(p, p.answer if i % 2 else "0") for i, p in enumerate(problems)]


def measure(kind: str, files: int, per_file: int, workdir: Path) -> dict[str, float]:
    started = time.perf_counter()
    task, cases = _cases(kind, workdir)
    for problem, completion in cases:  # starts the sandbox (if the kind has one)
        task.reward(problem, completion, 8)
    start_up = time.perf_counter() - started
    batch = [cases[i % len(cases)] for i in range(per_file)]

    def score(sessions: int) -> float:
        begin = time.perf_counter()
        for _ in range(sessions):
            with scoring_session():
                for _ in range(files // sessions):
                    for problem, completion in batch:
                        task.reward(problem, completion, 8)
        return time.perf_counter() - begin

    one = score(1)
    each = score(files)
    n = files * per_file
    return {"start_up_s": start_up, "ms_per_completion_one_process": 1e3 * one / n,
            "ms_per_completion_fresh_per_file": 1e3 * each / n, "ms_fresh_process_per_file": 1e3 * (each - one) / files}


def answer_checks() -> dict[str, float]:
    """Milliseconds to admit or refuse a 16k-character answer (the longest a reasoning-gym answer may be), for
    shapes that made the old call-counting regex quadratic: each check is one pass over the text."""
    from tasks.verify import admissible_gym_answer, final_answer

    reference = "y" * 8184
    worst = {}
    for shape, answer in {"f(" * 8192: "calls", "a(b)" * 4096: "calls, closed", "(" * 16384: "brackets",
                          "1," * 8192: "digits", "_" * 16384: "underscores"}.items():
        started = time.perf_counter()
        admissible_gym_answer(shape, reference)
        final_answer(f"<answer>{shape}</answer>")
        worst[answer] = 1e3 * (time.perf_counter() - started)
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--per-file", type=int, default=32)
    add_record_option(parser)
    args = parser.parse_args()
    result = {}
    with tempfile.TemporaryDirectory() as workdir:
        for kind in ("digits (rev)", "math (jsonl)", "gym (products)", "env (digit_sort)"):
            result[kind] = figures = measure(kind, args.files, args.per_file, Path(workdir))
            print(f"{kind:<18} start-up {figures['start_up_s']:6.2f} s | per completion: one process "
                  f"{figures['ms_per_completion_one_process']:7.2f} ms, fresh process per file "
                  f"{figures['ms_per_completion_fresh_per_file']:7.2f} ms | a fresh process "
                  f"{figures['ms_fresh_process_per_file']:6.1f} ms per file")
    result["answer checks (ms, 16k characters)"] = checks = answer_checks()
    print("answer checks, 16k characters: " + ", ".join(f"{k} {v:.1f} ms" for k, v in checks.items()))
    emit(result, args, "scoring")


if __name__ == "__main__":
    exit_on_signals()
    main()
