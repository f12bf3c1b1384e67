"""The rollout file codec: round trip, atomic writes, and refusal of anything else."""

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from protocol.rollouts import (
    METADATA_KEY,
    RolloutBatch,
    RolloutFileError,
    RolloutHeader,
    RolloutSample,
    RolloutSchemaError,
    decode_rollouts,
    encode_rollouts,
    read_rollout_file,
    write_rollout_file,
)
from protocol.runspec import SamplingSpec


def _batch(group_size=2, groups=2, proof_chunk=2, **header_overrides):
    header = RolloutHeader(
        chain_id=31337, pool_contract="0x" + "34" * 20, pool_id=1, nonce=0,
        policy_step=3, manifest_digest="0x" + "ab" * 32, worker="0x" + "12" * 20, task={"name": "rev", "seed": 0},
        sampling=SamplingSpec(group_size=group_size, temperature=1.0, max_tokens=4), proof_chunk=proof_chunk,
        **header_overrides,
    )
    samples = []
    for g in range(groups):
        for s in range(group_size):
            completion = [5, 6, 2][: 1 + (s % 3)]
            samples.append(RolloutSample(
                group=g, sample=s, prompt_index=10 + g, prompt_ids=[1, 7, 8], completion_ids=completion,
                logprobs=[-0.5] * len(completion), reward=float(s % 2), finish_reason="eos", seed=2**63 + s,
                proofs=[bytes([g, s]) * 129] * (-(-len(completion) // proof_chunk) if proof_chunk else 0),
            ))
    return RolloutBatch(header=header, samples=samples)


def test_round_trip_through_a_file(tmp_path):
    batch = _batch()
    path = tmp_path / "r.parquet"
    write_rollout_file(path, batch)
    assert read_rollout_file(path) == batch
    assert read_rollout_file(path).n_groups == 2
    assert [p.name for p in tmp_path.iterdir()] == ["r.parquet"]  # no temp file left


def test_header_carries_the_submission_binding():
    header = decode_rollouts(encode_rollouts(_batch())).header
    b = header.binding
    assert (b.chain_id, b.pool_contract.lower(), b.pool_id, b.worker.lower(), b.step, b.nonce) == (
        31337, "0x" + "34" * 20, 1, "0x" + "12" * 20, 3, 0)
    assert RolloutHeader.bound(b, manifest_digest=header.manifest_digest, task=header.task,
                               sampling=header.sampling, proof_chunk=header.proof_chunk).binding == b


def test_write_refuses_an_inconsistent_batch_and_leaves_no_file(tmp_path):
    batch = _batch()
    broken = RolloutBatch(header=batch.header, samples=batch.samples[:-1])
    with pytest.raises(RolloutSchemaError, match="multiple of group_size"):
        write_rollout_file(tmp_path / "r.parquet", broken)
    assert not list(tmp_path.iterdir())


def _with(table: pa.Table, header: dict | None = None) -> bytes:
    meta = dict(table.schema.metadata or {})
    if header is not None:
        meta[METADATA_KEY] = json.dumps(header).encode()
    sink = io.BytesIO()
    pq.write_table(table.replace_schema_metadata(meta), sink)
    return sink.getvalue()


def test_reader_refuses_anything_else_with_a_named_error():
    good = encode_rollouts(_batch())
    table = pq.read_table(io.BytesIO(good))
    header = json.loads(table.schema.metadata[METADATA_KEY])

    with pytest.raises(RolloutSchemaError, match="not a Parquet file"):
        decode_rollouts(b"PAR1 but not really")
    with pytest.raises(RolloutSchemaError, match="no 'proofswarm.rollouts' header"):
        decode_rollouts(_with(table.replace_schema_metadata({})))
    with pytest.raises(RolloutSchemaError, match="schema v3 was sampled with sampling rule v1"):
        decode_rollouts(_with(table, {**header, "version": 3}))
    with pytest.raises(RolloutSchemaError, match="schema v4 seeds its sampling from the step a submission names"):
        decode_rollouts(_with(table, {**header, "version": 4}))
    with pytest.raises(RolloutSchemaError, match="unsupported rollout schema version 6"):
        decode_rollouts(_with(table, {**header, "version": 6}))
    unbound = {k: v for k, v in header.items() if k not in ("chain_id", "pool_contract", "pool_id")}
    with pytest.raises(RolloutSchemaError, match="invalid header: chain_id"):
        decode_rollouts(_with(table, unbound))
    with pytest.raises(RolloutSchemaError, match="invalid header: worker"):
        decode_rollouts(_with(table, {**header, "worker": "alice"}))
    with pytest.raises(RolloutSchemaError, match="do not match schema"):
        decode_rollouts(_with(table.drop_columns(["seed"])))
    with pytest.raises(RolloutSchemaError, match="do not match schema"):
        decode_rollouts(_with(table.set_column(6, "reward", pa.array([1.0] * 4, pa.float64()))))
    with pytest.raises(RolloutSchemaError, match="invalid sample: 0.finish_reason|invalid sample: finish_reason"):
        decode_rollouts(_with(table.set_column(7, "finish_reason", pa.array(["stop"] * 4))))
    with pytest.raises(RolloutSchemaError, match="proofs, expected"):
        decode_rollouts(_with(table.set_column(9, "proofs", pa.array([[]] * 4, pa.list_(pa.binary())))))
    with pytest.raises(RolloutSchemaError, match="prompt differs"):
        decode_rollouts(_with(table.set_column(2, "prompt_index", pa.array([10, 99, 11, 11], pa.int64()))))


def test_missing_file_is_a_rollout_file_error(tmp_path):
    with pytest.raises(RolloutFileError, match="cannot read"):
        read_rollout_file(tmp_path / "absent.parquet")


def test_a_file_without_proofs_declares_proof_chunk_zero():
    batch = _batch(proof_chunk=0)
    assert decode_rollouts(encode_rollouts(batch)) == batch
