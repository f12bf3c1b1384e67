"""The rollout file: what a worker submits, a validator checks and the trainer learns from.

Format: Apache Parquet, one row per completion, with the file-level header as JSON under
the schema metadata key `proofswarm.rollouts`. Version 3 columns:

| column         | type          | meaning                                                      |
|----------------|---------------|--------------------------------------------------------------|
| group          | int32         | prompt group within the file, 0…n_groups−1                   |
| sample         | int32         | completion within its group, 0…group_size−1                  |
| prompt_index   | int64         | index of the prompt in the task's train split                |
| prompt_ids     | list<int32>   | prompt token ids, as fed to the policy                       |
| completion_ids | list<int32>   | sampled token ids (EOS included when the completion stopped) |
| logprobs       | list<float32> | the worker's log-probability of each sampled token           |
| reward         | float32       | the task verifier's reward, as the worker computed it        |
| finish_reason  | string        | "eos" or "length"                                            |
| seed           | uint64        | Gumbel sampling seed: proofs.sampling.derive_seed(pool seed, |
|                |               | worker, policy_step, nonce × n_rows + row)                   |
| proofs         | list<binary>  | TOPLOC proof per chunk of `proof_chunk` completion tokens    |

Header (`RolloutHeader`): schema version; the submission binding (protocol.submission) — chain id,
pool contract, pool id, worker, policy step, nonce — which must equal the on-chain `submitWork`
record; the manifest digest of the policy used, task spec, sampling spec
(protocol.runspec.SamplingSpec) and proof chunk size. Readers validate everything and raise
`RolloutSchemaError` otherwise.
"""

from __future__ import annotations

import io
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from protocol.digest import Digest
from protocol.runspec import SamplingSpec
from protocol.submission import ADDRESS_PATTERN, SubmissionBinding
from tasks.registry import TaskSpec

SCHEMA_NAME = "proofswarm.rollouts"
SCHEMA_VERSION = 3
METADATA_KEY = SCHEMA_NAME.encode()

ARROW_SCHEMA = pa.schema(
    [
        ("group", pa.int32()),
        ("sample", pa.int32()),
        ("prompt_index", pa.int64()),
        ("prompt_ids", pa.list_(pa.int32())),
        ("completion_ids", pa.list_(pa.int32())),
        ("logprobs", pa.list_(pa.float32())),
        ("reward", pa.float32()),
        ("finish_reason", pa.string()),
        ("seed", pa.uint64()),
        ("proofs", pa.list_(pa.binary())),
    ]
)


class RolloutFileError(Exception):
    """A rollout file cannot be read or written."""


class RolloutSchemaError(RolloutFileError):
    """A rollout file is not a valid proofswarm rollout file of a supported version."""


class RolloutHeader(BaseModel):
    """File-level facts shared by every completion in the file."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_name: Literal["proofswarm.rollouts"] = SCHEMA_NAME
    version: Literal[3] = SCHEMA_VERSION
    chain_id: int = Field(ge=0, description="chain of the pool contract (0 in local mode)")
    pool_contract: str = Field(pattern=ADDRESS_PATTERN, description="the ComputePool the file is submitted to")
    pool_id: int = Field(ge=0)
    worker: str = Field(pattern=ADDRESS_PATTERN)
    policy_step: int = Field(ge=0, description="the step submitted with, whose policy generated the file")
    nonce: int = Field(ge=0, description="the worker's submission nonce in the pool; prompts derive from it")
    manifest_digest: Digest = Field(description="digest of the policy checkpoint's manifest")
    task: TaskSpec = Field(description="the task the prompts and rewards come from")
    sampling: SamplingSpec
    proof_chunk: int = Field(ge=0, description="tokens per TOPLOC proof; 0 = the file carries no proofs")

    @property
    def binding(self) -> SubmissionBinding:
        """The submission this file declares itself to be."""
        return SubmissionBinding(chain_id=self.chain_id, pool_contract=self.pool_contract, pool_id=self.pool_id,
                                 worker=self.worker, step=self.policy_step, nonce=self.nonce)

    @classmethod
    def bound(cls, binding: SubmissionBinding, **fields: Any) -> RolloutHeader:
        """A header carrying `binding` (plus the policy, task and sampling `fields`)."""
        return cls(chain_id=binding.chain_id, pool_contract=binding.pool_contract, pool_id=binding.pool_id,
                   worker=binding.worker, policy_step=binding.step, nonce=binding.nonce, **fields)


class RolloutSample(BaseModel):
    """One completion of one prompt."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group: int = Field(ge=0)
    sample: int = Field(ge=0)
    prompt_index: int = Field(ge=0)
    prompt_ids: list[int] = Field(min_length=1)
    completion_ids: list[int] = Field(min_length=1)
    logprobs: list[float]
    reward: float
    finish_reason: Literal["eos", "length"]
    seed: int = Field(ge=0, lt=2**64)
    proofs: list[bytes]


class RolloutBatch(BaseModel):
    """A validated rollout file's content: header plus samples ordered by (group, sample)."""

    model_config = ConfigDict(frozen=True)

    header: RolloutHeader
    samples: list[RolloutSample]

    @property
    def n_groups(self) -> int:
        return len(self.samples) // self.header.sampling.group_size


def _check_consistency(batch: RolloutBatch) -> None:
    header, samples = batch.header, batch.samples
    group_size, max_tokens = header.sampling.group_size, header.sampling.max_tokens
    if not samples:
        raise RolloutSchemaError("rollout file has no samples")
    if len(samples) % group_size:
        raise RolloutSchemaError(f"{len(samples)} samples is not a multiple of group_size {group_size}")
    for position, s in enumerate(samples):
        group, sample = divmod(position, group_size)
        where = f"row {position}"
        if (s.group, s.sample) != (group, sample):
            raise RolloutSchemaError(f"{where}: expected group {group} sample {sample}, got {s.group}/{s.sample}")
        first = samples[group * group_size]
        if s.prompt_index != first.prompt_index or s.prompt_ids != first.prompt_ids:
            raise RolloutSchemaError(f"{where}: prompt differs from the rest of group {group}")
        if len(s.logprobs) != len(s.completion_ids):
            raise RolloutSchemaError(f"{where}: {len(s.logprobs)} logprobs for {len(s.completion_ids)} tokens")
        if len(s.completion_ids) > max_tokens:
            raise RolloutSchemaError(f"{where}: {len(s.completion_ids)} tokens exceed max_tokens {max_tokens}")
        if s.finish_reason == "length" and len(s.completion_ids) != max_tokens:
            raise RolloutSchemaError(f"{where}: finish_reason 'length' but only {len(s.completion_ids)} tokens")
        if not all(math.isfinite(x) and x <= 0.0 for x in s.logprobs):
            raise RolloutSchemaError(f"{where}: logprobs must be finite and <= 0")
        if not math.isfinite(s.reward):
            raise RolloutSchemaError(f"{where}: reward is not finite")
        expected_proofs = math.ceil(len(s.completion_ids) / header.proof_chunk) if header.proof_chunk else 0
        if len(s.proofs) != expected_proofs:
            raise RolloutSchemaError(f"{where}: {len(s.proofs)} proofs, expected {expected_proofs}")


def encode_rollouts(batch: RolloutBatch) -> bytes:
    """Serialise a batch to Parquet bytes (validated first)."""
    _check_consistency(batch)
    columns: dict[str, list[Any]] = {name: [] for name in ARROW_SCHEMA.names}
    for s in batch.samples:
        for name in ARROW_SCHEMA.names:
            columns[name].append(getattr(s, name))
    metadata = {METADATA_KEY: batch.header.model_dump_json().encode()}
    table = pa.Table.from_pydict(columns, schema=ARROW_SCHEMA.with_metadata(metadata))
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def decode_rollouts(data: bytes) -> RolloutBatch:
    """Parse and validate Parquet bytes; RolloutSchemaError names the first problem."""
    try:
        table = pq.read_table(io.BytesIO(data))
    except (pa.ArrowException, OSError) as exc:
        raise RolloutSchemaError(f"not a Parquet file: {exc}") from exc
    raw_header = (table.schema.metadata or {}).get(METADATA_KEY)
    if raw_header is None:
        raise RolloutSchemaError(f"no '{SCHEMA_NAME}' header in the file metadata")
    try:
        header_json = json.loads(raw_header)
    except json.JSONDecodeError as exc:
        raise RolloutSchemaError(f"header is not JSON: {exc.msg}") from exc
    if isinstance(header_json, dict) and header_json.get("version") != SCHEMA_VERSION:
        raise RolloutSchemaError(f"unsupported rollout schema version {header_json.get('version')!r}; this reader knows {SCHEMA_VERSION}")
    try:
        header = RolloutHeader.model_validate(header_json)
    except ValidationError as exc:
        raise RolloutSchemaError(f"invalid header: {_first_error(exc)}") from exc
    if not table.schema.remove_metadata().equals(ARROW_SCHEMA):
        raise RolloutSchemaError(f"columns {table.schema.names} with types {[str(t) for t in table.schema.types]} do not match schema v{SCHEMA_VERSION}")
    rows = table.to_pylist()
    try:
        samples = [RolloutSample.model_validate(row) for row in rows]
    except ValidationError as exc:
        raise RolloutSchemaError(f"invalid sample: {_first_error(exc)}") from exc
    batch = RolloutBatch(header=header, samples=samples)
    _check_consistency(batch)
    return batch


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    return f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"


def write_rollout_file(path: str | Path, batch: RolloutBatch) -> None:
    """Write atomically: a temp file in the same folder, then rename over `path`."""
    path = Path(path)
    data = encode_rollouts(batch)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        raise RolloutFileError(f"cannot write {path}: {exc.strerror}") from exc


def read_rollout_file(path: str | Path) -> RolloutBatch:
    """Read and validate a rollout file."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise RolloutFileError(f"cannot read {path}: {exc.strerror}") from exc
    return decode_rollouts(data)
