"""The bounded rollout reader: header size, depth, strings and integers; Parquet counts and
lengths checked from the footer and the arrays before any Python list is made."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from adversaries.files import HOSTILE_FILES, deep_header, long_integer, token_bomb
from protocol.rollouts import (
    MAX_HEADER_BYTES,
    MAX_HEADER_DEPTH,
    RolloutLimits,
    RolloutSchemaError,
    decode_rollouts,
    encode_rollouts,
    json_depth,
    parse_header,
)
from protocol.runspec import RunSpec, SamplingSpec
from tests.support.paths import ROOT
from tests.unit.protocol.test_rollout_file import _batch

LIMITS = RolloutLimits(rows=4, max_rows=4, max_completion_tokens=4, proof_chunk=2)


def _header(**overrides) -> bytes:
    return json.dumps({**_batch().header.model_dump(mode="json"), **overrides}).encode()


def test_json_depth_counts_brackets_outside_strings_only():
    assert json_depth("1") == 0
    assert json_depth('{"a": [1, {"b": []}]}') == 4
    assert json_depth('{"a": "[[[{{{", "b": "\\\\\\"[["}') == 1  # escaped quotes do not end the string


def test_honest_header_and_file_pass_within_the_limits():
    batch = _batch()
    assert parse_header(_header()) == batch.header
    assert decode_rollouts(encode_rollouts(batch), LIMITS) == batch


@pytest.mark.parametrize("raw, message", [
    (b"x" * (MAX_HEADER_BYTES + 1), "exceeds 16384"),
    (b"[" * (MAX_HEADER_DEPTH + 1) + b"]" * (MAX_HEADER_DEPTH + 1), "nests deeper"),
    (_header(version="v" * 2000), "header string of 2000 characters"),
    (_header(task={"name": "rev", "seed": 0, "params": {"k" * 1500: 1}}), "header string of 1500"),
    (_header().replace(b'"policy_step": 3', b'"policy_step": ' + b"9" * 5000), "integer of 5000 digits"),
    (_header().replace(b'"policy_step": 3', b'"policy_step": 1e999'), "non-finite"),
    (_header(nonce=2**64), "outside the 64-bit range"),
    (_header().replace(b'"policy_step": 3', b'"policy_step": NaN'), "NaN is not a JSON number"),
    (b"\xff\xfe", "not UTF-8"),
    (b"[]", "not a JSON object"),
    (_header(version="2" * 150), "unsupported rollout schema version"),
])
def test_header_refusals(raw, message):
    with pytest.raises(RolloutSchemaError, match=message) as refused:
        parse_header(raw)
    assert len(str(refused.value)) <= 300  # attacker text is clipped


def test_deep_header_is_refused_even_when_the_recursion_limit_is_raised():
    """py_ecc (imported with web3) raises the limit to 100000, so json.loads on deep nesting would
    overflow the C stack and kill the process; the depth scan refuses it without recursing."""
    code = ("import sys; sys.setrecursionlimit(10**6)\n"
            "from protocol.rollouts import parse_header, RolloutSchemaError\n"
            "for depth in (8000, 99000):\n"
            "    raw = b'[' * depth + b']' * depth\n"
            "    try: parse_header(raw)\n"
            "    except RolloutSchemaError as e: print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["header nests deeper than 8 levels", "header of 198000 bytes exceeds 16384"]


@pytest.mark.parametrize("attack", sorted(HOSTILE_FILES))
def test_every_hostile_file_is_a_schema_error(attack):
    honest = encode_rollouts(_batch())
    with pytest.raises(RolloutSchemaError):
        decode_rollouts(HOSTILE_FILES[attack](honest), LIMITS)
    with pytest.raises(RolloutSchemaError):
        decode_rollouts(HOSTILE_FILES[attack](honest))  # default limits too


def test_token_bomb_is_refused_from_the_footer_before_decompressing(tmp_path):
    """25 M tokens would need ~200 MB of Arrow buffers (and GBs as Python ints); the refusal
    allocates next to nothing (Arrow's peak allocation, measured in a fresh process)."""
    (tmp_path / "bomb.parquet").write_bytes(token_bomb(encode_rollouts(_batch())))
    code = ("import sys, pyarrow as pa\n"
            "from protocol.rollouts import RolloutSchemaError, decode_rollouts\n"
            "bomb = open(sys.argv[1], 'rb').read()\n"
            "try: decode_rollouts(bomb)\n"
            "except RolloutSchemaError as e: print(len(bomb), pa.default_memory_pool().max_memory(), e)\n")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "bomb.parquet")], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    size, peak, message = out.stdout.split(" ", 2)
    assert int(size) < 8192 and "declares 25000000 values" in message
    assert int(peak) < 1024 * 1024, f"{peak} bytes allocated"


def test_rows_and_lengths_are_checked_against_the_pool():
    spec = RunSpec(task={"name": "rev"}, sampling=SamplingSpec(group_size=2, max_tokens=4), prompts_per_submission=3,
                   pool_seed="0x" + "00" * 32)
    limits = RolloutLimits.for_spec(spec, proof_chunk=2)
    assert (limits.rows, limits.max_completion_tokens, limits.proof_chunk) == (6, 4, 2)
    with pytest.raises(RolloutSchemaError, match="4 rows, the pool's submissions have 6"):
        decode_rollouts(encode_rollouts(_batch()), limits)
    short = RolloutLimits(rows=4, max_completion_tokens=1, proof_chunk=2)
    with pytest.raises(RolloutSchemaError, match="row 1: 2 completion_ids exceed the bound 1"):
        decode_rollouts(encode_rollouts(_batch()), short)
    with pytest.raises(RolloutSchemaError, match="proof_chunk 2, the pool uses 32"):
        decode_rollouts(encode_rollouts(_batch()), RolloutLimits(proof_chunk=32))
    with pytest.raises(RolloutSchemaError, match="outside the vocabulary"):
        decode_rollouts(encode_rollouts(_batch()), RolloutLimits(vocab_size=7))
    with pytest.raises(RolloutSchemaError, match="prompt_ids exceed the bound 2"):
        decode_rollouts(encode_rollouts(_batch()), RolloutLimits(max_prompt_tokens=2))


def test_proofs_must_be_258_bytes():
    batch = _batch()
    samples = [s.model_copy(update={"proofs": [p[:100] for p in s.proofs]}) for s in batch.samples]
    with pytest.raises(RolloutSchemaError, match="each must be 258"):
        decode_rollouts(encode_rollouts(batch.model_copy(update={"samples": samples})))


def test_long_integer_and_deep_header_helpers_make_what_they_say():
    honest = encode_rollouts(_batch())
    with pytest.raises(RolloutSchemaError, match="integer of 5000 digits"):
        decode_rollouts(long_integer(honest))
    with pytest.raises(RolloutSchemaError, match="nests deeper"):
        decode_rollouts(deep_header(honest, depth=100))
