"""Every token position lies below 2^32 (docs/protocol.md R5.1, R6.3, issue 45): one word of the sampling rule's
Philox counter and of exact mode's RoPE turns. A rollout file or a reader's limits that would reach position 2^32 are
refused by name, never wrapped."""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq
import pytest

from protocol.rollouts import METADATA_KEY, RolloutLimits, RolloutSchemaError, decode_rollouts, encode_rollouts
from protocol.runspec import POSITION_LIMIT, RunSpec, SamplingSpec
from tests.unit.protocol.test_rollout_file import _batch


def _with_header(data: bytes, **sampling) -> bytes:
    """The file `data` with its header's sampling spec changed, as a hostile worker would write it."""
    table = pq.read_table(io.BytesIO(data))
    header = json.loads(table.schema.metadata[METADATA_KEY])
    header["sampling"] |= sampling
    sink = io.BytesIO()
    pq.write_table(table.replace_schema_metadata({METADATA_KEY: json.dumps(header).encode()}), sink)
    return sink.getvalue()


def test_a_file_whose_header_allows_completions_past_position_2_32_is_a_schema_error():
    honest = encode_rollouts(_batch())
    assert decode_rollouts(_with_header(honest, max_tokens=4)) == _batch()  # the rewrite alone changes nothing
    with pytest.raises(RolloutSchemaError, match=r"invalid header: sampling.max_tokens: .*less than or equal to "
                                                 r"4294967296"):
        decode_rollouts(_with_header(honest, max_tokens=POSITION_LIMIT + 1))


def test_reader_limits_that_would_admit_position_2_32_are_refused_when_made():
    assert RolloutLimits(max_prompt_tokens=4096, max_completion_tokens=POSITION_LIMIT - 4096)  # last: 2^32 − 1
    with pytest.raises(ValueError, match=r"4096 prompt and 4294963201 completion tokens would reach position 2\^32"):
        RolloutLimits(max_prompt_tokens=4096, max_completion_tokens=POSITION_LIMIT - 4095)


def test_a_pool_of_the_longest_completions_reads_rows_below_position_2_32():
    """`sampling.max_tokens` may be 2^32 (completion positions 0 … 2^32 − 1); the validator's limits then keep a row's
    prompt and completion together below 2^32, and a spec past it is refused."""
    spec = RunSpec(task={"name": "sort", "seed": 0}, sampling=SamplingSpec(group_size=2, max_tokens=POSITION_LIMIT),
                   prompts_per_submission=1, pool_seed="0x" + "5e" * 32)
    limits = RolloutLimits.for_spec(spec, proof_chunk=32)
    assert limits.max_prompt_tokens + limits.max_completion_tokens == POSITION_LIMIT
    assert RolloutLimits.for_spec(spec.model_copy(update={"sampling": SamplingSpec(max_tokens=16)}),
                                  proof_chunk=32).max_completion_tokens == 16
    with pytest.raises(ValueError, match="less than or equal to 4294967296"):
        SamplingSpec(max_tokens=POSITION_LIMIT + 1)
