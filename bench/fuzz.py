"""Property-based fuzzing of every parser of worker bytes (hypothesis).

    python -m bench.fuzz [--examples 2000]

Each property feeds one parser inputs a worker controls — rollout files (a valid file mutated: bytes flipped,
inserted, cut), rollout headers (arbitrary JSON), answers (arbitrary text, and text built from the characters
answers are made of) against references, checkpoint manifests — and allows only the parser's documented refusal.
tests/integration/test_hostile_answers.py runs the same properties with a few dozen examples each (`make test`); this runs
them long and prints, per property, the examples tried and the slowest one's time. The last line is one JSON
object.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.cleanup import exit_on_signals
from bench.report import add_record_option, emit
from protocol.manifest import CheckpointError, parse_manifest
from protocol.rollouts import RolloutFileError, decode_rollouts, parse_header
from tasks.datasets import exact_value, math_answer_correct
from tasks.verify import admissible_gym_answer, admissible_math_answer, final_answer

ANSWER_ALPHABET = st.sampled_from(list("0123456789+-*/^()[]{},.x yz\\_'\"!:=;<>%$\n\tabcdefrq") +
                                  ["\\frac", "\\boxed{", "<answer>", "</answer>", "\\sqrt", "__import__", "**",
                                   "\\{", "\\}", "\\left(", "\\right)", "e^{", "\u0661", "\uff15"])
ANSWERS = st.one_of(st.text(max_size=300), st.lists(ANSWER_ALPHABET, max_size=80).map("".join))
REFERENCES = st.sampled_from(["56", "2.5", "\\frac{1}{2}", "2(x+1)", "1,2,3", "(1,2)", "[0,1)", "\\{1,2\\}",
                              "x^{10}", "-5*X**9 + C", "QQ__\n__QQ", "desserts", "1,000"])
JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
                    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=12), inner, max_size=6),
                    max_leaves=40)


def _valid_rollout_file() -> bytes:
    from protocol.rollouts import encode_rollouts
    from tests.unit.protocol.test_rollout_file import _batch  # a small valid file, built the way the codec's tests build one

    return encode_rollouts(_batch())


MUTATIONS = st.lists(st.tuples(st.sampled_from(["flip", "insert", "cut"]), st.integers(min_value=0),
                               st.integers(min_value=0, max_value=255)), min_size=1, max_size=8)


def _mutate(data: bytes, mutations) -> bytes:
    out = bytearray(data)
    for kind, position, value in mutations:
        if not out:
            break
        at = position % len(out)
        if kind == "flip":
            out[at] ^= value or 1
        elif kind == "insert":
            out[at:at] = bytes([value]) * (1 + value % 7)
        else:
            del out[at:at + 1 + value]
    return bytes(out)


DIED = [0, 0]
"""[files decoded or refused, files that killed the decoding process] since the start (rollout files property)."""


def _decode_in_a_child(data: bytes) -> str:
    """decode_rollouts in a forked child: "decoded", "refused" (RolloutFileError), "died" (a signal: pyarrow's C++
    aborts on some malformed footers, e.g. "Repetition level histogram size mismatch"), or the undocumented
    exception's name. The validator daemon runs its checks in checker processes and challenges a file that kills
    one three times (tests/integration/test_validator_daemon.py), so "died" is a handled outcome, counted apart."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            decode_rollouts(data)
        except RolloutFileError:
            code = 1
        except BaseException as exc:  # noqa: BLE001 - reported to the parent by name
            os.write(2, f"{type(exc).__name__}: {exc}"[:300].encode())
            code = 2
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "died"
    return {0: "decoded", 1: "refused"}.get(os.WEXITSTATUS(status), "undocumented exception")


def properties(examples: int) -> dict[str, Callable[[], None]]:
    """Each property as a zero-argument callable running `examples` hypothesis examples."""
    config = settings(max_examples=examples, deadline=None, derandomize=False, database=None,
                      suppress_health_check=list(HealthCheck))
    valid = _valid_rollout_file()

    @config
    @given(MUTATIONS)
    def rollout_files(mutations):
        outcome = _decode_in_a_child(_mutate(valid, mutations))
        assert outcome in ("decoded", "refused", "died"), outcome
        DIED[outcome == "died"] += 1

    @config
    @given(JSON)
    def rollout_headers(document):
        try:
            parse_header(json.dumps(document).encode())
        except (RolloutFileError, ValueError):
            pass

    @config
    @given(st.binary(max_size=400))
    def rollout_header_bytes(raw):
        try:
            parse_header(raw)
        except (RolloutFileError, ValueError):
            pass

    @config
    @given(ANSWERS)
    def completions(text):
        answer = final_answer(text)
        assert answer is None or isinstance(answer, str)

    @config
    @given(ANSWERS, REFERENCES)
    def answer_bounds(answer, reference):
        assert admissible_gym_answer(answer, reference) in (True, False)
        assert admissible_math_answer(answer, reference) in (True, False)
        value = exact_value(answer)
        assert value is None or value == value

    @config
    @given(ANSWERS, REFERENCES)
    def math_grader(answer, reference):  # through the scoring sandbox when the bounds admit the answer
        assert math_answer_correct(answer, reference) in (True, False)

    @config
    @given(st.one_of(st.binary(max_size=300), JSON.map(lambda d: json.dumps(d).encode())))
    def manifests(data):
        try:
            parse_manifest(data)
        except CheckpointError:
            pass

    return {"rollout files (mutated)": rollout_files, "rollout headers (JSON)": rollout_headers,
            "rollout headers (bytes)": rollout_header_bytes, "completions (final answer)": completions,
            "answer bounds and literals": answer_bounds, "math grader (sandbox)": math_grader,
            "checkpoint manifests": manifests}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=2000)
    add_record_option(parser)
    args = parser.parse_args()
    result = {}
    for name, run in properties(args.examples).items():
        examples = args.examples if "sandbox" not in name else max(1, args.examples // 10)
        started = time.perf_counter()
        properties(examples)[name]()
        result[name] = {"examples": examples, "seconds": time.perf_counter() - started}
        died = f" ({DIED[1]} files killed the decoding process)" if DIED[1] and name.startswith("rollout files") else ""
        if died:
            result[name]["process_died"] = DIED[1]
        print(f"{name:<30} {examples:>6} examples in {result[name]['seconds']:7.1f} s: no undocumented error{died}")
    emit(result, args, "fuzz")


if __name__ == "__main__":
    exit_on_signals()
    main()
